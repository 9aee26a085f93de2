"""Profiler overhead on the GPT training step (benchmarks/gpt.py): steps/s
with torch.profiler (CPU + PrivateUse1 activities) around the steps, next to
the same steps unprofiled, interleaved in rounds within one run.

    python3 benchmarks/profiler_overhead.py [--size small|issue] [--rounds 5] [--steps 5]
"""
import argparse
import statistics
import time

import torch
from torch.profiler import ProfilerActivity, profile

import torch_tpu
from gpt import SIZES, adamw_train_step


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="small", choices=sorted(SIZES))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--mode", default="strict")
    args = ap.parse_args()
    torch_tpu.set_eager_mode(args.mode)
    step = adamw_train_step(args.size)

    def steps():
        for _ in range(args.steps):
            loss = step()
        loss.item()
        torch.tpu.synchronize()

    def timed(profiled, activities=(ProfilerActivity.CPU, ProfilerActivity.PrivateUse1)):
        t = time.perf_counter()
        if profiled:
            with profile(activities=list(activities)) as p:
                steps()
            p.key_averages()  # the trace's post-processing is part of the cost
        else:
            steps()
        return args.steps / (time.perf_counter() - t)

    steps()  # compile
    plain, profiled, cpu_only = [], [], []
    for _ in range(args.rounds):
        plain.append(timed(False))
        profiled.append(timed(True))
        cpu_only.append(timed(True, (ProfilerActivity.CPU,)))
    ratios = [p / q for p, q in zip(profiled, plain)]
    print(f"GPT training step, size {args.size}, eager mode {args.mode}, "
          f"{args.rounds} rounds of {args.steps} steps")
    print(f"  not profiled: {statistics.median(plain):8.2f} steps/s")
    print(f"  profiled:     {statistics.median(profiled):8.2f} steps/s (CPU + PrivateUse1)")
    print(f"  CPU only:     {statistics.median(cpu_only):8.2f} steps/s (ProfilerActivity.CPU alone)")
    print(f"  CPU-only profiled / not profiled: "
          f"{statistics.median(cpu_only) / statistics.median(plain):.3f}")
    print(f"  profiled / not profiled: {statistics.median(profiled) / statistics.median(plain):.3f} "
          f"(paired per round: median {statistics.median(ratios):.3f}, "
          f"range {min(ratios):.3f}..{max(ratios):.3f})")


if __name__ == "__main__":
    main()
