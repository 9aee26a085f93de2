"""Host cost per op and per call (issue 29, item 4), each next to its peer in
the same run:

  strict op        one op of a chain of small adds on `tpu`, strict mode,
                   every executable a cache hit (launch included)
  record op        the same chain under defer_and_fuse: the host's cost of
                   recording it (the loop, without the final synchronize)
  compiled call N  one call of torch.compile(backend="tpu") of a function
                   summing N inputs of 16 elements (N = 1, 16, 256)
  cpu eager op     the chain of adds in PyTorch's CPU eager
  jax.jit call N   the same N-input function under jax.jit on the CPU

Rounds interleave the measurements so drift on a shared machine hits all of
them alike; each figure is the median of the rounds, with the spread (min-max)
shown to say how noisy the run was. Prints a table (microseconds) and writes
JSON (--json, default benchmarks/results/host_overhead.json).

    python3 benchmarks/host_overhead.py [--rounds 5] [--ops 1000] [--calls 300]
"""
import argparse
import json
import os
import statistics
import time
import types

import torch

import torch_tpu

SIZE = 16
INPUT_COUNTS = (1, 16, 256)


def chain(x, y, n):
    for _ in range(n):
        x = x + y
    return x


def op_cost(device, mode, n, record_only=False):
    """Microseconds per op of a chain of n adds."""
    x = torch.ones(SIZE).to(device)
    y = torch.full((SIZE,), 0.5).to(device)
    sync = torch.tpu.synchronize if device == "tpu" else (lambda: None)
    ctx = torch_tpu.eager_mode(mode) if device == "tpu" else _nothing()
    with ctx:
        chain(x, y, n)  # warm-up: compiles what the chain needs
        sync()
        start = time.perf_counter()
        out = chain(x, y, n)
        recorded = time.perf_counter()
        sync()
        done = time.perf_counter()
        assert torch.allclose(out.cpu(), torch.full((SIZE,), 1 + 0.5 * n)), "wrong result"
    return ((recorded if record_only else done) - start) / n * 1e6


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def summed(*xs):
    return sum(xs)  # 0 + x0 + ...: an op even for one input, so every N has a graph


def compiled_summed(n):
    """torch.compile of a copy of `summed` with a code object of its own:
    Dynamo keeps its cache on the code object, and a code object that once
    gave no graph (or ran past the recompile limit) runs eagerly from then on
    for every function sharing it -- the N-input calls would time eager ops."""
    code = summed.__code__.replace(co_name=f"summed_{n}")
    fn = types.FunctionType(code, summed.__globals__, f"summed_{n}")
    return torch.compile(fn, backend="tpu", dynamic=False)


def compiled_call_cost(fn, n_inputs, calls):
    xs = [torch.full((SIZE,), float(i)).to("tpu") for i in range(n_inputs)]
    for _ in range(3):  # compile and warm
        out = fn(*xs)
    torch.tpu.synchronize()
    runs = torch_tpu.dynamo.compile_stats()["runs"]
    start = time.perf_counter()
    for _ in range(calls):
        out = fn(*xs)
    torch.tpu.synchronize()
    took = (time.perf_counter() - start) / calls * 1e6
    want = torch.full((SIZE,), float(sum(range(n_inputs))))
    assert torch.allclose(out.cpu(), want), "wrong result"
    ran = torch_tpu.dynamo.compile_stats()["runs"] - runs
    assert ran == calls, f"{calls} calls ran {ran} compiled programs"
    return took


def jax_call_cost(fn, n_inputs, calls):
    import jax
    import jax.numpy as jnp
    xs = [jnp.full((SIZE,), float(i), dtype=jnp.float32) for i in range(n_inputs)]
    for _ in range(3):
        out = fn(*xs)
    jax.block_until_ready(out)
    start = time.perf_counter()
    for _ in range(calls):
        out = fn(*xs)
    jax.block_until_ready(out)
    took = (time.perf_counter() - start) / calls * 1e6
    assert float(out[0]) == float(sum(range(n_inputs))), "wrong result"
    return took


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--ops", type=int, default=1000)
    p.add_argument("--calls", type=int, default=300)
    p.add_argument("--json", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "results", "host_overhead.json"))
    a = p.parse_args()

    compiled = {n: compiled_summed(n) for n in INPUT_COUNTS}
    try:
        import jax
        jax.config.update("jax_platforms", "cpu")
        jitted = {n: jax.jit(summed) for n in INPUT_COUNTS}
    except ImportError:
        jitted = None

    samples = {}

    def add(name, value):
        samples.setdefault(name, []).append(value)

    for _ in range(a.rounds):
        add("strict op", op_cost("tpu", "strict", a.ops))
        add("record op (defer_and_fuse)", op_cost("tpu", "defer_and_fuse", a.ops, record_only=True))
        add("cpu eager op", op_cost("cpu", None, a.ops))
        for n in INPUT_COUNTS:
            add(f"compiled call, {n} inputs", compiled_call_cost(compiled[n], n, a.calls))
            if jitted:
                add(f"jax.jit call, {n} inputs", jax_call_cost(jitted[n], n, a.calls))

    results = {k: dict(median_us=statistics.median(v), min_us=min(v), max_us=max(v))
               for k, v in samples.items()}
    cpu = results["cpu eager op"]["median_us"]
    print(f"platform: {torch_tpu.platform()['platform_name']}; {a.rounds} interleaved rounds; "
          f"tensors of {SIZE} float32")
    print(f"{'measure':32} {'us (median)':>12} {'range':>17} {'vs peer':>10}")
    for k, r in results.items():
        peer = ""
        if k in ("strict op", "record op (defer_and_fuse)"):
            peer = f"{r['median_us'] / cpu:.2f}x cpu"
        elif k.startswith("compiled call") and jitted:
            j = results[k.replace("compiled call", "jax.jit call")]["median_us"]
            peer = f"{r['median_us'] / j:.2f}x jax"
        print(f"{k:32} {r['median_us']:12.2f} {r['min_us']:8.2f}-{r['max_us']:8.2f} {peer:>10}")
    if a.json:
        os.makedirs(os.path.dirname(a.json), exist_ok=True)
        with open(a.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
