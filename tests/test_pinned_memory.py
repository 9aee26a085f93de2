"""Pinned host memory for tpu (csrc/aten/pinned_memory.cpp): pin_memory(),
is_pinned() and DataLoader(pin_memory=True) as with CUDA, and non_blocking
copies from pinned memory that return before PJRT has read the bytes, with
the memory kept alive until it has."""
import gc

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import torch_tpu

MODES = ("strict", "debug", "defer_and_fuse")


def test_pin_memory_pins():
    x = torch.randn(6, 5)
    assert not x.is_pinned()
    p = x.pin_memory()
    assert p.is_pinned() and p.device.type == "cpu"
    assert torch.equal(p, x)
    assert p[2:].is_pinned() and p.t().is_pinned()  # any pointer into the block
    assert p.pin_memory() is p                      # already pinned
    assert not p.clone().is_pinned()
    assert torch.empty(0).pin_memory().device.type == "cpu"


def test_pinned_factory_argument():
    e = torch.empty(3, 4, pin_memory=True)
    assert e.is_pinned()
    z = torch.zeros(5, pin_memory=True)
    assert z.is_pinned() and torch.equal(z, torch.zeros(5))


def test_dataloader_pin_memory_batches_are_pinned():
    data = TensorDataset(torch.randn(10, 3), torch.arange(10))
    loader = DataLoader(data, batch_size=4, pin_memory=True)
    seen = []
    for x, y in loader:
        assert x.is_pinned() and y.is_pinned()
        seen.append(y)
        d = x.to("tpu", non_blocking=True)
        torch.testing.assert_close(d.cpu(), x)
    assert torch.equal(torch.cat(seen), torch.arange(10))
    plain = next(iter(DataLoader(data, batch_size=4)))
    assert not plain[0].is_pinned()


@pytest.mark.parametrize("mode", MODES)
def test_non_blocking_copy_from_pinned_memory(mode):
    src = torch.randn(257, 129)
    p = src.pin_memory()
    with torch_tpu.eager_mode(mode):
        d = p.to("tpu", non_blocking=True)
        e = (d * 2).sum(0)
        torch.testing.assert_close(d.cpu(), src)
        torch.testing.assert_close(e.cpu(), (src * 2).sum(0))
        # into a view of an existing tensor, and on another device
        dst = torch.zeros(300, 129, device="tpu")
        dst[10:267].copy_(p, non_blocking=True)
        expected = torch.zeros(300, 129)
        expected[10:267] = src
        torch.testing.assert_close(dst.cpu(), expected)
        if torch.tpu.device_count() > 1:
            torch.testing.assert_close(p.to("tpu:1", non_blocking=True).cpu(), src)


def test_pinned_source_dropped_right_after_the_copy():
    """The block outlives its tensor until PJRT has read it."""
    src = torch.randn(1 << 20)
    outs = []
    for k in range(4):
        p = (src + k).pin_memory()
        outs.append(p.to("tpu", non_blocking=True))
        del p
        gc.collect()
        torch.empty(1 << 20, pin_memory=True).fill_(-1.0)  # would reuse a freed block
    for k, o in enumerate(outs):
        torch.testing.assert_close(o.cpu(), src + k)


def test_synchronize_waits_for_pinned_reads():
    p = torch.randn(1 << 20).pin_memory()
    expected = p.clone()
    d = p.to("tpu", non_blocking=True)
    torch.tpu.synchronize()
    assert torch_tpu._C._pending_pinned_reads() == 0
    p.fill_(0.0)  # after synchronize the device copy no longer depends on it
    torch.testing.assert_close(d.cpu(), expected)


def test_non_blocking_copies_that_need_a_conversion_or_are_unpinned():
    x = torch.randn(8, 3)
    p = x.pin_memory()
    torch.testing.assert_close(p.to("tpu", torch.float64, non_blocking=True).cpu(), x.double())
    torch.testing.assert_close(x.to("tpu", non_blocking=True).cpu(), x)
    torch.testing.assert_close(p.t().to("tpu", non_blocking=True).cpu(), x.t())


def test_device_to_pinned_host_copy():
    x = torch.randn(5, 7)
    d = x.to("tpu") + 1
    host = torch.empty(5, 7, pin_memory=True)
    host.copy_(d, non_blocking=True)
    torch.tpu.synchronize()
    torch.testing.assert_close(host, x + 1)
    assert host.is_pinned()


def test_accelerator_host_cache_calls():
    # vLLM's shutdown calls these; they reach the PrivateUse1 HostAllocator
    # (this used to be a segfault once the device had run anything).
    x = torch.randn(4).to("tpu")
    p = torch.empty(8, pin_memory=True)
    torch.accelerator.empty_host_cache()
    assert p.is_pinned() and torch.equal((x * 2).cpu(), x.cpu() * 2)
