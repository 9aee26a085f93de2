"""End to end: an MLP with GELU, LayerNorm and cross-entropy trains on `tpu`
with SGD and AdamW (foreach, the default) and follows the CPU's loss curve."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32),
            nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 5))

    def forward(self, x):
        return self.net(x)


def run(device, make_opt, steps=20):
    torch.manual_seed(0)
    model = MLP()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(64, 16, generator=g)
    y = torch.randint(0, 5, (64,), generator=g)
    model = model.to(device)
    opt = make_opt(model.parameters())
    xd, yd = x.to(device), y.to(device)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(xd), yd)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, {k: v.cpu() for k, v in model.state_dict().items()}


OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
    "adamw": lambda p: torch.optim.AdamW(p, lr=1e-2),
    "adamw_no_foreach": lambda p: torch.optim.AdamW(p, lr=1e-2, foreach=False),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_twenty_steps_match_cpu(name):
    tpu_losses, tpu_state = run("tpu", OPTIMIZERS[name])
    cpu_losses, cpu_state = run("cpu", OPTIMIZERS[name])
    assert tpu_losses[-1] < tpu_losses[0]  # it learns
    for a, b in zip(tpu_losses, cpu_losses):
        assert abs(a - b) <= 1e-5 * abs(b), (tpu_losses, cpu_losses)
    for k in cpu_state:
        torch.testing.assert_close(tpu_state[k], cpu_state[k], rtol=1e-4, atol=1e-5)
