"""torch.profiler with ProfilerActivity.PrivateUse1: one device event per
launched program (counted independently by torch_tpu.metrics()), linked to
the op that launched it, compile events, key_averages and Chrome traces."""
import gzip
import json
import os

import pytest
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

import torch_tpu

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
MODES = ("strict", "debug", "defer_and_fuse")


def _work(x):
    y = x @ x
    z = (y + 1).relu()
    return z.sum().cpu()


def _device_events(prof):
    return [e for e in prof.events() if e.device_type == DeviceType.PrivateUse1]


@pytest.mark.parametrize("mode", MODES)
def test_one_device_event_per_launch(mode, tpu):
    x = torch.randn(48, 48).to(tpu)
    with torch_tpu.eager_mode(mode):
        expected = _work(x.cpu())
        _work(x)  # programs compiled outside the trace
        torch_tpu.reset_metrics()
        with profile(activities=ACTIVITIES) as prof:
            with record_function("region"):
                got = _work(x)
        launches = torch_tpu.metrics()["graphs_launched"]
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-3)
    dev = _device_events(prof)
    assert launches > 0 and len(dev) == launches
    names = " ".join(e.name for e in dev)
    if mode == "defer_and_fuse":
        assert "graph of" in names and "aten::mm" in names
    else:
        for op in ("aten::mm", "aten::add.Tensor", "aten::relu", "aten::sum"):
            assert op in names
    for e in dev:
        assert e.time_range.end >= e.time_range.start
    # key_averages: device time lands on the op that launched the program.
    avg = {a.key: a for a in prof.key_averages()}
    assert avg["region"].device_time_total > 0
    if mode != "defer_and_fuse":
        assert avg["aten::mm"].device_time_total > 0
    total = sum(e.time_range.end - e.time_range.start for e in dev)
    assert avg["region"].device_time_total == pytest.approx(total, rel=1e-6, abs=1e-3)


def test_device_span_follows_the_launching_op(tpu):
    x = torch.randn(64, 64).to(tpu)
    _work(x)
    with profile(activities=ACTIVITIES) as prof:
        _work(x)
    cpu = {e.id: e for e in prof.events() if e.device_type == DeviceType.CPU}
    linked = 0
    for e in prof.events():
        if e.device_type != DeviceType.PrivateUse1:
            continue
        for op in cpu.values():
            if any(k.name == e.name for k in op.kernels):
                # A program cannot start before the op that launched it did.
                assert e.time_range.start >= op.time_range.start - 1
                linked += 1
                break
    assert linked > 0


def test_compile_events(tpu, tmp_path, run_python):
    r = run_python(f"""
        import json, torch, torch_tpu
        from torch.profiler import profile, ProfilerActivity
        x = torch.randn(37, 53).to("tpu")
        torch_tpu.reset_metrics()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as p:
            (x * 3 + 1).cpu()
        p.export_chrome_trace({str(tmp_path / 't.json')!r})
        m = torch_tpu.metrics()
        print(json.dumps([m["graphs_compiled"], m["disk_cache_hits"]]))
        """, TORCH_TPU_CACHE_DIR=str(tmp_path / "cache"))
    assert r.returncode == 0, r.stderr
    compiled, disk = json.loads(r.stdout.strip().splitlines()[-1])
    trace = json.load(open(tmp_path / "t.json"))["traceEvents"]
    comp = [e for e in trace if e.get("name", "").startswith("compile ")]
    assert compiled > 0 and disk == 0
    assert len(comp) == compiled
    assert all(e["args"]["tier"] == "compiled" and e["dur"] > 0 for e in comp)
    assert any("aten::mul.Tensor" in e["name"] for e in comp)


def _trace_checks(events):
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert kernels
    cpu_pids = {e["pid"] for e in events if e.get("cat") == "cpu_op"}
    dev_pids = {e["pid"] for e in kernels}
    assert not cpu_pids & dev_pids  # the device rows are a process of their own
    names = {(e["pid"], e["args"]["name"]) for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    assert any(pid in dev_pids and n == "tpu" for pid, n in names)
    rows = {e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"
            and e["pid"] in dev_pids}
    assert "programs" in rows
    assert any(e.get("cat") == "ac2g" for e in events)  # flow arrows op -> program


def test_chrome_trace_has_device_rows(tpu, tmp_path):
    x = torch.randn(32, 32).to(tpu)
    with profile(activities=ACTIVITIES) as prof:
        _work(x)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    _trace_checks(json.load(open(path))["traceEvents"])


def test_tensorboard_trace_handler(tpu, tmp_path):
    x = torch.randn(16, 16).to(tpu)
    handler = torch.profiler.tensorboard_trace_handler(str(tmp_path), use_gzip=True)
    with profile(activities=ACTIVITIES, on_trace_ready=handler,
                 schedule=torch.profiler.schedule(wait=0, warmup=1, active=2)) as prof:
        for _ in range(3):
            _work(x)
            prof.step()
    files = [f for f in os.listdir(tmp_path) if f.endswith(".pt.trace.json.gz")]
    assert len(files) == 1
    with gzip.open(tmp_path / files[0]) as f:
        _trace_checks(json.load(f)["traceEvents"])


def test_compiled_program_event(tpu):
    fn = torch.compile(lambda a: (a * 2).sin() + a, backend="tpu")
    x = torch.randn(20).to(tpu)
    expected = (x.cpu() * 2).sin() + x.cpu()
    fn(x)
    with profile(activities=ACTIVITIES) as prof:
        got = fn(x).cpu()
    torch.testing.assert_close(got, expected)
    assert any(e.name.startswith("torch.compile") for e in _device_events(prof))


def test_no_tpu_work_and_cpu_only():
    with profile(activities=ACTIVITIES) as prof:
        torch.ones(3) + 1
    assert _device_events(prof) == []
    prof.key_averages()
    # A CPU-only trace works too (torch 2.13 hands kineto's device types to
    # every session, so it carries the device rows as well).
    x = torch.ones(3, device="tpu")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        y = (x + 1).cpu()
    assert y.tolist() == [2.0] * 3
    assert any(e.name == "aten::add" for e in prof.events())
