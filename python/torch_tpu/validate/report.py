"""The markdown, JSON and PNG reports of a validation run."""
import collections
import datetime
import json
import os

STATUSES = ("match", "mismatch", "tpu_error", "timeout", "crash", "cpu_error", "unknown")
# One colour per status, the same in every chart.
COLORS = ("tab:green", "tab:orange", "tab:red", "tab:purple", "black", "tab:gray", "tab:olive")


def _fmt(x):
    return "" if x is None else f"{x:.2e}"


def totals(results, modes):
    """{mode: Counter(status)}."""
    counts = {m: collections.Counter() for m in modes}
    for r in results:
        counts.setdefault(r["mode"], collections.Counter())[r["status"]] += 1
    return counts


def summary_table(results, modes):
    counts = totals(results, modes)
    lines = ["| mode | " + " | ".join(STATUSES) + " | total |",
             "|---|" + "---|" * (len(STATUSES) + 1)]
    for m in modes:
        c = counts[m]
        lines.append(f"| {m} | " + " | ".join(str(c[s]) for s in STATUSES) + f" | {sum(c.values())} |")
    return "\n".join(lines)


def _compile(r):
    # Rows that never reached tpu (cpu_error, unknown) and those of a child
    # that died or hung (the count died with it) have none.
    if r.get("compile_seconds") is None:
        return ""
    return f"{r['compile_seconds']:.1f}, {r['programs_compiled']}"


def _detail(r):
    if r["status"] in ("match", "mismatch"):
        worst = r.get("out_worst") if (r.get("out_max_abs") or 0) >= (r.get("grad_max_abs") or 0) else r.get("grad_worst")
        if r["status"] == "mismatch":
            return f"worst: {worst}" if worst else ""
        # Past the table, but no further from float64 than the CPU's float32.
        return "within the CPU's own error of float64" if r.get("judged_by_float64") else ""
    text = (r.get("error") or "").strip().splitlines()
    return (text[-1] if text else "")[:200].replace("|", "\\|")


def write(results, modes, folder, command, platform):
    os.makedirs(folder, exist_ok=True)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    with open(os.path.join(folder, "report.json"), "w") as f:
        json.dump({"date": when, "command": command, "platform": platform, "modes": modes,
                   "totals": {m: dict(c) for m, c in totals(results, modes).items()},
                   "results": results}, f, indent=1)
    lines = [f"# torch_tpu.validate report", "", f"{when}, `{command}`, plugin: {platform}", "",
             summary_table(results, modes), "",
             "| model | class | mode | status | out max abs | out max rel | grad max abs | grad max rel "
             "| missing ops | seconds | compiling (s, programs) | detail |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(results, key=lambda r: (r["name"], modes.index(r["mode"]) if r["mode"] in modes else 0)):
        lines.append(
            f"| {r['name']} | {r.get('cls') or ''} | {r['mode']} | {r['status']} | {_fmt(r.get('out_max_abs'))} "
            f"| {_fmt(r.get('out_max_rel'))} | {_fmt(r.get('grad_max_abs'))} | {_fmt(r.get('grad_max_rel'))} "
            f"| {', '.join(r.get('missing_ops') or [])} | {r.get('seconds', 0):.1f} | {_compile(r)} | {_detail(r)} |")
    with open(os.path.join(folder, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    _chart(results, modes, os.path.join(folder, "report.png"))


def _chart(results, modes, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    counts = totals(results, modes)
    fig, ax = plt.subplots(figsize=(7, 1.2 + 0.6 * len(modes)))
    left = [0] * len(modes)
    for status, color in zip(STATUSES, COLORS):
        widths = [counts[m][status] for m in modes]
        if any(widths):
            ax.barh(modes, widths, left=left, label=status, color=color)
            left = [a + b for a, b in zip(left, widths)]
    ax.set_xlabel("models")
    ax.set_title("torch_tpu.validate: status per mode")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.5), ncol=len(STATUSES), fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
