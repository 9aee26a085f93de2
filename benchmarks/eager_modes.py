"""The eager modes side by side in one run: a GPT-style decoder training step
(AdamW) and an inference forward, at two model sizes (gpt.SIZES: the issue's
example, whose matmuls dominate a step on this CPU, and a small one whose
steps are dominated by per-op host work, as every step is on an
accelerator), and a memory-bound chain of elementwise ops -- each in strict,
debug and defer_and_fuse on `tpu`, next to PyTorch's CPU eager. Prints steps
per second, the ratios (of the medians, and paired within each interleaved
round with their spread) and the matmul GFLOP/s each mode reaches; writes
JSON and a PNG chart.

    python3 benchmarks/eager_modes.py [--sizes issue,small]"""
import argparse
import json
import math
import os
import statistics
import time

import torch

import torch_tpu
from gpt import GPT, SIZES, loss_fn, step_flops

MODES = ["strict", "debug", "defer_and_fuse"]


def sync(device):
    if device == "tpu":
        torch.tpu.synchronize()


def make_train_step(device, args, amp=False):
    """amp: bfloat16 autocast around the forward and the loss (benchmarks/amp.py)."""
    torch.manual_seed(0)
    model = GPT(args.vocab, args.d_model, args.heads, args.layers, args.seq).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, args.vocab, (args.batch, args.seq), generator=g).to(device)
    tgt = torch.randint(0, args.vocab, (args.batch, args.seq), generator=g).to(device)

    def step():
        opt.zero_grad()
        with torch.autocast(device, dtype=torch.bfloat16, enabled=amp):
            loss = loss_fn(model, idx, tgt)
        loss.backward()
        opt.step()
        return loss

    return step


def make_inference(device, args):
    torch.manual_seed(0)
    model = GPT(args.vocab, args.d_model, args.heads, args.layers, args.seq).to(device).eval()
    idx = torch.randint(0, args.vocab, (args.batch, args.seq)).to(device)

    def step():
        with torch.no_grad():
            return model(idx)

    return step


def make_chain(device, args):
    # Memory-bound: each op does a couple of flops per 8 bytes moved, so eager
    # pays one pass over 16 MiB per op and a fused program pays one in all.
    # (Transcendentals such as sigmoid would make it compute-bound instead.)
    x = torch.randn(args.chain_elems).to(device)

    def step():
        y = x
        for _ in range(10):
            y = torch.clamp(y * 1.01 + 0.1, -4.0, 4.0) * 0.9 - 0.05
        return y

    return step


WORKLOADS = {"train_step": make_train_step, "inference": make_inference,
             "elementwise_chain": make_chain}


def context(config):
    return torch_tpu.eager_mode(config) if config in MODES else _null()


def timed_block(step, device, config, steps):
    # Every step's result is held until the block ends: defer_and_fuse
    # rightly skips work whose result nobody holds, so dropping them would
    # let it leave out whole steps that CPU eager computes.
    with context(config):
        start = time.perf_counter()
        outs = [step() for _ in range(steps)]
        sync(device)  # runs every pending graph while `outs` still holds the results
        return (time.perf_counter() - start) / steps


def measure(workload, args):
    """Steps per second of every config, timed in interleaved rounds (one
    block of each per round, the order reversed every other round) so that
    the drift of a shared machine hits them alike; the median round counts."""
    configs = ["cpu_eager"] + MODES
    runs = {}
    for config in configs:
        device = "cpu" if config == "cpu_eager" else "tpu"
        with context(config):
            step = WORKLOADS[workload](device, args)
            for _ in range(args.warmup):
                step()
            sync(device)
        # Blocks of at least ~0.3 s, so that fast steps are not timed one
        # clock tick at a time.
        steps = max(args.steps, math.ceil(0.3 / timed_block(step, device, config, 1)))
        # One untimed block of that length: where a block ends changes where
        # defer_and_fuse cuts its last graph, which may be a graph not yet
        # compiled.
        timed_block(step, device, config, steps)
        runs[config] = (step, device, steps)
    times = {c: [] for c in configs}
    for r in range(args.repeats):
        for config in configs if r % 2 == 0 else reversed(configs):
            times[config].append(timed_block(*runs[config][:2], config, runs[config][2]))
    return {c: 1.0 / statistics.median(ts) for c, ts in times.items()}, times


def paired_ratios(times, num, den):
    """num's speed over den's within each round: the blocks of one round ran
    seconds apart, so the machine's drift between rounds cancels."""
    return [d / n for n, d in zip(times[num], times[den])]


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="issue,small", help=f"GPT sizes: {', '.join(SIZES)}")
    p.add_argument("--chain-elems", type=int, default=1 << 22)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--repeats", type=int, default=9, help="interleaved rounds (median reported)")
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--out", default="benchmarks/results/eager_modes")
    args = p.parse_args()

    results, gflops, block_times = {}, {}, {}
    runs = []
    for workload in args.workloads.split(","):
        if workload == "elementwise_chain":
            runs.append((workload, workload, None))
        else:
            runs += [(f"{workload}[{size}]", workload, size) for size in args.sizes.split(",")]
    for name, workload, size in runs:
        if size is not None:
            vars(args).update(SIZES[size])
        row, times = measure(workload, args)
        results[name] = row
        block_times[name] = times
        print(f"{name}: " + ", ".join(f"{k} {v:.3f} steps/s" for k, v in row.items()))
        print(f"  defer_and_fuse / strict = {row['defer_and_fuse'] / row['strict']:.2f}x, "
              f"defer_and_fuse / cpu eager = {row['defer_and_fuse'] / row['cpu_eager']:.2f}x, "
              f"strict / cpu eager = {row['strict'] / row['cpu_eager']:.2f}x")
        for num, den in (("defer_and_fuse", "strict"), ("defer_and_fuse", "cpu_eager")):
            rs = paired_ratios(times, num, den)
            print(f"  {num} / {den} per round: median {statistics.median(rs):.2f}x, "
                  f"range {min(rs):.2f}x-{max(rs):.2f}x over {len(rs)} rounds")
        if size is not None:
            flops = step_flops(**SIZES[size], train=workload == "train_step")
            gflops[name] = {k: v * flops / 1e9 for k, v in row.items()}
            print("  matmul GFLOP/s: " + ", ".join(f"{k} {v:.1f}" for k, v in gflops[name].items()))
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump({"config": vars(args), "sizes": SIZES, "steps_per_second": results,
                   "matmul_gflops_per_second": gflops,
                   "seconds_per_step_by_round": block_times,
                   "platform": torch_tpu.platform()}, f, indent=2)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no PNG chart (pip install matplotlib)")
        return
    fig, axes = plt.subplots(1, len(results), figsize=(5 * len(results), 4))
    axes = axes if len(results) > 1 else [axes]
    for ax, (workload, row) in zip(axes, results.items()):
        names = list(row)
        ax.bar(names, [row[n] for n in names], color=["gray", "tab:blue", "tab:orange", "tab:green"])
        ax.set_title(workload)
        ax.set_ylabel("steps / second")
        ax.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    fig.savefig(args.out + ".png")
    print(f"wrote {args.out}.json and {args.out}.png")


if __name__ == "__main__":
    main()
