"""Bus bandwidth of tpu_dist collectives (all_reduce, all_gather,
reduce_scatter) on `tpu` tensors next to Gloo on CPU tensors, measured in the
same run and the same process group ("cpu:gloo,tpu:tpu_dist"), for sizes
4 KiB - 64 MiB.

    python3 benchmarks/collectives.py [--nproc 2] [--out benchmarks/results/collectives]

Writes <out>.json and, when matplotlib is installed, <out>.png. Bus bandwidth
follows the nccl-tests convention: algorithm bandwidth (bytes / time) times
2(n-1)/n for all_reduce and (n-1)/n for all_gather and reduce_scatter, where
bytes is the full (gathered / pre-scatter) size."""
import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

SIZES = [4 << 10 << (2 * i) for i in range(8)]  # 4 KiB, 16 KiB, ..., 64 MiB
OPS = ["all_reduce", "all_gather", "reduce_scatter"]


def worker(out):
    import torch
    import torch.distributed as dist
    import torch_tpu

    dist.init_process_group("cpu:gloo,tpu:tpu_dist")
    rank, n = dist.get_rank(), dist.get_world_size()
    tpu = torch_tpu.distributed.local_device()
    torch.tpu.set_device(tpu)
    rows = []
    for size in SIZES:
        numel = size // 4
        iters = max(3, min(30, (8 << 20) // size))
        for op in OPS:
            for device in (tpu, torch.device("cpu")):
                full = torch.ones(numel, device=device)
                part = torch.ones(numel // n, device=device)
                if op == "all_reduce":
                    run = lambda: dist.all_reduce(full)
                    factor = 2 * (n - 1) / n
                elif op == "all_gather":
                    run = lambda: dist.all_gather_into_tensor(full, part)
                    factor = (n - 1) / n
                else:
                    run = lambda: dist.reduce_scatter_tensor(part, full)
                    factor = (n - 1) / n
                run()  # compile and connect outside the timing
                if device.type == "tpu":
                    torch.tpu.synchronize()
                dist.barrier()
                start = time.perf_counter()
                for _ in range(iters):
                    run()
                if device.type == "tpu":
                    torch.tpu.synchronize()
                elapsed = (time.perf_counter() - start) / iters
                # The slowest rank defines the collective's time.
                t = torch.tensor([elapsed], dtype=torch.float64)
                dist.all_reduce(t, op=dist.ReduceOp.MAX)
                seconds = t.item()
                rows.append(dict(op=op, backend="tpu_dist" if device.type == "tpu" else "gloo_cpu",
                                 bytes=size, seconds=seconds,
                                 busbw_gbps=size / seconds * factor / 1e9))
    if rank == 0:
        result = dict(world_size=n, path=torch_tpu.distributed.collective_path(),
                      platform=torch_tpu.platform()["platform_name"], rows=rows)
        Path(out + ".json").write_text(json.dumps(result, indent=1))
        summarize(result, out)
    dist.destroy_process_group()


def summarize(result, out):
    rows = result["rows"]
    print(f"path: {result['path']['path']} ({result['path']['reason']})")
    print(f"{'op':15s} {'size':>9s} {'tpu_dist GB/s':>14s} {'gloo cpu GB/s':>14s} {'ratio':>7s}")
    for op in OPS:
        for size in SIZES:
            a = next(r for r in rows if r["op"] == op and r["bytes"] == size and r["backend"] == "tpu_dist")
            b = next(r for r in rows if r["op"] == op and r["bytes"] == size and r["backend"] == "gloo_cpu")
            print(f"{op:15s} {size >> 10:>7d}Ki {a['busbw_gbps']:14.3f} {b['busbw_gbps']:14.3f} "
                  f"{a['busbw_gbps'] / b['busbw_gbps']:7.2f}")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: skipping the PNG chart (pip install matplotlib)")
        return
    fig, axes = plt.subplots(1, len(OPS), figsize=(5 * len(OPS), 4), sharey=True)
    for ax, op in zip(axes, OPS):
        for backend in ("tpu_dist", "gloo_cpu"):
            pts = [r for r in rows if r["op"] == op and r["backend"] == backend]
            ax.plot([r["bytes"] for r in pts], [r["busbw_gbps"] for r in pts], marker="o", label=backend)
        ax.set_xscale("log", base=2)
        ax.set_title(f"{op} ({result['world_size']} processes)")
        ax.set_xlabel("bytes")
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("bus bandwidth (GB/s)")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(out + ".png", dpi=100)
    print(f"wrote {out}.json and {out}.png")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "collectives"))
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.out)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={args.nproc}",
           f"--master_port={29500 + os.getpid() % 1000}",
           __file__, "--worker", "--out", args.out]
    sys.exit(subprocess.call(cmd, env=dict(os.environ, OMP_NUM_THREADS="1")))


if __name__ == "__main__":
    main()
