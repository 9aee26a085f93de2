"""The torch.cuda-shaped memory API on tpu, torch.accelerator.memory (one
source of statistics), OutOfMemoryError, the memory history and snapshot."""
import gc
import pickle

import pytest
import torch

import torch_tpu

MODES = ("strict", "debug", "defer_and_fuse")
ACCEL = ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved")


def _settle():
    gc.collect()
    torch.tpu.synchronize()


def _meminfo(key):
    for line in open("/proc/meminfo"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


@pytest.mark.parametrize("mode", MODES)
def test_accelerator_memory_agrees_with_torch_tpu(mode, tpu):
    with torch_tpu.eager_mode(mode):
        _settle()
        m0 = torch.tpu.memory_allocated()
        x = torch.randn(1000, 250).to(tpu)
        y = (x * 2).sum(0)
        y.cpu()
        _settle()
        assert torch.tpu.memory_allocated() - m0 == x.nbytes + y.nbytes
        for name in ACCEL:
            assert getattr(torch.accelerator.memory, name)(0) == getattr(torch.tpu, name)(0)
        assert torch.accelerator.memory.memory_stats(0) == torch.tpu.memory_stats(0)
        assert torch.accelerator.memory.get_memory_info(0)[1] == torch.tpu.mem_get_info(0)[1]
        torch.accelerator.memory.reset_peak_memory_stats(0)
        assert torch.tpu.max_memory_allocated() == torch.tpu.memory_allocated()
        torch.accelerator.memory.reset_accumulated_memory_stats(0)
        s = torch.tpu.memory_stats()
        assert s["allocated_bytes.all.allocated"] == 0 and s["allocated_bytes.all.freed"] == 0
        torch.accelerator.memory.empty_cache()
        del x, y
        _settle()
        assert torch.tpu.memory_allocated() == m0


def test_stats_keys_and_reserved_equals_allocated(tpu):
    x = torch.ones(100).to(tpu)
    s = torch.tpu.memory_stats()
    for stat in ("allocated_bytes", "reserved_bytes", "active_bytes", "requested_bytes"):
        for metric in ("current", "peak", "allocated", "freed"):
            assert f"{stat}.all.{metric}" in s
        assert s[f"{stat}.all.current"] == s["allocated_bytes.all.current"]
    assert s["num_alloc_retries"] == 0 and "num_ooms" in s
    assert torch.tpu.memory_reserved() == torch.tpu.memory_allocated() > 0
    torch.tpu.reset_max_memory_allocated()
    assert torch.tpu.max_memory_reserved() == torch.tpu.memory_reserved()
    del x


def test_mem_get_info_is_host_memory_on_the_cpu_plugin():
    free, total = torch.tpu.mem_get_info()
    assert total == _meminfo("MemTotal")
    assert 0 < free <= total


def test_memory_summary(tpu):
    x = torch.ones(1 << 18).to(tpu)  # 1 MiB
    text = torch.tpu.memory_summary()
    assert "PyTorch TPU memory summary, device ID 0" in text
    row = next(l for l in text.splitlines() if l.startswith("| Allocated memory"))
    mib = torch.tpu.memory_allocated() / 2**20
    assert f"{mib:.2f} MiB" in row or f"{mib / 1024:.2f} GiB" in row
    assert "host memory" in text
    assert "Device free" not in torch.tpu.memory_summary(abbreviated=True)
    del x


def test_bytes_to_host_and_device_counted(tpu):
    x = torch.randn(1 << 20)
    torch_tpu.reset_metrics()
    t = x.to(tpu)
    back = t.cpu()
    m = torch_tpu.metrics()
    assert m["bytes_to_device"] == x.nbytes == 4 << 20
    assert m["bytes_to_host"] == back.nbytes
    assert "bytes_to_host      4194304" in torch_tpu.metrics_report()


@pytest.mark.parametrize("mode", MODES)
def test_out_of_memory_at_next_use_and_process_usable(mode, tpu):
    with torch_tpu.eager_mode(mode):
        ooms = torch.tpu.memory_stats()["num_ooms"]
        x = torch.empty(10**12, device=tpu)
        with pytest.raises(torch.OutOfMemoryError) as info:
            x.fill_(1.0)
            x.sum().item()
        msg = str(info.value)
        assert "aten::fill.Scalar" in msg and "test_memory_api.py" in msg
        assert "3.64 TiB" in msg and "in use" in msg
        assert torch.tpu.OutOfMemoryError is torch.OutOfMemoryError
        assert torch.tpu.memory_stats()["num_ooms"] == ooms + 1
        del x
        assert (torch.ones(3).to(tpu) + 1).cpu().tolist() == [2.0] * 3


def test_30_gib_on_a_smaller_machine(tpu):
    if _meminfo("MemTotal") >= 30 << 30:
        pytest.skip("this machine has 30 GiB or more")
    x = torch.empty(30 << 30, dtype=torch.uint8, device=tpu)
    with pytest.raises(torch.OutOfMemoryError):
        (x + 1).sum().item()


def test_memory_fraction(tpu):
    _settle()
    total = torch.tpu.mem_get_info()[1]
    in_use = torch.tpu.memory_allocated()
    try:
        torch.tpu.set_per_process_memory_fraction((in_use + (1 << 20)) / total)
        small = (torch.ones(1000).to(tpu) * 2).cpu()  # 4 KB fits
        assert small[0] == 2
        y = torch.ones(8, 1 << 20, dtype=torch.uint8)
        with pytest.raises(torch.OutOfMemoryError, match="memory fraction"):
            y.to(tpu)  # 8 MiB > the 1 MiB left: refused before it is copied
    finally:
        torch.tpu.set_per_process_memory_fraction(1.0)
    assert torch.tpu.get_per_process_memory_fraction() == 1.0
    for bad in (1.5, -0.1):
        with pytest.raises(ValueError, match="Allowed range"):
            torch.tpu.set_per_process_memory_fraction(bad)
    with pytest.raises(TypeError):
        torch.tpu.set_per_process_memory_fraction("half")


def test_utilization_is_a_percentage(tpu):
    x = torch.randn(256, 256).to(tpu)
    for _ in range(5):
        x = torch.tanh(x @ x)
    x.cpu()
    u = torch.tpu.utilization()
    assert isinstance(u, int) and 0 <= u <= 100


def test_memory_history_snapshot_renders(tpu, tmp_path):
    from torch.cuda import _memory_viz

    torch.tpu.memory._record_memory_history(max_entries=1000)
    torch.tpu.memory._record_memory_history(max_entries=1000)  # again: keeps recording
    try:
        a = torch.randn(300).to(tpu)
        b = (a * 3).cpu()
        del a
        _settle()
        snap = torch.tpu.memory._snapshot()
    finally:
        torch.tpu.memory._record_memory_history(enabled=None)
    trace = snap["device_traces"][0]
    allocs = [e for e in trace if e["action"] == "alloc" and e["size"] == 1200]
    assert allocs
    assert any(f["filename"].endswith("test_memory_api.py") for f in allocs[0]["frames"])
    freed = [e for e in trace if e["action"] == "free_completed" and e["addr"] == allocs[0]["addr"]]
    assert freed  # `a` was freed
    assert b.shape == (300,)
    html = _memory_viz.trace_plot(snap)
    assert "<html>" in html.lower() or "<!doctype html>" in html.lower()
    _memory_viz.segment_plot(snap)
    path = tmp_path / "snap.pickle"
    torch.tpu.memory._dump_snapshot(str(path))
    assert pickle.load(open(path, "rb"))["segments"] == []  # history stopped


def test_snapshot_segments_are_live_buffers(tpu):
    torch.tpu.memory._record_memory_history()
    try:
        keep = torch.ones(512).to(tpu)
        segs = torch.tpu.memory_snapshot()
        assert any(s["total_size"] == keep.nbytes and s["blocks"][0]["state"] == "active_allocated"
                   for s in segs)
    finally:
        torch.tpu.memory._record_memory_history(enabled=None)
    assert torch.tpu.memory._snapshot()["segments"] == []


def test_history_bad_input():
    with pytest.raises(ValueError, match="enabled"):
        torch.tpu.memory._record_memory_history(enabled="sometimes")
    with pytest.raises(ValueError, match="stacks"):
        torch.tpu.memory._record_memory_history(stacks="cpp")
    torch.tpu.memory._record_memory_history(enabled=None)  # stopping twice is a no-op
    torch.tpu.memory._record_memory_history(enabled=None)


def test_memory_under_compile(tpu):
    fn = torch.compile(lambda a: a * 2 + 1, backend="tpu")
    x = torch.ones(1000).to(tpu)
    fn(x)
    _settle()
    m0 = torch.tpu.memory_allocated()
    y = fn(x)
    _settle()
    assert torch.tpu.memory_allocated() - m0 == y.nbytes
    assert torch.accelerator.memory.memory_allocated(0) == torch.tpu.memory_allocated()
