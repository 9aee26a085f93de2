"""python -m torch_tpu.validate [--only NAMES] [--modes MODES] [--jobs N] [--timeout S] [--report DIR]

Builds every Hugging Face architecture of the installed transformers from a
tiny config (or the models named by --only), runs forward and backward on the
CPU and on tpu in each mode, and writes report.md, report.json and report.png.
"""
import argparse
import concurrent.futures
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import torch_tpu
from torch_tpu.validate import models, report

MODES = ("strict", "debug", "defer_and_fuse", "compile")


def _parse(argv):
    p = argparse.ArgumentParser(prog="python -m torch_tpu.validate", description=__doc__.split("\n\n")[1])
    p.add_argument("--only", help="comma list of model types (gpt2), architecture classes "
                                  "(LlamaForCausalLM), Python files defining validate_model() or "
                                  "folders with a config.json; default: every architecture")
    p.add_argument("--modes", default="strict,defer_and_fuse",
                   help=f"comma list of {', '.join(MODES)} (default: strict,defer_and_fuse)")
    p.add_argument("--jobs", type=int, default=1, help="models run at once (default 1)")
    p.add_argument("--timeout", type=float, default=300, help="seconds per model and mode (default 300)")
    p.add_argument("--report", default="validate_report", help="folder of the reports (default ./validate_report)")
    args = p.parse_args(argv)
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in args.modes if m not in MODES]
    if bad or not args.modes:
        p.error(f"unknown mode(s) {', '.join(bad) or '(none given)'}; choose from {', '.join(MODES)}")
    if args.jobs < 1 or args.timeout <= 0:
        p.error("--jobs and --timeout must be positive")
    specs, unknown = [], []
    if args.only:
        for name in (n.strip() for n in args.only.split(",") if n.strip()):
            try:
                specs.append(models.resolve(name))
            except models.UnknownModel as e:
                print(f"torch_tpu.validate: {e}", file=sys.stderr)
                unknown.append(name)
            except OSError as e:
                p.error(str(e))
    else:
        specs = [{"name": t, "kind": "hf", "model_type": t, "cls": c} for t, c in models.architectures()]
    return args, specs, unknown


def _signal_name(code):
    try:
        return signal.Signals(code).name
    except ValueError:
        return f"signal {code}"


def run_one(spec, mode, timeout):
    """One worker subprocess; its death or hang becomes the row's status."""
    with tempfile.TemporaryDirectory(prefix="torch_tpu_validate_") as tmp:
        out_path = os.path.join(tmp, "result.json")
        cmd = [sys.executable, "-m", "torch_tpu.validate.worker", json.dumps(spec), mode, out_path]
        base = {"name": spec["name"], "cls": spec.get("cls"), "mode": mode}
        start = time.perf_counter()
        # A session of its own so that a timeout kills the worker's children too.
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        try:
            log, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return dict(base, status="timeout", seconds=time.perf_counter() - start,
                        error=f"no result after {timeout:g} s")
        if os.path.exists(out_path):
            with open(out_path) as f:
                return json.load(f)
        tail = "\n".join(log.strip().splitlines()[-20:])
        how = (f"killed by {_signal_name(-proc.returncode)}" if proc.returncode < 0
               else f"exited with status {proc.returncode} without a result")
        return dict(base, status="crash", seconds=time.perf_counter() - start,
                    error=f"worker {how}\n{tail}")


def main(argv=None):
    args, specs, unknown = _parse(sys.argv[1:] if argv is None else argv)
    results = [{"name": n, "cls": None, "mode": m, "status": "unknown", "seconds": 0.0,
                "error": "unknown model"} for n in unknown for m in args.modes]
    tasks = [(s, m) for s in specs for m in args.modes]
    from tqdm import tqdm
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool, \
            tqdm(total=len(tasks), unit="run", file=sys.stderr) as bar:
        futures = {pool.submit(run_one, s, m, args.timeout): (s, m) for s, m in tasks}
        for future in concurrent.futures.as_completed(futures):
            r = future.result()
            results.append(r)
            bar.set_postfix_str(f"{r['name']} {r['mode']}: {r['status']}")
            bar.update()
    command = "python -m torch_tpu.validate " + " ".join(sys.argv[1:] if argv is None else argv)
    plat = torch_tpu.platform()
    report.write(results, args.modes, args.report, command.strip(),
                 f"{plat.get('platform_name', '')} {plat.get('platform_version', '')}".strip())
    print(report.summary_table(results, args.modes))
    print(f"reports: {os.path.join(args.report, 'report.md')}, report.json, report.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
