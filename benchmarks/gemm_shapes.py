"""The GEMM platform kernel (csrc/kernels/gemm.cpp: MKL) against XLA's dot, per shape class.

For each product [B,] M x K @ K x N (operands stored as the lowering passes them:
NN, NT = the rhs transposed as nn.Linear's weight, TN = the lhs transposed as a
weight gradient's), f32 and bf16, times in one process, interleaved:
- the kernel: its typed-FFI custom call alone in a tpu program,
- XLA's dot: a dot_general alone in a tpu program (a StableHLO module),
- PyTorch's CPU matmul on the same numbers (MKL / oneDNN),
each the best of several rounds of many launches (this machine is shared), and
prints GFLOP/s and the kernel's speed-up over XLA's dot. The table in
csrc/lowering/gemm_choice.cpp is written from its output.

    python3 benchmarks/gemm_shapes.py [--quick]
"""
import argparse
import itertools
import time

import torch

import torch_tpu
from torch_tpu.kernels import platform as platform_kernels
from torch_tpu.kernels.ffi import ffi_op

_MLIR = {torch.float32: "f32", torch.bfloat16: "bf16"}


def _type(shape, dtype):
    return "tensor<" + "x".join(map(str, shape)) + "x" + _MLIR[dtype] + ">"


def xla_dot(a_shape, b_shape, dtype, ta, tb, batched):
    """A tpu op running one stablehlo.dot_general (f32 accumulation) on operands stored as given."""
    r = 1 if batched else 0
    lc, rc = (r if ta else r + 1), (r + 1 if tb else r)
    M, N = a_shape[r + 1] if ta else a_shape[r], b_shape[r] if tb else b_shape[r + 1]
    out = ((a_shape[0],) if batched else ()) + (M, N)
    text = f"""
func.func @main(%a: {_type(a_shape, dtype)}, %b: {_type(b_shape, dtype)}) -> {_type(out, torch.float32)} {{
  %0 = stablehlo.dot_general %a, %b, {'batching_dims = [0] x [0], ' if batched else ''}contracting_dims = [{lc}] x [{rc}]
       : ({_type(a_shape, dtype)}, {_type(b_shape, dtype)}) -> {_type(out, torch.float32)}
  return %0 : {_type(out, torch.float32)}
}}
"""
    name = f"gemm_shapes::dot_{'x'.join(map(str, a_shape))}_{'x'.join(map(str, b_shape))}_{_MLIR[dtype]}_{int(ta)}{int(tb)}"
    return torch_tpu.stablehlo_op(name, text)


_kernels = {}


def kernel(ta, tb):
    """The GEMM kernel's custom call as a tpu op."""
    if (ta, tb) not in _kernels:
        def result(a, b):
            (_, sa), (_, sb) = a, b
            r = len(sa) - 2
            return torch.float32, tuple(sa[:r]) + (sa[r + 1] if ta else sa[r], sb[r] if tb else sb[r + 1])

        _kernels[ta, tb] = ffi_op(f"gemm_shapes::kernel_{int(ta)}{int(tb)}", platform_kernels.target("gemm"), result,
                                  attributes={"transpose_lhs": ta, "transpose_rhs": tb}, nargs=2)
    return _kernels[ta, tb]


def best_of(fn, seconds=0.15, rounds=5):
    out = fn()
    if out.device.type == "tpu":
        torch.tpu.synchronize()
    start = time.perf_counter()
    fn()
    torch.tpu.synchronize()
    one = max(time.perf_counter() - start, 1e-5)
    launches = max(1, int(seconds / one))
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(launches):
            out = fn()
        if out.device.type == "tpu":
            torch.tpu.synchronize()
        best = min(best, (time.perf_counter() - start) / launches)
    return best


def measure(M, N, K, layout, dtype, batch=None):
    ta, tb = layout[0] == "T", layout[1] == "T"
    pre = (batch,) if batch else ()
    a = torch.randn(*pre, *((K, M) if ta else (M, K))).to(dtype)
    b = torch.randn(*pre, *((N, K) if tb else (K, N))).to(dtype)
    at, bt = a.to("tpu"), b.to("tpu")
    dot = xla_dot(tuple(a.shape), tuple(b.shape), dtype, ta, tb, batch is not None)
    gemm = kernel(ta, tb)
    torch.testing.assert_close(gemm(at, bt).cpu(), dot(at, bt).cpu(), rtol=1e-3, atol=1e-2)
    ac = a.transpose(-1, -2) if ta else a
    bc = b.transpose(-1, -2) if tb else b
    times = {"kernel": [], "xla": [], "torch": []}
    for r in range(2):  # interleaved
        for name, fn in ([("kernel", lambda: gemm(at, bt)), ("xla", lambda: dot(at, bt))][:: 1 if r == 0 else -1]
                         + [("torch", lambda: torch.matmul(ac, bc))]):
            times[name].append(best_of(fn))
    return {k: min(v) for k, v in times.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="the GPT benchmark's training products only")
    args = ap.parse_args()
    if not platform_kernels.target("gemm"):
        raise SystemExit("the GEMM kernel does not run here (TORCH_TPU_KERNELS=composite, no MKL in libtorch_cpu, "
                         "or a plugin without FFI)")
    cases = []
    if args.quick:
        # The products of benchmarks/compile.py's GPT training step at the "issue" size, as
        # its program passes them (M, N, K, layout; batched attention products last).
        for M, N, K, lay in [(1024, 768, 256, "NT"), (1024, 256, 256, "NT"), (1024, 1024, 256, "NT"),
                             (1024, 256, 1024, "NT"), (1024, 4096, 256, "NT"), (1024, 256, 768, "NN"),
                             (1024, 256, 1024, "NN"), (1024, 1024, 256, "NN"), (1024, 256, 256, "NN"),
                             (1024, 256, 4096, "NN"), (768, 256, 1024, "TN"), (4096, 256, 1024, "TN"),
                             (256, 1024, 1024, "TN"), (1024, 256, 1024, "TN"), (256, 256, 1024, "TN")]:
            cases.append((M, N, K, lay, torch.float32, None))
        for M, N, K, lay in [(128, 128, 64, "NT"), (128, 128, 64, "NN"), (128, 64, 128, "NN"), (64, 128, 128, "TN")]:
            cases.append((M, N, K, lay, torch.float32, 32))
    else:
        for (M, N, K), lay in itertools.product(itertools.product([32, 256, 1024], [256, 1024, 4096], [64, 256, 1024]),
                                                ["NN", "NT", "TN"]):
            cases.append((M, N, K, lay, torch.float32, None))
        for M, N, K in itertools.product([32, 256, 1024], [256, 1024, 4096], [64, 256, 1024]):
            cases.append((M, N, K, "NT", torch.bfloat16, None))
        for M, N, K in [(128, 128, 64), (128, 64, 128), (32, 32, 64), (512, 512, 64)]:
            for lay in ["NN", "NT"]:
                cases.append((M, N, K, lay, torch.float32, 32))
    print(f"{'dtype':5} {'batch':>5} {'M':>5} {'N':>5} {'K':>5} {'op':3} {'kernel GF/s':>12} {'xla dot GF/s':>13} "
          f"{'torch GF/s':>11} {'xla/kernel time':>16}", flush=True)
    with torch.inference_mode():
        for M, N, K, lay, dtype, batch in cases:
            t = measure(M, N, K, lay, dtype, batch)
            flop = 2 * M * N * K * (batch or 1) / 1e9
            print(f"{_MLIR[dtype]:5} {batch or 1:5} {M:5} {N:5} {K:5} {lay:3} {flop / t['kernel']:12.1f} "
                  f"{flop / t['xla']:13.1f} {flop / t['torch']:11.1f} {t['xla'] / t['kernel']:16.2f}", flush=True)


if __name__ == "__main__":
    main()
