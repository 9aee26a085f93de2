"""examples/profile_step.py profiles five GPT training steps; its Chrome
trace must have device rows: one program span per launch, on the tpu process."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_profile_step_writes_trace_with_device_rows(tmp_path):
    out = tmp_path / "trace.json"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "profile_step.py"),
                        "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    events = json.load(open(out))["traceEvents"]
    steps = [e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("step ")]
    assert len(steps) == 5
    kernels = [e for e in events if e.get("cat") == "kernel"]
    dev_pid = {e["pid"] for e in kernels}
    assert len(dev_pid) == 1 and dev_pid.isdisjoint({e["pid"] for e in steps})
    assert any(e.get("ph") == "M" and e.get("name") == "process_name" and e["args"]["name"] == "tpu"
               and e["pid"] in dev_pid for e in events)
    for s in steps:  # every step launched device work inside its range
        inside = [k for k in kernels if s["ts"] <= k["ts"] <= s["ts"] + s["dur"] + 1e5]
        assert inside
    assert any("aten::mm" in k["name"] or "aten::addmm" in k["name"] for k in kernels)
    assert "trace written to" in r.stdout
