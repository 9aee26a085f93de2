"""Profiles five GPT training steps on `tpu` and writes a Chrome trace.

    python3 examples/profile_step.py [--out trace.json] [--size small|issue]

Open the trace in chrome://tracing or https://ui.perfetto.dev: the CPU rows
show the Python ops, the "tpu" process has a "programs" row with one span per
launched program (named by its ops) and a "compiles" row with each
compilation; arrows link each program to the op that launched it.
"""
import argparse
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile, record_function

import torch_tpu  # noqa: F401  (registers the tpu device)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
from gpt import SIZES, adamw_train_step  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="profile_step_trace.json")
    ap.add_argument("--size", default="small", choices=sorted(SIZES))
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args()
    step = adamw_train_step(args.size)
    step().item()  # compile outside the trace
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        for i in range(args.steps):
            with record_function(f"step {i}"):
                loss = step()
                loss.item()
    prof.export_chrome_trace(args.out)
    print(prof.key_averages().table(sort_by="device_time_total", row_limit=15))
    print(f"loss {loss.item():.4f}; trace written to {args.out}")


if __name__ == "__main__":
    main()
