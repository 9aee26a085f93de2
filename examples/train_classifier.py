"""Trains a small MLP classifier on synthetic data on `tpu`, and the same model
from the same initial weights on the CPU, and prints the platform, the loss
per step on both, and the largest difference between them."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu


def make_data(n=512, features=32, classes=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(classes, features, generator=g) * 0.3
    y = torch.randint(0, classes, (n,), generator=g)
    x = centers[y] + torch.randn(n, features, generator=g)
    return x, y


class MLP(nn.Module):
    def __init__(self, features=32, hidden=64, classes=8):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(features, hidden), nn.GELU(), nn.LayerNorm(hidden),
            nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, classes))

    def forward(self, x):
        return self.net(x)


def train(device, steps, optimizer, x, y, init_state):
    model = MLP().to(device)
    model.load_state_dict(init_state)
    if optimizer == "adamw":
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    xd, yd = x.to(device), y.to(device)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(xd), yd)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--optimizer", choices=["sgd", "adamw"], default="adamw")
    args = parser.parse_args()

    plat = torch_tpu.platform()
    print(f"tpu platform: {plat['platform_name']} via {plat['plugin_reason']} "
          f"({plat['plugin_path']}, PJRT C API {plat['pjrt_api_version']})")
    torch.manual_seed(0)
    init_state = MLP().state_dict()
    x, y = make_data()
    tpu_losses = train("tpu", args.steps, args.optimizer, x, y, init_state)
    cpu_losses = train("cpu", args.steps, args.optimizer, x, y, init_state)
    print(f"{'step':>4}  {'tpu loss':>10}  {'cpu loss':>10}")
    for i, (a, b) in enumerate(zip(tpu_losses, cpu_losses)):
        print(f"{i:4d}  {a:10.6f}  {b:10.6f}")
    diff = max(abs(a - b) for a, b in zip(tpu_losses, cpu_losses))
    rel = max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(tpu_losses, cpu_losses))
    print(f"largest |tpu - cpu| loss difference: {diff:.3e} (relative {rel:.3e})")


if __name__ == "__main__":
    main()
