"""Runs the OpInfo harness over many ops and writes the report.

    python3 tests/opinfo/run.py [--ops all|slice|NAME,...] [--dtypes all|ci|float32,...]
                                [--modes strict,debug,defer_and_fuse] [--max-samples N]
                                [--timeout S] [--out tests/opinfo/report]

The ops run in a worker process (so a crash or a hang costs one op, recorded
as such, not the run); the worker prints one JSON line per (op, dtype), the
driver restarts it after the op that killed it. Output: report.json (every
record), report.md (totals, a table per op and dtype, every failure with its
reason). `make opinfo-report` / `make opinfo-full` call this.
"""
from __future__ import annotations

import argparse
import json
import os
import selectors
import subprocess
import sys
import time
from collections import Counter, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# ~30 common ops: the CI slice (tests/opinfo/test_opinfo_slice.py) and `--ops slice`.
SLICE_OPS = [
    "add", "sub", "mul", "div.no_rounding_mode", "neg", "abs", "exp", "log", "sqrt", "rsqrt",
    "sin", "tanh", "sigmoid", "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu",
    "pow", "maximum", "where", "clamp", "sum", "mean", "amax", "argmax", "softmax", "log_softmax",
    "mm", "bmm", "matmul", "addmm", "nn.functional.linear", "nn.functional.layer_norm",
    "nn.functional.embedding", "cat", "stack", "transpose", "reshape", "index_select", "gather",
    "masked_select", "nonzero",
]
CI_DTYPES = ["float32", "bfloat16"]
MODES = ("strict", "debug", "defer_and_fuse")


def _worker(keys, dtypes, max_samples, modes):
    import torch

    torch.set_num_threads(1)
    import harness
    import torch_tpu

    harness.check_environment()
    ops = harness.op_by_key()
    dts = [getattr(torch, d) for d in dtypes]
    for key in keys:
        op = ops.get(key)
        print(json.dumps({"start": key}), flush=True)
        if op is None:
            print(json.dumps({"op": key, "dtype": "-", "fwd": "skip", "bwd": "n/a",
                              "reason": "no such OpInfo on this torch"}), flush=True)
            continue
        for dt in harness.supported_dtypes(op, dts):
            for mode in modes:
                t0 = time.time()
                with torch_tpu.eager_mode(mode):
                    r = harness.run_opinfo(op, dt, max_samples=max_samples)
                r["seconds"] = round(time.time() - t0, 2)
                r["mode"] = mode
                print(json.dumps(r), flush=True)
        print(json.dumps({"done": key}), flush=True)


def run_parallel(keys, dtypes, max_samples, timeout, jobs=1, log=None, modes=("strict",)):
    """run() over `jobs` worker processes (keys dealt round-robin)."""
    import threading

    results = [[] for _ in range(jobs)]
    lock = threading.Lock()

    def one(i):
        results[i] = run(keys[i::jobs], dtypes, max_samples, timeout, log=log, lock=lock, total=len(keys),
                         modes=modes)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [r for rs in results for r in rs]


_done_count = [0]


def run(keys, dtypes, max_samples, timeout, progress=True, log=None, lock=None, total=None,
        modes=("strict",)):
    """Runs keys in worker processes; returns the list of records. Each
    record is also appended to `log` (JSON lines) as it arrives."""
    import contextlib

    lock = lock or contextlib.nullcontext()
    total = total or len(keys)

    def keep(rec):
        records.append(rec)
        if log:
            with lock, open(log, "a") as f:
                f.write(json.dumps(rec) + "\n")

    env = dict(os.environ)
    env.pop("TORCH_TPU_CPU_FALLBACK", None)
    todo = list(keys)
    records = []
    while todo:
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--ops", ",".join(todo),
               "--dtypes", ",".join(dtypes), "--max-samples", str(max_samples if max_samples else 0),
               "--modes", ",".join(modes)]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        sel = selectors.DefaultSelector()
        sel.register(p.stdout, selectors.EVENT_READ)
        current, last = None, time.time()
        buf = ""
        finished = False
        while True:
            if not sel.select(timeout=5):
                if current and time.time() - last > timeout:
                    p.kill()
                    keep({"op": current, "dtype": "-", "fwd": "fail", "bwd": "n/a",
                          "reason": f"timeout: no result for {timeout}s (killed)"})
                    break
                if p.poll() is not None:
                    break
                continue
            line = p.stdout.readline()
            if not line:
                break
            last = time.time()
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "start" in msg:
                current = msg["start"]
            elif "done" in msg:
                todo.remove(msg["done"])
                if progress:
                    with lock:
                        _done_count[0] += 1
                        print(f"[{_done_count[0]}/{total}] {msg['done']}", file=sys.stderr, flush=True)
                current = None
            else:
                keep(msg)
        rc = p.wait()
        if current is not None and current in todo:
            if not any(r["op"] == current and "timeout" in r.get("reason", "") for r in records):
                keep({"op": current, "dtype": "-", "fwd": "fail", "bwd": "n/a",
                      "reason": f"worker process died (exit {rc}) while running this op"})
            todo.remove(current)
        elif current is None and rc != 0 and todo:
            # died between ops (import failure...): give up rather than loop
            for k in todo:
                keep({"op": k, "dtype": "-", "fwd": "fail", "bwd": "n/a",
                      "reason": f"worker process exited {rc} before this op"})
            todo = []
    return records


def totals(records):
    """Pass counts per direction over every record, and the same per eager
    mode under "by_mode"."""
    t = _direction_totals(records)
    modes = sorted({r.get("mode", "strict") for r in records})
    t["by_mode"] = {m: _direction_totals([r for r in records if r.get("mode", "strict") == m]) for m in modes}
    return t


def _direction_totals(records):
    t = {}
    for d in ("fwd", "bwd"):
        c = Counter(r[d] for r in records if r.get(d) not in (None, "n/a"))
        unclaimed = "unclaimed" if d == "fwd" else "unclaimed_bwd"
        claimed = [r for r in records if r.get(d) in ("pass", "fail", "missing") and not r.get(unclaimed)
                   and not (d == "bwd" and r.get("unclaimed"))]
        cc = Counter(r[d] for r in claimed)
        n = sum(cc.values())
        t[d] = {"all": dict(c), "claimed": dict(cc),
                "claimed_pass_rate": round(cc["pass"] / n, 4) if n else None}
    return t


def rescore(records):
    """Recomputes which overloads are unclaimed with this process's registry
    (claims.classify), so a report written later reflects the current rules."""
    from claims import classify

    for r in records:
        f = r.get("failures", [])
        if r.get("fwd") == "fail" and f and all("cannot be held by the PJRT plugin" in x["reason"] for x in f):
            r.update(fwd="skip", bwd="n/a", failures=[],
                     reason="a dtype the PJRT plugin cannot hold: " + f[0]["reason"][:160])
        if "aten" in r:
            r["unclaimed"] = sorted(n for n in r["aten"] if classify(n)[0] == "missing")
            r["unclaimed_bwd"] = sorted(n for n in r.get("aten_bwd", []) if classify(n)[0] == "missing")


def write_report(records, out_dir, meta):
    os.makedirs(out_dir, exist_ok=True)
    rescore(records)
    t = totals(records)
    with open(os.path.join(out_dir, "report.json"), "w") as f:
        json.dump({"meta": meta, "totals": t, "records": records}, f, indent=1)
    lines = ["# OpInfo coverage report", "",
             f"Command: `{meta['command']}`  ", f"torch {meta['torch']}, platform {meta['platform']}, "
             f"{meta['seconds']:.0f} s, at most {meta['max_samples'] or 'all'} samples (+ as many reference "
             "inputs) per op and dtype.", "",
             "An (op, dtype) is *claimed* when every aten overload its samples dispatch has a tpu kernel "
             "(lowered, native or composite; see tests/opinfo/claims.py). Rates are over claimed entries; "
             "`missing` = NotImplementedError on tpu.", "", "## Totals", "",
             "| eager mode | direction | pass | fail | missing | skip | claimed pass rate |",
             "|---|---|---|---|---|---|---|"]
    for mode, tm in sorted(t["by_mode"].items()):
        for d in ("fwd", "bwd"):
            c = tm[d]["claimed"]
            a = tm[d]["all"]
            rate = tm[d]["claimed_pass_rate"]
            lines.append(f"| {mode} | {'forward' if d == 'fwd' else 'backward'} | {c.get('pass', 0)} | "
                         f"{c.get('fail', 0)} | {a.get('missing', 0)} (claimed: {c.get('missing', 0)}) | "
                         f"{a.get('skip', 0)} | {'-' if rate is None else f'{100 * rate:.1f}%'} |")
    # Missing overloads, by how many (op, dtype) they block.
    blockers = Counter()
    for r in records:
        for n in r.get("unclaimed", []) + r.get("unclaimed_bwd", []):
            blockers[n] += 1
    if blockers:
        lines += ["", "## Missing aten overloads (by number of op×dtype entries they block)", "",
                  ", ".join(f"`{n}` ({c})" for n, c in blockers.most_common())]
    several = len(t["by_mode"]) > 1

    def column(r):
        return f"{r['dtype']} {r.get('mode', 'strict')}" if several and r["dtype"] != "-" else r["dtype"]

    by_op = defaultdict(dict)
    for r in records:
        by_op[r["op"]][column(r)] = r
    lines += ["", "## Per op and dtype (forward / backward)", "",
              "Legend: ✓ pass, ✗ fail, M missing lowering, - skipped, · no backward.", ""]
    dts = []
    for r in records:
        if column(r) not in dts and r["dtype"] != "-":
            dts.append(column(r))
    lines += ["| op | " + " | ".join(dts) + " |", "|---|" + "---|" * len(dts)]
    sym = {"pass": "✓", "fail": "✗", "missing": "M", "skip": "-", "n/a": "·"}
    for op in sorted(by_op):
        cells = []
        for d in dts:
            r = by_op[op].get(d) or by_op[op].get("-")
            cells.append(f"{sym.get(r['fwd'], '?')}/{sym.get(r['bwd'], '?')}" if r else "")
        lines.append(f"| {op} | " + " | ".join(cells) + " |")
    lines += ["", "## Failures and skips, with reasons", ""]
    for op in sorted(by_op):
        for d, r in by_op[op].items():
            if r["fwd"] in ("fail", "missing") or r.get("bwd") in ("fail", "missing"):
                lines.append(f"- **{op}** {d}: fwd {r['fwd']}, bwd {r.get('bwd')}"
                             + (f"; unclaimed: {', '.join(r['unclaimed'])}" if r.get("unclaimed") else "")
                             + (f"; unclaimed in backward: {', '.join(r['unclaimed_bwd'])}"
                                if r.get("unclaimed_bwd") else "")
                             + (f"; {r['reason']}" if r.get("reason") else ""))
                for f in r.get("failures", []):
                    more = f" (×{f['count']})" if f.get("count", 1) > 1 else ""
                    lines.append(f"  - {f['dir']} {f['status']} {f['kind']} `{f['sample']}`{more}: {f['reason']}")
            elif r["fwd"] == "skip":
                lines.append(f"- {op} {d}: skipped: {r.get('reason') or 'no samples'}")
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return t


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", default="slice")
    ap.add_argument("--dtypes", default="ci")
    ap.add_argument("--modes", default="strict", help="comma list of eager modes, each run on every sample")
    ap.add_argument("--max-samples", type=int, default=8)
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--out", default=os.path.join(HERE, "report"))
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes in parallel")
    ap.add_argument("--report-only", action="store_true",
                    help="rewrite the report from <out>/records.jsonl without running anything")
    ap.add_argument("--resume", action="store_true",
                    help="keep the records of ops already in <out>/records.jsonl and run only the others")
    a = ap.parse_args(argv)
    bad = [m for m in a.modes.split(",") if m not in MODES]
    if bad:
        ap.error(f"unknown eager mode(s) {', '.join(bad)}; choose from {', '.join(MODES)}")
    dtypes = {"ci": CI_DTYPES}.get(a.dtypes)
    if dtypes is None:
        import harness

        dtypes = [str(d).replace("torch.", "") for d in harness.DTYPES] if a.dtypes == "all" \
            else a.dtypes.split(",")
    if a.worker:
        return _worker(a.ops.split(","), dtypes, a.max_samples or None, a.modes.split(","))
    if a.ops == "slice":
        keys = SLICE_OPS
    elif a.ops == "all":
        import harness

        keys = sorted(harness.op_by_key())
    else:
        keys = a.ops.split(",")
    t0 = time.time()
    os.makedirs(a.out, exist_ok=True)
    log = os.path.join(a.out, "records.jsonl")
    old = []
    if a.report_only:
        with open(log) as f:
            records = [json.loads(line) for line in f if line.strip()]
    elif a.resume and os.path.exists(log):
        with open(log) as f:
            old = [json.loads(line) for line in f if line.strip()]
        have = {r["op"] for r in old}
        keys = [k for k in keys if k not in have]
    elif os.path.exists(log):
        os.remove(log)
    if not a.report_only:
        records = old + run_parallel(keys, dtypes, a.max_samples, a.timeout, jobs=a.jobs, log=log,
                                     modes=a.modes.split(","))
    import torch
    import torch_tpu

    meta = {"command": "python3 tests/opinfo/run.py " + " ".join(argv if argv is not None else sys.argv[1:]),
            "torch": torch.__version__, "platform": torch_tpu.platform().get("platform_name", "?"),
            "seconds": time.time() - t0, "max_samples": a.max_samples, "dtypes": dtypes,
            "modes": a.modes.split(",")}
    t = write_report(records, a.out, meta)
    print(json.dumps(t, indent=1))


if __name__ == "__main__":
    main()
