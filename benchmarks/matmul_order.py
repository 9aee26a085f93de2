"""nn.Linear's product x @ w.T on tpu in both operand orders, side by side.

XLA's CPU plugin runs the same product at different speeds depending on
which operand comes first in its dot; `lowering/matmul.cpp` emits the weight
first where that was measured faster (at most 32 rows of x, or at most 256
at depth >= 128). Per shape [M, K] @ [N, K].T this times, interleaved over
rounds in one process:
  x_first       a StableHLO dot with x first (the order PyTorch gives)
  weight_first  the same dot with w first, its result transposed back
  linear        F.linear on tpu: what the lowering emits
  torch_cpu     F.linear on PyTorch's CPU kernel (the host's own GEMM)
each as one program launched in a loop, and prints the medians and the
ratio x_first / weight_first. Writes benchmarks/results/matmul_order.json.

    python3 benchmarks/matmul_order.py [--rounds 5] [--shapes 32x256x1024,...]
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch_tpu
from torch_tpu.compile.capture import CapturedFunction

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = ["16x256x384", "32x256x1024", "32x64x256", "64x64x512", "128x64x512", "128x256x512",
          "256x256x1024", "1024x256x2048", "1024x256x32"]


def dot_module(m, k, n, weight_first):
    x, w = f"tensor<{m}x{k}xf32>", f"tensor<{n}x{k}xf32>"
    if not weight_first:
        body = (f"%0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [1] : ({x}, {w}) "
                f"-> tensor<{m}x{n}xf32>\n    return %0 : tensor<{m}x{n}xf32>")
    else:
        body = (f"%0 = stablehlo.dot_general %w, %x, contracting_dims = [1] x [1] : ({w}, {x}) "
                f"-> tensor<{n}x{m}xf32>\n"
                # A barrier, as the lowering has: XLA would fold the transpose into the dot.
                f"    %1 = stablehlo.optimization_barrier %0 : tensor<{n}x{m}xf32>\n"
                f"    %2 = stablehlo.transpose %1, dims = [1, 0] : (tensor<{n}x{m}xf32>) "
                f"-> tensor<{m}x{n}xf32>\n    return %2 : tensor<{m}x{n}xf32>")
    return (f"func.func @main(%x: {x}, %w: {w}) -> tensor<{m}x{n}xf32> {{\n    {body}\n}}\n")


def timed(fn, inputs, seconds=0.2):
    fn(inputs)
    torch.tpu.synchronize()
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        fn(inputs)
        n += 1
    torch.tpu.synchronize()
    return (time.perf_counter() - start) / n * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--shapes", default=",".join(SHAPES), help="MxKxN,...")
    args = ap.parse_args()
    torch.manual_seed(0)
    results = {}
    for shape in args.shapes.split(","):
        m, k, n = (int(v) for v in shape.split("x"))
        x, w = torch.randn(m, k), torch.randn(n, k)
        xd, wd = x.to("tpu"), w.to("tpu")
        ops = {name: torch_tpu.stablehlo_op(f"matmul_order::{name}_{m}_{k}_{n}",
                                            dot_module(m, k, n, name == "weight_first"))
               for name in ("x_first", "weight_first")}
        runs = {name: CapturedFunction(lambda a, b, op=op: [op(a, b)], name)
                for name, op in ops.items()}
        runs["linear"] = CapturedFunction(lambda a, b: [torch.nn.functional.linear(a, b)], "linear")
        expected = torch.nn.functional.linear(x, w)
        for name, run in runs.items():   # each order computes the product
            got = run([xd, wd])[0].cpu()
            torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-3, msg=f"{name} {shape}")
        times = {name: [] for name in (*runs, "torch_cpu")}
        for _ in range(args.rounds):
            for name, run in runs.items():
                times[name].append(timed(run, [xd, wd]))
            times["torch_cpu"].append(timed(lambda _: torch.nn.functional.linear(x, w), None))
        med = {name: statistics.median(v) for name, v in times.items()}
        results[shape] = med
        print(f"{shape:>14}  " + "  ".join(f"{name} {v:.3f} ms" for name, v in med.items())
              + f"  x_first/weight_first {med['x_first'] / med['weight_first']:.2f}x", flush=True)
    out = os.path.join(HERE, "results")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "matmul_order.json"), "w") as f:
        json.dump({"args": vars(args), "median_ms": results}, f, indent=1)


if __name__ == "__main__":
    main()
