"""Timing events: torch.tpu.Event(enable_timing=True) and
torch.Event("tpu", enable_timing=True), checked against the host clock and
against the profiler's device spans of the same work."""
import time

import pytest
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

import torch_tpu

MODES = ("strict", "debug", "defer_and_fuse")


def _work(x, n=10):
    for _ in range(n):
        x = torch.tanh(x @ x)
    return x


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("make", ["tpu", "torch"])
def test_elapsed_time_bounded_by_host_and_device_spans(mode, make, tpu):
    new = (lambda: torch.tpu.Event(enable_timing=True)) if make == "tpu" else \
        (lambda: torch.Event("tpu", enable_timing=True))
    x = torch.randn(128, 128).to(tpu) / 16
    with torch_tpu.eager_mode(mode):
        _work(x).cpu()  # compiled before timing
        torch.tpu.synchronize()
        start, end = new(), new()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            t0 = time.perf_counter()
            start.record()
            y = _work(x)
            end.record()
            end.synchronize()
            wall_ms = (time.perf_counter() - t0) * 1e3
        assert start.query() and end.query()
        ms = start.elapsed_time(end)
        ref = _work(x.cpu())
    torch.testing.assert_close(y.cpu(), ref, rtol=1e-3, atol=1e-3)
    device_ms = sum(e.time_range.end - e.time_range.start for e in prof.events()
                    if e.device_type == DeviceType.PrivateUse1) / 1e3
    assert 0 < device_ms <= ms + 1e-3
    assert ms <= wall_ms + 1e-3


def test_idle_device_and_order(tpu):
    torch.tpu.synchronize()
    a, b = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    a.record()
    b.record()
    b.synchronize()
    assert a.elapsed_time(b) >= 0
    assert b.elapsed_time(a) <= 0


def test_wait_and_stream_calls(tpu):
    e = torch.tpu.Event()
    x = torch.ones(4).to(tpu) * 3
    e.record()
    e.wait()
    torch.tpu.current_stream().wait_event(e)
    e.synchronize()
    assert e.query()
    assert (x + 1).cpu().tolist() == [4.0] * 4


def test_under_compile(tpu):
    fn = torch.compile(lambda a: (a @ a).relu(), backend="tpu")
    x = torch.randn(64, 64).to(tpu)
    fn(x)
    # The first call's launch finished: otherwise the second call's stamp can
    # end both (stamps stay in launch order, device_timeline.h) and a and b
    # read the same time.
    torch.tpu.synchronize()
    a, b = torch.Event("tpu", enable_timing=True), torch.Event("tpu", enable_timing=True)
    a.record()
    y = fn(x)
    b.record()
    b.synchronize()
    assert a.elapsed_time(b) > 0
    torch.testing.assert_close(y.cpu(), (x.cpu() @ x.cpu()).relu(), rtol=1e-4, atol=1e-4)


def test_bad_input():
    a, b = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    a.record()
    with pytest.raises(ValueError, match="Both events must be recorded"):
        a.elapsed_time(b)
    c, d = torch.tpu.Event(), torch.tpu.Event()
    c.record()
    d.record()
    with pytest.raises(ValueError, match="enable_timing=True"):
        c.elapsed_time(d)
    with pytest.raises(NotImplementedError):
        torch.tpu.Event(interprocess=True)
