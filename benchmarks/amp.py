"""bfloat16 autocast against float32: the GPT training step of benchmarks/gpt.py
(AdamW; autocast around the forward and the loss, as recipes do) with and
without `torch.autocast(dtype=torch.bfloat16)`, on `tpu` in strict and
defer_and_fuse and on the CPU (PyTorch eager, its own autocast), at both
gpt.SIZES, timed in interleaved rounds in one run. Prints steps per second and
the bf16 / fp32 ratio of each (of the medians, and paired within each round
with its range); writes JSON.

    python3 benchmarks/amp.py [--sizes issue,small] [--repeats 5]"""
import argparse
import json
import math
import os
import statistics

import torch

import torch_tpu
from eager_modes import context, make_train_step, sync, timed_block
from gpt import SIZES

# (device, eager mode or None for the CPU, autocast or not)
CONFIGS = [(dev, mode, amp) for dev, mode in (("cpu", None), ("tpu", "strict"), ("tpu", "defer_and_fuse"))
           for amp in (False, True)]


def name(config):
    dev, mode, amp = config
    return f"{mode or 'cpu_eager'}/{'bf16' if amp else 'fp32'}"


def measure(args):
    runs = {}
    for config in CONFIGS:
        dev, mode, amp = config
        mode = mode or "cpu_eager"
        with context(mode):
            step = make_train_step(dev, args, amp)
            for _ in range(args.warmup):
                step()
            sync(dev)
        steps = max(args.steps, math.ceil(0.3 / timed_block(step, dev, mode, 1)))
        timed_block(step, dev, mode, steps)  # untimed: defer_and_fuse's last cut may be new
        runs[config] = (step, dev, mode, steps)
    times = {name(c): [] for c in CONFIGS}
    for r in range(args.repeats):
        for config in CONFIGS if r % 2 == 0 else reversed(CONFIGS):
            step, dev, mode, steps = runs[config]
            times[name(config)].append(timed_block(step, dev, mode, steps))
    return {n: 1.0 / statistics.median(ts) for n, ts in times.items()}, times


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="issue,small", help=f"GPT sizes: {', '.join(SIZES)}")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--repeats", type=int, default=5, help="interleaved rounds (median reported)")
    p.add_argument("--out", default="benchmarks/results/amp")
    args = p.parse_args()

    results, block_times = {}, {}
    for size in args.sizes.split(","):
        vars(args).update(SIZES[size])
        row, times = measure(args)
        results[size], block_times[size] = row, times
        print(f"train_step[{size}] steps/s: " + ", ".join(f"{k} {v:.3f}" for k, v in row.items()))
        for mode in ("cpu_eager", "strict", "defer_and_fuse"):
            fp32, bf16 = f"{mode}/fp32", f"{mode}/bf16"
            paired = [f / b for f, b in zip(times[fp32], times[bf16])]  # time ratio = speed ratio inverted
            print(f"  {mode}: bf16 / fp32 = {row[bf16] / row[fp32]:.2f}x "
                  f"(per round: median {statistics.median(paired):.2f}x, "
                  f"range {min(paired):.2f}x-{max(paired):.2f}x over {len(paired)} rounds)")
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump({"config": vars(args), "sizes": SIZES, "steps_per_second": results,
                   "seconds_per_step_by_round": block_times, "platform": torch_tpu.platform()},
                  f, indent=2)
    print(f"wrote {args.out}.json")


if __name__ == "__main__":
    main()
