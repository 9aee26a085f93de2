"""A 2-layer nn.LSTM over a long sequence on `tpu`, each path it can take,
next to PyTorch's CPU eager, measured side by side in one run.

Forward:
  - whole stack: no gradients, eager strict: aten::lstm is one program, each
    layer one device while loop over time;
  - layer loops: gradients recorded, eager strict: one torch_tpu::rnn_layer
    program per layer (a device loop), as training runs it;
  - per step: PyTorch's composite aten::lstm, one fused cell per step (the
    path autocast and packed sequences take), gradients recorded, in strict
    and defer_and_fuse;
  - torch.compile(backend="tpu") (Dynamo told to trace RNN modules), no
    gradients.
Forward + backward: layer loops (strict), per step (strict, defer_and_fuse),
compiled. Every tpu path's result is checked against the CPU's first. Prints
milliseconds per call (median) and the ratio to the CPU; writes JSON.

    python3 benchmarks/rnn.py [--steps 128] [--batch 16] [--input 32] [--hidden 64]
"""
import argparse
import copy
import functools
import json
import os
import statistics
import time

import torch

import torch_tpu


def sample(fn, sync, repeats):
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


def measure(paths, repeats, rounds):
    """{name: median ms} over `rounds` rounds that visit every path in turn,
    so that drift on a shared machine hits all paths alike. paths: {name:
    (fn, sync)}; each is run once first (compiles what it needs)."""
    for fn, sync in paths.values():
        fn()
        sync()
    times = {name: [] for name in paths}
    for _ in range(rounds):
        for name, (fn, sync) in paths.items():
            times[name].append(sample(fn, sync, repeats))
    return {name: statistics.median(t) for name, t in times.items()}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=128)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--input", type=int, default=32)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", default="benchmarks/results/rnn.json")
    # defer_and_fuse records the per-step path into graphs of hundreds of
    # steps, which XLA's CPU compiler takes minutes over at 128 steps.
    p.add_argument("--no-defer", action="store_true", help="leave out the defer_and_fuse rows")
    # PyTorch's CPU threads spin: on a machine shared with other work, more
    # than one made the CPU rows 2-40x slower and erratic. 0 keeps PyTorch's default.
    p.add_argument("--cpu-threads", type=int, default=1)
    a = p.parse_args()

    if a.cpu_threads > 0:
        torch.set_num_threads(a.cpu_threads)
    torch.manual_seed(0)
    cpu = torch.nn.LSTM(a.input, a.hidden, num_layers=2)
    tpu = copy.deepcopy(cpu).to("tpu")
    torch._dynamo.config.allow_rnn = True  # Dynamo leaves RNN modules to eager otherwise
    compiled = torch.compile(tpu, backend="tpu")
    x_cpu = torch.randn(a.steps, a.batch, a.input)
    x = x_cpu.to("tpu")
    sync = torch.tpu.synchronize
    # PyTorch's C++ composite kernel of aten::lstm: the per-step path.
    composite = functools.partial(torch.ops.aten.lstm.input._op_dk, torch._C.DispatchKey.CompositeImplicitAutograd)

    def per_step(module, inp):
        h0 = torch.zeros(2, a.batch, a.hidden, device=inp.device)
        return composite(inp, (h0, h0), module._flat_weights, True, 2, 0.0, True, False, False)[0]

    def forward(module, inp, grad):
        with torch.set_grad_enabled(grad):
            return module(inp)[0]

    def train_step(run, module, inp):
        module.zero_grad(set_to_none=True)
        out = run(module, inp)
        out.square().mean().backward()
        return out

    plain = lambda module, inp: module(inp)[0]  # noqa: E731

    def in_mode(mode, fn):
        def run():
            with torch_tpu.eager_mode(mode):
                return fn()
        return run

    # Each path's result against the CPU's before any timing.
    want = forward(cpu, x_cpu, False)
    checks = {
        "whole stack": lambda: forward(tpu, x, False),
        "layer loops": lambda: forward(tpu, x, True),
        "per step": lambda: per_step(tpu, x),
        "compile": lambda: forward(compiled, x, False),
    }
    for name, fn in checks.items():
        torch.testing.assert_close(fn().detach().cpu(), want, rtol=1e-4, atol=1e-5, msg=name)

    nothing = lambda: None  # noqa: E731
    keep = lambda paths: {k: v for k, v in paths.items() if not (a.no_defer and "defer" in k)}  # noqa: E731
    rows = {
        "forward": measure(keep({
            "cpu eager": (lambda: forward(cpu, x_cpu, False), nothing),
            "tpu whole stack (strict, no grad)": (lambda: forward(tpu, x, False), sync),
            "tpu layer loops (strict, grad recorded)": (lambda: forward(tpu, x, True), sync),
            "tpu per step (strict, grad recorded)": (lambda: per_step(tpu, x), sync),
            "tpu per step (defer_and_fuse, grad recorded)": (in_mode("defer_and_fuse", lambda: per_step(tpu, x)),
                                                             sync),
            "tpu torch.compile (no grad)": (lambda: forward(compiled, x, False), sync),
        }), a.repeats, a.rounds),
        "forward+backward": measure(keep({
            "cpu eager": (lambda: train_step(plain, cpu, x_cpu), nothing),
            "tpu layer loops (strict)": (lambda: train_step(plain, tpu, x), sync),
            "tpu per step (strict)": (lambda: train_step(per_step, tpu, x), sync),
            "tpu per step (defer_and_fuse)": (in_mode("defer_and_fuse", lambda: train_step(per_step, tpu, x)),
                                              sync),
            "tpu torch.compile": (lambda: train_step(plain, compiled, x), sync),
        }), a.repeats, a.rounds),
    }
    print(f"platform: {torch_tpu.platform()['platform_name']}; 2-layer LSTM, {a.steps} steps, batch {a.batch}, "
          f"input {a.input}, hidden {a.hidden}, float32, {torch.get_num_threads()} CPU thread(s); median over {a.rounds} interleaved rounds of {a.repeats}")
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
