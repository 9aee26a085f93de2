"""Pre-trains TorchTitan's llama3 debug model on `tpu` and checks it:
FSDP2 over `tpu_dist` (2 processes) == 1 process on `tpu` == the same
TorchTitan steps on the CPU, and a run resumed from the step-K checkpoint
repeats the uninterrupted run's later losses exactly.

    python examples/torchtitan_llama3.py                 # what `make titan-debug` runs
    python examples/torchtitan_llama3.py --config llama3_debugmodel_2layers --steps 4 --save-at 2

Run it with torch_tpu's Python; the TorchTitan runs use the virtual
environment of scripts/install_titan.sh (`make titan-env`). Extra TorchTitan
options go after `--` (e.g. `-- --compile.enable`) and apply to the `tpu` runs.
"""
import argparse
import sys

from torch_tpu.integrations.torchtitan import runs

TOLERANCE = runs.LOSS_TOLERANCE


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="llama3_debugmodel")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--save-at", type=int, default=10, help="checkpoint step the resumed run starts from")
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--batch", type=int, default=4, help="local batch size (per process)")
    p.add_argument("--precision", default="float32", choices=sorted(TOLERANCE),
                   help="FSDP2's parameter dtype (TorchTitan's default is bfloat16)")
    p.add_argument("--work", default="/tmp/torch_tpu_titan")
    p.add_argument("--runs", default="cpu,tpu x1,tpu x2", help="which of: cpu, tpu x1, tpu x2 (always run)")
    p.add_argument("extra", nargs="*", help="TorchTitan options for the tpu runs, after --")
    a = p.parse_args(argv)
    if not 0 < a.save_at < a.steps:
        p.error("--save-at must be between 0 and --steps")
    results = runs.compare(a.work, a.config, steps=a.steps, save_at=a.save_at, seq_len=a.seq_len,
                           batch=a.batch, precision=a.precision, devices=a.runs.split(","), extra=a.extra)
    return report(results, a, TOLERANCE[a.precision])


def report(results, a, tolerance) -> int:
    print(f"\n{a.config}: seq_len {a.seq_len}, batch {a.batch} per process, parameters {a.precision}")
    print("step " + "".join(f"{n:>14}" for n in results))
    for step in range(1, a.steps + 1):
        print(f"{step:4} " + "".join(f"{r.steps[step]['loss_metrics/global_avg_loss']:14.6f}" if step in r.steps
                                     else " " * 14 for r in results.values()))
    print("tok/s" + "".join(f"{r.median('throughput(tps)'):14.0f}" for r in results.values())
          + "   per process, median after each run's first step")
    failures = []
    ref_name = "cpu" if "cpu" in results else "tpu x1" if "tpu x1" in results else None
    for name in ("tpu x1", "tpu x2"):
        if ref_name is None or name == ref_name or name not in results:
            continue
        worst = max(abs(x - y) for x, y in zip(results[name].losses(1, a.steps), results[ref_name].losses(1, a.steps)))
        print(f"{name} vs {ref_name}: max |loss difference| {worst:.2e} (tolerance {tolerance:g})")
        if not worst <= tolerance:
            failures.append(f"{name} vs {ref_name}")
    later = results["tpu x2"].losses(a.save_at + 1, a.steps)
    again = results["resumed"].losses(a.save_at + 1, a.steps)
    same = later == again and sorted(results["resumed"].steps) == list(range(a.save_at + 1, a.steps + 1))
    print(f"resumed from the step-{a.save_at} checkpoint: steps {a.save_at + 1}-{a.steps} "
          + ("identical" if same else f"differ: {later} vs {again}"))
    if not same:
        failures.append("resume")
    if failures:
        print("FAILED: " + ", ".join(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
