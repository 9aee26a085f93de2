"""The first call of a jax_op in a fresh process, with and without its traced
module in the persistent cache. Each round starts a process against an empty
cache folder (JAX imported, the kernel traced, the program compiled) and then
a second process against the folder the first one filled (the traced text and
the executable read from disk; JAX not importable). Each child prints how
long importing torch_tpu took and how long the kernel's definition and first
call (forward and derived backward) took, to the result on the host; this
prints the medians side by side and the ratio.

    python3 benchmarks/kernel_trace_cache.py [--rounds 3]"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

CHILD = textwrap.dedent("""
    import os, sys, time
    if os.environ.get("NO_JAX"):
        sys.modules["jax"] = None
    t0 = time.perf_counter()
    import torch, torch_tpu
    from torch_tpu.pallas import jax_op
    t1 = time.perf_counter()

    def rms(x, w):
        import jax
        import jax.numpy as jnp
        return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w

    x = torch.randn(64, 256, device="tpu", requires_grad=True)
    w = torch.randn(256, device="tpu", requires_grad=True)
    torch.tpu.synchronize()
    t2 = time.perf_counter()
    op = jax_op("bench::rms", rms)
    y = op(x, w)
    y.sum().backward()
    x.grad.cpu()
    t3 = time.perf_counter()
    print("import", t1 - t0, "first_call", t3 - t2, "jax", sys.modules.get("jax") is not None)
""")


def child(cache, **env):
    e = dict(os.environ, TORCH_TPU_CACHE_DIR=cache, **env)
    r = subprocess.run([sys.executable, "-c", CHILD], env=e, capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0:
        raise SystemExit(r.stderr)
    f = r.stdout.split()
    return float(f[1]), float(f[3]), f[5] == "True"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    traced, cached = [], []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as cache:
            traced.append(child(cache))
            cached.append(child(cache, NO_JAX="1"))
    assert all(t[2] for t in traced) and not any(c[2] for c in cached)
    med = lambda rows, i: statistics.median(r[i] for r in rows)  # noqa: E731
    print(f"{'':34}{'import torch_tpu':>18}{'definition + first call':>26}")
    print(f"{'process 1 (empty cache, traces)':34}{med(traced, 0):>17.3f}s{med(traced, 1):>25.3f}s")
    print(f"{'process 2 (cached, no JAX)':34}{med(cached, 0):>17.3f}s{med(cached, 1):>25.3f}s")
    print(f"first call: traced / cached = {med(traced, 1) / med(cached, 1):.1f}x "
          f"(medians of {args.rounds} rounds; per round: "
          + ", ".join(f"{t[1]:.2f}s/{c[1]:.2f}s" for t, c in zip(traced, cached)) + ")")


if __name__ == "__main__":
    main()
