"""An optimizer step over the parameters of the GPT model of benchmarks/gpt.py
("issue" size): AdamW and SGD with momentum, `fused=True` next to
`foreach=True` on tpu in strict and defer_and_fuse, and PyTorch's CPU fused
step, interleaved in rounds on one machine. Prints steps/s and the ratios of
the medians."""
import argparse
import statistics
import time

import torch

import torch_tpu
from gpt import GPT, SIZES


def params(device):
    torch.manual_seed(0)
    size = {k: v for k, v in SIZES["issue"].items() if k != "batch"}
    m = GPT(**size).to(device)
    ps = list(m.parameters())
    for p in ps:
        p.grad = torch.randn_like(p) * 1e-3
    return ps


def steps_per_s(device, cls, kw, mode, steps):
    ps = params(device)
    opt = cls(ps, **kw)
    sync = torch.tpu.synchronize if device == "tpu" else (lambda: None)
    with torch_tpu.eager_mode(mode):
        for _ in range(2):  # state creation and compilation
            opt.step()
        sync()
        start = time.perf_counter()
        for _ in range(steps):
            opt.step()
        sync()
    return steps / (time.perf_counter() - start)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--rounds", type=int, default=5)
    a = p.parse_args()
    optimizers = {
        "AdamW": (torch.optim.AdamW, dict(lr=1e-3, weight_decay=0.01)),
        "SGD momentum": (torch.optim.SGD, dict(lr=1e-2, momentum=0.9)),
    }
    variants = [("tpu", "fused", "strict"), ("tpu", "foreach", "strict"),
                ("tpu", "fused", "defer_and_fuse"), ("tpu", "foreach", "defer_and_fuse"),
                ("cpu", "fused", "strict")]
    n = sum(t.numel() for t in params("cpu"))
    print(f"platform: {torch_tpu.platform()['platform_name']}; {n / 1e6:.2f}M parameters, "
          f"{a.rounds} interleaved rounds of {a.steps} steps")
    for name, (cls, kw) in optimizers.items():
        samples = {v: [] for v in variants}
        for _ in range(a.rounds):
            for v in variants:
                device, how, mode = v
                samples[v].append(steps_per_s(device, cls, dict(kw, **{how: True}), mode, a.steps))
        med = {v: statistics.median(s) for v, s in samples.items()}
        print(f"\n{name}")
        for v in variants:
            label = "cpu eager fused" if v[0] == "cpu" else f"tpu {v[2]} {v[1]}"
            print(f"  {label:28s} {med[v]:8.1f} steps/s")
        for mode in ("strict", "defer_and_fuse"):
            r = med[("tpu", "fused", mode)] / med[("tpu", "foreach", mode)]
            print(f"  fused / foreach ({mode}): {r:.2f}x")
        print(f"  tpu strict fused / cpu fused: {med[('tpu', 'fused', 'strict')] / med[('cpu', 'fused', 'strict')]:.2f}x")


if __name__ == "__main__":
    main()
