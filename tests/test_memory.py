"""torch.tpu memory statistics: bytes of live (materialized) device buffers."""
import gc

import pytest
import torch

KEYS = {
    "allocated_bytes.all.current",
    "allocated_bytes.all.peak",
    "allocation.all.allocated",
    "allocation.all.freed",
    "allocation.all.current",
}


def _now():
    gc.collect()
    torch.tpu.synchronize()
    return torch.tpu.memory_allocated()


def test_memory_stats_keys():
    s = torch.tpu.memory_stats()
    assert KEYS <= set(s)
    assert s["allocated_bytes.all.current"] == torch.tpu.memory_allocated()
    assert s["allocated_bytes.all.peak"] == torch.tpu.max_memory_allocated()
    assert s["allocation.all.current"] == s["allocation.all.allocated"] - s["allocation.all.freed"]
    assert torch.tpu.memory_stats(0) == torch.tpu.memory_stats("tpu:0") == s


def test_upload_counts_exact_bytes_and_del_frees(tpu):
    m0 = _now()
    x = torch.randn(1000).to(tpu)
    assert torch.tpu.memory_allocated() - m0 == 4000
    del x
    assert _now() == m0


@pytest.mark.parametrize(
    "dtype,n,nbytes",
    [(torch.float64, 100, 800), (torch.bfloat16, 100, 200), (torch.int8, 37, 37),
     (torch.complex64, 10, 80), (torch.int64, 3, 24), (torch.bool, 5, 5)],
    ids=str,
)
def test_bytes_per_dtype(dtype, n, nbytes, tpu):
    m0 = _now()
    x = torch.zeros(n, dtype=dtype).to(tpu)
    assert torch.tpu.memory_allocated() - m0 == nbytes
    del x
    assert _now() == m0


def test_views_do_not_allocate(tpu):
    m0 = _now()
    x = torch.randn(10, 100).to(tpu)
    views = [x[2:5], x.t(), x.view(1000), x[:, 3], x.unsqueeze(0), x.view(torch.int32)]
    assert _now() - m0 == 4000
    del x
    assert _now() - m0 == 4000  # the views keep the storage alive
    del views
    assert _now() == m0


def test_write_through_view_replaces_base_without_growth(tpu):
    m0 = _now()
    x = torch.randn(1000).to(tpu)
    x[10:20] = torch.ones(10).to(tpu)
    x.t().copy_(torch.zeros(1000).to(tpu))
    assert _now() - m0 == 4000
    del x
    assert _now() == m0


def test_results_count_until_freed(tpu):
    m0 = _now()
    x = torch.randn(100, 10).to(tpu)
    c = x.t().contiguous()
    d = x.to(torch.float64)
    assert _now() - m0 == 4000 + 4000 + 8000
    del c
    assert _now() - m0 == 4000 + 8000
    del x, d
    assert _now() == m0


def test_inplace_op_keeps_size(tpu, require_ops):
    require_ops("aten::add.Tensor")
    m0 = _now()
    x = torch.randn(1000).to(tpu)
    x.add_(1)
    x[::2].add_(1)
    assert _now() - m0 == 4000
    y = x + 1
    assert _now() - m0 == 8000
    del x, y
    assert _now() == m0


def test_empty_is_not_materialized_until_used(tpu):
    m0 = _now()
    e = torch.empty(1000, device=tpu)
    assert _now() == m0  # deferred: nothing on the device yet
    e[0:10].copy_(torch.ones(10).to(tpu))  # partial write materializes the base
    assert _now() - m0 == 4000
    del e
    assert _now() == m0


def test_peak_and_reset(tpu):
    m0 = _now()
    torch.tpu.reset_peak_memory_stats()
    assert torch.tpu.max_memory_allocated() == m0
    a = torch.randn(5000).to(tpu)
    b = torch.randn(1000).to(tpu)
    del a
    _now()
    assert torch.tpu.max_memory_allocated() - m0 == 24000
    assert torch.tpu.memory_allocated() - m0 == 4000
    torch.tpu.reset_peak_memory_stats()
    assert torch.tpu.max_memory_allocated() == m0 + 4000
    del b
    assert _now() == m0
    assert torch.tpu.max_memory_allocated() == m0 + 4000


def test_allocation_counters(tpu):
    s0 = torch.tpu.memory_stats()
    x = torch.randn(10).to(tpu)
    s1 = torch.tpu.memory_stats()
    assert s1["allocation.all.allocated"] - s0["allocation.all.allocated"] == 1
    del x
    _now()
    s2 = torch.tpu.memory_stats()
    assert s2["allocation.all.freed"] - s1["allocation.all.freed"] == 1
    assert s2["allocation.all.current"] == s0["allocation.all.current"]


def test_memory_is_per_device():
    if torch.tpu.device_count() < 2:
        pytest.skip("needs two devices")
    m0, m1 = _now(), torch.tpu.memory_allocated(1)
    x = torch.randn(256).to("tpu:1")
    assert torch.tpu.memory_allocated(1) - m1 == 1024
    assert torch.tpu.memory_allocated("tpu:1") - m1 == 1024
    assert torch.tpu.memory_allocated(0) == m0
    del x
    gc.collect()
    assert torch.tpu.memory_allocated(1) == m1
