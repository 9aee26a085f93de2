"""The first call of a jax_op in a fresh process, with and without its traced
module in the persistent cache. Each round starts, against one new cache
folder: process 1 (empty cache: JAX imported, the kernel traced, the programs
compiled); process 2 (the traced text and the programs read from disk; JAX
not importable); process 3 (JAX importable, the same kernel but closing over
a list, so kept out of the trace cache: traced again, programs read from
disk), which separates the trace from the compile. Each child prints how long
importing torch_tpu took and how long the kernel's definition and first call
(forward and derived backward, to the result on the host) took; this prints
the medians side by side and the ratios.

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

    state = [] if os.environ.get("UNSAFE") else ()

    def rms(x, w):
        state  # a list here keeps the kernel out of the trace cache
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
    traced, cached, retraced = [], [], []
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as cache:
            traced.append(child(cache))
            cached.append(child(cache, NO_JAX="1"))
            retraced.append(child(cache, UNSAFE="1"))
    assert all(t[2] for t in traced + retraced) and not any(c[2] for c in cached)
    med = lambda rows, i: statistics.median(r[i] for r in rows)  # noqa: E731
    rows = [("1: empty cache (traces, compiles)", traced),
            ("2: cached text + programs, no JAX", cached),
            ("3: programs cached, traces again", retraced)]
    print(f"{'process':36}{'import torch_tpu':>18}{'definition + first call':>26}")
    for label, r in rows:
        print(f"{label:36}{med(r, 0):>17.3f}s{med(r, 1):>25.3f}s")
    print(f"first call, medians of {args.rounds} rounds: 1 / 2 = "
          f"{med(traced, 1) / med(cached, 1):.1f}x, 3 / 2 = {med(retraced, 1) / med(cached, 1):.1f}x"
          " (per round 1/2/3: "
          + ", ".join(f"{t[1]:.2f}/{c[1]:.2f}/{u[1]:.2f}s"
                      for t, c, u in zip(traced, cached, retraced)) + ")")


if __name__ == "__main__":
    main()
