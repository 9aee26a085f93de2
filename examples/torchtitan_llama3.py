"""Pre-trains TorchTitan's llama3 debug model on `tpu` and checks it:
FSDP2 over `tpu_dist` (2 processes) == 1 process on `tpu` == the same
TorchTitan steps on the CPU, and a run resumed from the step-K checkpoint
repeats the uninterrupted run's later losses exactly.

    python examples/torchtitan_llama3.py                 # make titan-debug
    python examples/torchtitan_llama3.py --config llama3_debugmodel_2layers --steps 4 --save-at 2

Run it with torch_tpu's Python; the TorchTitan runs use the virtual
environment of scripts/install_titan.sh. Every run starts from one seed
checkpoint made on the CPU. Extra TorchTitan options go after `--`
(e.g. `-- --compile.enable`) and apply to the `tpu` runs.
"""
import argparse
import os
import shutil
import sys

from torch_tpu.integrations.torchtitan import assets, runs


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="llama3_debugmodel")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--save-at", type=int, default=10, help="checkpoint step the resumed run starts from")
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--batch", type=int, default=4, help="local batch size (per process)")
    p.add_argument("--precision", default="float32", choices=["float32", "bfloat16"],
                   help="FSDP2's parameter dtype (TorchTitan's default is bfloat16)")
    p.add_argument("--tolerance", type=float, default=None,
                   help="largest |loss difference| allowed vs the CPU (default: 2e-3 float32, 5e-2 bfloat16)")
    p.add_argument("--work", default="/tmp/torch_tpu_titan")
    p.add_argument("--skip-cpu", action="store_true", help="no CPU reference (it is the slow one)")
    p.add_argument("extra", nargs="*", help="TorchTitan options for the tpu runs, after --")
    a = p.parse_args(argv)
    tolerance = a.tolerance if a.tolerance is not None else {"float32": 2e-3, "bfloat16": 5e-2}[a.precision]
    if not 0 < a.save_at < a.steps:
        p.error("--save-at must be between 0 and --steps")

    shutil.rmtree(a.work, ignore_errors=True)
    tokenizer, data = assets.make_assets(os.path.join(a.work, "assets"))
    # Each process reads the data set's first copy (assets.make_dataset), so 2
    # processes x `batch` rows are the 1-process batch twice: the same loss and gradient.
    common = ["--hf_assets_path", tokenizer, "--dataloader.dataset_path", data,
              "--training.seq_len", str(a.seq_len), "--training.steps", str(a.steps),
              "--training.mixed_precision_param", a.precision, "--debug.seed", "0",
              "--validator.no-enable"]
    one_proc = two_proc = ["--training.local_batch_size", str(a.batch)]
    seed = runs.seed_checkpoint(a.config, common + one_proc, os.path.join(a.work, "seed"))

    results = {}
    if not a.skip_cpu:
        results["cpu"] = runs.launch(a.config, common + one_proc + runs.from_seed(seed),
                                     os.path.join(a.work, "cpu"), device="cpu")
    results["tpu x1"] = runs.launch(a.config, common + one_proc + runs.from_seed(seed) + a.extra,
                                    os.path.join(a.work, "tpu1"))
    full = os.path.join(a.work, "tpu2")
    save = ["--checkpoint.enable", "--checkpoint.interval", str(a.save_at), "--checkpoint.initial_load_path", seed]
    results["tpu x2 FSDP2"] = runs.launch(a.config, common + two_proc + save + a.extra, full, nproc=2)
    resumed = os.path.join(a.work, "tpu2_resumed")
    step_dir = f"step-{a.save_at}"
    shutil.copytree(os.path.join(full, "checkpoint", step_dir), os.path.join(resumed, "checkpoint", step_dir))
    results["resumed"] = runs.launch(a.config, common + two_proc + save + a.extra, resumed, nproc=2)
    return report(results, a, tolerance)


def report(results, a, tolerance) -> int:
    names = list(results)
    print(f"\n{a.config}: seq_len {a.seq_len}, batch {a.batch} per process, params {a.precision}")
    print("step " + "".join(f"{n:>16}" for n in names))
    for step in range(1, a.steps + 1):
        cells = [f"{r.steps[step]['loss_metrics/global_avg_loss']:16.6f}" if step in r.steps else " " * 16
                 for r in results.values()]
        print(f"{step:4} " + "".join(cells))
    print("tok/s" + "".join(f"{r.median('throughput(tps)'):16.0f}" for r in results.values())
          + "   (per process, median after step 1)")
    failures = []
    ref_name = "cpu" if "cpu" in results else "tpu x1"
    ref = results[ref_name].losses(1, a.steps)
    for name in ("tpu x1", "tpu x2 FSDP2"):
        if name == ref_name:
            continue
        worst = max(abs(x - y) for x, y in zip(results[name].losses(1, a.steps), ref))
        print(f"{name} vs {ref_name}: max |loss difference| {worst:.2e} (tolerance {tolerance:g})")
        if not worst <= tolerance:
            failures.append(f"{name} vs {ref_name}")
    later = results["tpu x2 FSDP2"].losses(a.save_at + 1, a.steps)
    again = results["resumed"].losses(a.save_at + 1, a.steps)
    print(f"resumed at step {a.save_at}: steps {a.save_at + 1}-{a.steps} "
          + ("identical" if later == again else f"differ: {later} vs {again}"))
    if later != again or sorted(results["resumed"].steps) != list(range(a.save_at + 1, a.steps + 1)):
        failures.append("resume")
    if failures:
        print("FAILED: " + ", ".join(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
