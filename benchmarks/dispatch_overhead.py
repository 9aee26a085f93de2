"""Host cost of one eager op: a chain of small adds on `tpu` (strict mode,
every executable a cache hit) next to the same chain in PyTorch's CPU eager,
measured side by side in one run. Prints microseconds per op and the ratio."""
import argparse
import json
import statistics
import time

import torch

import torch_tpu


def chain(x, y, n):
    for _ in range(n):
        x = x + y
    return x


def time_chain(device, n, repeats, size):
    x = torch.ones(size).to(device)
    y = torch.full((size,), 0.5).to(device)
    sync = torch.tpu.synchronize if device == "tpu" else (lambda: None)
    chain(x, y, 10)  # warm-up: compiles the one executable the chain needs
    sync()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = chain(x, y, n)
        sync()
        samples.append((time.perf_counter() - start) / n * 1e6)
    expected = 1 + 0.5 * n
    assert torch.allclose(out.cpu(), torch.full((size,), expected)), "wrong result"
    return statistics.median(samples)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ops", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--size", type=int, default=16)
    p.add_argument("--json", default="")
    a = p.parse_args()
    results = {}
    # Interleave devices so drift on a shared machine hits both alike.
    tpu, cpu = [], []
    for _ in range(3):
        tpu.append(time_chain("tpu", a.ops, a.repeats, a.size))
        cpu.append(time_chain("cpu", a.ops, a.repeats, a.size))
    results["tpu_strict_us_per_op"] = statistics.median(tpu)
    results["cpu_eager_us_per_op"] = statistics.median(cpu)
    results["ratio_tpu_over_cpu"] = results["tpu_strict_us_per_op"] / results["cpu_eager_us_per_op"]
    print(f"platform: {torch_tpu.platform()['platform_name']}; chain of {a.ops} adds of "
          f"{a.size} float32 elements")
    print(f"tpu strict (cache hit): {results['tpu_strict_us_per_op']:8.2f} us/op")
    print(f"cpu eager             : {results['cpu_eager_us_per_op']:8.2f} us/op")
    print(f"ratio tpu/cpu         : {results['ratio_tpu_over_cpu']:8.2f}x")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
