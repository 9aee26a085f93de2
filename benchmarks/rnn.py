"""A 2-layer nn.LSTM over a long sequence on `tpu`, each path it can take,
next to PyTorch's CPU eager, measured side by side in one run.

Forward (no gradients):
  - device loop: eager strict, each layer one device while loop (one program
    for the whole sequence);
  - per step: eager strict with gradients recorded, PyTorch's composite
    calling the fused cell every step (the path training takes);
  - defer_and_fuse, per step, gradients recorded;
  - torch.compile(backend="tpu"), no gradients.
Forward + backward: per step in strict and defer_and_fuse, and compiled.
Every tpu path's result is checked against the CPU's first. Prints
milliseconds per call (median) and the ratio to the CPU; writes JSON.

    python3 benchmarks/rnn.py [--steps 128] [--batch 16] [--input 32] [--hidden 64]
"""
import argparse
import copy
import json
import os
import statistics
import time

import torch

import torch_tpu


def timed(fn, sync, repeats):
    fn()  # warm-up: compiles what the path needs
    sync()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=128)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--input", type=int, default=32)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", default="benchmarks/results/rnn.json")
    a = p.parse_args()

    torch.manual_seed(0)
    cpu = torch.nn.LSTM(a.input, a.hidden, num_layers=2)
    tpu = copy.deepcopy(cpu).to("tpu")
    compiled = torch.compile(tpu, backend="tpu")
    x_cpu = torch.randn(a.steps, a.batch, a.input)
    x = x_cpu.to("tpu")
    sync = torch.tpu.synchronize

    def forward(module, inp, grad):
        with torch.set_grad_enabled(grad):
            return module(inp)[0]

    def train_step(module, inp):
        module.zero_grad(set_to_none=True)
        out = module(inp)[0]
        out.square().mean().backward()
        return out

    # Each path's result against the CPU's before any timing.
    want = forward(cpu, x_cpu, False)
    rtol, atol = 1e-4, 1e-5
    checks = {
        "device loop": lambda: forward(tpu, x, False),
        "per step": lambda: forward(tpu, x, True),
        "compile": lambda: forward(compiled, x, False),
    }
    for name, fn in checks.items():
        torch.testing.assert_close(fn().detach().cpu(), want, rtol=rtol, atol=atol, msg=name)

    def in_mode(mode, fn):
        def run():
            with torch_tpu.eager_mode(mode):
                fn()
        return run

    nothing = lambda: None  # noqa: E731
    rows = {
        "forward": {
            "cpu eager": timed(lambda: forward(cpu, x_cpu, False), nothing, a.repeats),
            "tpu device loop (strict, no grad)": timed(lambda: forward(tpu, x, False), sync, a.repeats),
            "tpu per step (strict, grad recorded)": timed(lambda: forward(tpu, x, True), sync, a.repeats),
            "tpu per step (defer_and_fuse, grad recorded)": timed(
                in_mode("defer_and_fuse", lambda: forward(tpu, x, True)), sync, a.repeats),
            "tpu torch.compile (no grad)": timed(lambda: forward(compiled, x, False), sync, a.repeats),
        },
        "forward+backward": {
            "cpu eager": timed(lambda: train_step(cpu, x_cpu), nothing, a.repeats),
            "tpu per step (strict)": timed(lambda: train_step(tpu, x), sync, a.repeats),
            "tpu per step (defer_and_fuse)": timed(in_mode("defer_and_fuse", lambda: train_step(tpu, x)), sync,
                                                   a.repeats),
            "tpu torch.compile": timed(lambda: train_step(compiled, x), sync, a.repeats),
        },
    }
    print(f"platform: {torch_tpu.platform()['platform_name']}; 2-layer LSTM, {a.steps} steps, batch {a.batch}, "
          f"input {a.input}, hidden {a.hidden}, float32; median of {a.repeats}")
    results = {"config": vars(a), "ms": rows, "ratio_over_cpu": {}}
    for kind, row in rows.items():
        base = row["cpu eager"]
        results["ratio_over_cpu"][kind] = {k: v / base for k, v in row.items()}
        print(f"\n{kind}")
        for k, v in row.items():
            print(f"  {k:46s} {v:10.2f} ms   {v / base:8.2f}x cpu")
    if a.out:
        os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
        with open(a.out, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
