"""python -m torch_tpu.validate [--only NAMES] [--modes MODES] [--jobs N] [--timeout S]
                               [--report DIR] [--resume [--rerun STATUSES]]

Builds every Hugging Face architecture of the installed transformers from a
tiny config (or the models named by --only), runs forward and backward on the
CPU and on tpu in each mode, and writes report.md, report.json and report.png.
"""
import argparse
import collections
import json
import os
import signal
import sys
import tempfile
import time
import traceback

import torch_tpu
from torch_tpu.validate import models, report, worker

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
    p.add_argument("--resume", action="store_true",
                   help="keep the rows an earlier run wrote to the --report folder and run only the rest")
    p.add_argument("--rerun", default="",
                   help="with --resume: comma list of statuses whose earlier rows run again "
                        "(e.g. mismatch,tpu_error,timeout,crash)")
    args = p.parse_args(argv)
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in args.modes if m not in MODES]
    if bad or not args.modes:
        p.error(f"unknown mode(s) {', '.join(bad) or '(none given)'}; choose from {', '.join(MODES)}")
    if args.jobs < 1 or args.timeout <= 0:
        p.error("--jobs and --timeout must be positive")
    args.rerun = {x.strip() for x in args.rerun.split(",") if x.strip()}
    if args.rerun - set(report.STATUSES) or (args.rerun and not args.resume):
        p.error(f"--rerun takes statuses ({', '.join(report.STATUSES)}) and needs --resume")
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


def _fork_worker(spec, modes, out_path, log_path):
    """A child of this process runs the model: torch, transformers and
    torch_tpu are imported once, here, instead of once per model. The parent
    never starts the runtime before its last child, so each child starts its
    own."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        os.setsid()  # a session of its own, so that a timeout kills its children too
        log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        worker.run_modes(spec, modes, lambda r: worker.write_line(out, r))
        code = 0
    except BaseException:  # noqa: BLE001 - whatever it was, the row says so
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)  # no exit handlers: the parent's are not the child's


class _Model:
    """One model's child process: the modes it has yet to report and when it
    last reported (the timeout runs per model and mode)."""

    def __init__(self, spec, modes, folder, index):
        self.spec, self.modes = spec, list(modes)
        self.out = os.path.join(folder, f"{index}.jsonl")
        self.log = os.path.join(folder, f"{index}.log")
        self.offset = 0
        self.pid = _fork_worker(spec, self.modes, self.out, self.log)
        self.last = time.perf_counter()

    def read(self):
        """The results written since the last read (whole lines only)."""
        if not os.path.exists(self.out):
            return []
        with open(self.out, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        lines = data.split(b"\n")[:-1]
        self.offset += sum(len(line) + 1 for line in lines)
        results = [json.loads(line) for line in lines]
        for r in results:
            self.modes.remove(r["mode"])
            self.last = time.perf_counter()
        return results

    def exited(self):
        """The wait status once the child has ended, else None."""
        pid, status = os.waitpid(self.pid, os.WNOHANG)
        return status if pid else None

    def kill(self):
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        return os.waitpid(self.pid, 0)[1]

    def failure(self, status, how):
        """The row of the mode it was running when it died or hung."""
        with open(self.log, errors="replace") as f:
            tail = "\n".join(f.read().strip().splitlines()[-20:])
        return {"name": self.spec["name"], "cls": self.spec.get("cls"), "mode": self.modes[0],
                "status": status, "seconds": time.perf_counter() - self.last,
                "error": f"{how}\n{tail}".strip()}


def _death(status):
    if os.WIFSIGNALED(status):
        return f"worker killed by {_signal_name(os.WTERMSIG(status))}"
    return f"worker exited with status {os.waitstatus_to_exitcode(status)} without a result"


def run_all(tasks, jobs, timeout, on_result):
    """Runs [(spec, modes)] with at most `jobs` children at once; a child that
    dies or hangs costs the row of the mode it was in, and the modes after it
    run in a new child."""
    pending = collections.deque(tasks)
    running, index = [], 0
    with tempfile.TemporaryDirectory(prefix="torch_tpu_validate_") as tmp:
        try:
            while pending or running:
                while pending and len(running) < jobs:
                    spec, modes = pending.popleft()
                    running.append(_Model(spec, modes, tmp, index))
                    index += 1
                time.sleep(0.05)
                for m in list(running):
                    status = m.exited()
                    for r in m.read():
                        on_result(r)
                    if status is None:
                        if time.perf_counter() - m.last <= timeout:
                            continue
                        m.kill()
                        for r in m.read():  # it may have finished a mode just now
                            on_result(r)
                        if m.modes:
                            on_result(m.failure("timeout", f"no result after {timeout:g} s"))
                    elif m.modes:
                        on_result(m.failure("crash", _death(status)))
                    running.remove(m)
                    if m.modes[1:]:
                        pending.appendleft((m.spec, m.modes[1:]))
        finally:
            for m in running:
                m.kill()


def _preimport(modes):
    """What every child needs, imported once in the parent."""
    import transformers.modeling_utils  # noqa: F401
    if "compile" in modes:
        import torch._dynamo  # noqa: F401


def _journal(folder, resume, modes, rerun):
    """results.jsonl in the report folder: every row as it comes, so that
    --resume can go on after an interrupted run (running again the rows whose
    status is in `rerun`). Returns the earlier rows kept and the file
    descriptor to append to."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "results.jsonl")
    kept = []
    if resume and os.path.exists(path):
        with open(path) as f:
            kept = [json.loads(line) for line in f if line.strip()]
        kept = [r for r in kept if r["mode"] in modes and r["status"] not in rerun | {"unknown"}]
    journal = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for r in kept:
        worker.write_line(journal, r)
    return kept, journal


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args, specs, unknown = _parse(argv)
    results, journal = _journal(args.report, args.resume, args.modes, args.rerun)
    done = {(r["name"], r["mode"]) for r in results}
    results += [{"name": n, "cls": None, "mode": m, "status": "unknown", "seconds": 0.0,
                 "error": "unknown model"} for n in unknown for m in args.modes]
    tasks = [(s, left) for s in specs
             if (left := [m for m in args.modes if (s["name"], m) not in done])]
    _preimport(args.modes)
    from tqdm import tqdm
    tqdm.monitor_interval = 0  # no monitor thread: this process forks

    try:
        with tqdm(total=sum(len(m) for _, m in tasks), unit="run", file=sys.stderr) as bar:
            def on_result(r):
                results.append(r)
                worker.write_line(journal, r)
                bar.set_postfix_str(f"{r['name']} {r['mode']}: {r['status']}")
                bar.update()
            run_all(tasks, args.jobs, args.timeout, on_result)
    finally:
        os.close(journal)
    command = "python -m torch_tpu.validate " + " ".join(argv)
    plat = torch_tpu.platform()
    report.write(results, args.modes, args.report, command.strip(),
                 f"{plat.get('platform_name', '')} {plat.get('platform_version', '')}".strip())
    print(report.summary_table(results, args.modes))
    print(f"reports: {os.path.join(args.report, 'report.md')}, report.json, report.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
