"""Launching TorchTitan runs (torchrun, one process per device) and reading
their per-step metrics: what the example, the make target and the test share.

TorchTitan lives in its own virtual environment (scripts/install_titan.sh:
its pins would move packages the rest of torch_tpu uses), so runs use that
environment's Python, found in $TITAN_VENV (default ~/.cache/torch_tpu/venv-titan).
"""
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field

# Largest |loss difference| from TorchTitan on the CPU over a run, by FSDP2's
# parameter dtype. float32: rounding alone gives about 1e-6 over 4 steps and
# 2e-5 over 20 (the debug model); a wrong mask, shard or gradient reduction
# moves the loss by 1e-2 or more. bfloat16 is not compared step by step yet.
LOSS_TOLERANCE = {"float32": 1e-4, "bfloat16": 5e-2}

TPU_ENTRY = "torchtitan.train"
CPU_ENTRY = "torch_tpu.integrations.torchtitan.cpu_reference"
MODULE = "torch_tpu.integrations.torchtitan"


def titan_python() -> str:
    venv = os.environ.get("TITAN_VENV", os.path.expanduser("~/.cache/torch_tpu/venv-titan"))
    python = os.path.join(venv, "bin", "python")
    probe = subprocess.run([python, "-c", "import torchtitan, triton"], capture_output=True, text=True) \
        if os.path.exists(python) else None
    if probe is None or probe.returncode != 0:
        raise RuntimeError(f"TorchTitan is not installed in {venv} (TITAN_VENV): run scripts/install_titan.sh"
                           + (f"\n{probe.stderr[-2000:]}" if probe else ""))
    return python


@dataclass
class Run:
    """One torchrun launch: its per-step metrics and its console output."""
    steps: dict[int, dict] = field(default_factory=dict)
    output: str = ""

    def losses(self, first: int = 1, last: int | None = None) -> list[float]:
        last = max(self.steps) if last is None else last
        return [self.steps[s]["loss_metrics/global_avg_loss"] for s in range(first, last + 1)]

    def median(self, key: str, skip: int = 1) -> float:
        """The median of a metric over the steps after the first `skip` (compilation)."""
        values = sorted(m[key] for s, m in self.steps.items() if s > skip)
        return values[len(values) // 2]


def launch(config: str, args: list[str], dump: str, *, nproc: int = 1, device: str = "tpu",
           timeout: float = 1800, env: dict | None = None) -> Run:
    """Runs `--config config` of our module on `device` ("tpu", or "cpu" for the
    reference) with `nproc` processes; raises with the output's tail if it fails."""
    os.makedirs(dump, exist_ok=True)
    jsonl = os.path.join(dump, "metrics.jsonl")
    if os.path.exists(jsonl):
        os.remove(jsonl)
    entry = {"tpu": TPU_ENTRY, "cpu": CPU_ENTRY}[device]
    cmd = [titan_python(), "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
           "-m", entry, "--module", MODULE, "--config", config, *args,
           "--dump_folder", dump, "--metrics_jsonl", jsonl]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})
    output = proc.stdout + proc.stderr
    with open(os.path.join(dump, "console.log"), "w") as f:
        f.write(" ".join(cmd) + "\n" + output)
    if proc.returncode != 0:
        raise RuntimeError(f"TorchTitan run failed ({' '.join(cmd)}), exit {proc.returncode}:\n{output[-6000:]}")
    run = Run(output=output)
    if os.path.exists(jsonl):
        for line in open(jsonl):
            m = json.loads(line)
            run.steps[int(m["step"])] = m
    return run


def seed_checkpoint(config: str, args: list[str], dump: str) -> str:
    """TorchTitan's seed checkpoint, made on the CPU: every run then starts
    from the same weights (the `tpu` and CPU generators draw different numbers)."""
    shutil.rmtree(dump, ignore_errors=True)
    launch(config, [*args, "--checkpoint.enable", "--checkpoint.create_seed_checkpoint"], dump, device="cpu")
    return os.path.join(dump, "checkpoint", "step-0")


def from_seed(seed: str) -> list[str]:
    """Arguments that start a run from `seed` and save nothing."""
    return ["--checkpoint.enable", "--checkpoint.load_only", "--checkpoint.initial_load_path", seed]


def compare(work: str, config: str, *, steps: int, save_at: int, seq_len: int, batch: int,
            precision: str = "float32", devices=("cpu", "tpu x1", "tpu x2"), extra=()) -> dict[str, Run]:
    """The runs that check TorchTitan on `tpu`, all from one seed checkpoint
    made on the CPU, over local data made under `work`:
    "cpu" (the reference), "tpu x1" and "tpu x2" (FSDP2 over tpu_dist, saving
    a checkpoint every `save_at` steps) as asked in `devices`, and always
    "resumed": 2 processes in a new folder holding only tpu x2's step-`save_at`
    checkpoint, trained on to `steps`. `extra` TorchTitan options go to the tpu runs."""
    from . import assets

    shutil.rmtree(work, ignore_errors=True)
    tokenizer, data = assets.make_assets(os.path.join(work, "assets"), copies=2)
    # Each process reads the data set's first copy (assets.make_dataset), so 2
    # processes x `batch` rows are the 1-process batch twice: the same loss and gradient.
    common = ["--hf_assets_path", tokenizer, "--dataloader.dataset_path", data,
              "--training.seq_len", str(seq_len), "--training.steps", str(steps),
              "--training.local_batch_size", str(batch), "--training.mixed_precision_param", precision,
              "--debug.seed", "0", "--validator.no-enable"]
    seed = seed_checkpoint(config, common, os.path.join(work, "seed"))
    extra = list(extra)
    results = {}
    if "cpu" in devices:
        results["cpu"] = launch(config, common + from_seed(seed), os.path.join(work, "cpu"), device="cpu")
    if "tpu x1" in devices:
        results["tpu x1"] = launch(config, common + from_seed(seed) + extra, os.path.join(work, "tpu1"))
    save = ["--checkpoint.enable", "--checkpoint.interval", str(save_at), "--checkpoint.initial_load_path", seed]
    full = os.path.join(work, "tpu2")
    results["tpu x2"] = launch(config, common + save + extra, full, nproc=2)
    resumed = os.path.join(work, "resumed")
    step_dir = os.path.join("checkpoint", f"step-{save_at}")
    shutil.copytree(os.path.join(full, step_dir), os.path.join(resumed, step_dir))
    results["resumed"] = launch(config, common + save + extra, resumed, nproc=2)
    return results


if __name__ == "__main__":
    sys.exit("runs.py is a library: see examples/torchtitan_llama3.py")
