"""Strict eager execution: the executable cache, number parameters, donation
of uniquely owned buffers, and asynchronous launches."""
import collections

import torch

import torch_tpu


def stats():
    return collections.defaultdict(int, torch_tpu._C._counters())


def test_same_op_and_shapes_hit_the_cache():
    a = torch.randn(5, 7).to("tpu")
    b = torch.randn(5, 7).to("tpu")
    (a + b).cpu()
    before = stats()
    for _ in range(5):
        c = a + b
    after = stats()
    assert after["compiled"] == before["compiled"]
    assert after["hits"] - before["hits"] >= 5
    torch.testing.assert_close(c.cpu(), a.cpu() + b.cpu())


def test_new_number_values_reuse_the_executable():
    a = torch.randn(4, 3).to("tpu")
    (a * 2.0).cpu()
    before = stats()
    results = [(a * v).cpu() for v in (3.0, -1.5, 7.25)]
    assert stats()["compiled"] == before["compiled"]
    for v, r in zip((3.0, -1.5, 7.25), results):
        torch.testing.assert_close(r, a.cpu() * v)


def test_new_shape_compiles_once():
    x = torch.randn(11, 13).to("tpu")
    before = stats()
    (x + x).cpu()
    mid = stats()
    (x + x).cpu()
    assert mid["misses"] == before["misses"] + 1
    assert stats()["misses"] == mid["misses"]


def test_inplace_on_uniquely_owned_buffer_donates():
    x = torch.randn(64).to("tpu")
    x.add_(1.0)  # a materialized base owned by x's storage alone
    before = stats()["donated_buffers"]
    ref = x.cpu() * 2
    x.mul_(2.0)
    assert stats()["donated_buffers"] == before + 1
    torch.testing.assert_close(x.cpu(), ref)


def test_shared_buffer_is_not_donated_and_stays_intact():
    t = torch.arange(8.0).to("tpu")
    t.add_(0.0)
    c = t.clone()  # shares t's immutable buffer until one of them is written
    before = stats()["donated_buffers"]
    c.add_(100.0)
    assert stats()["donated_buffers"] == before
    torch.testing.assert_close(t.cpu(), torch.arange(8.0))
    torch.testing.assert_close(c.cpu(), torch.arange(8.0) + 100)


def test_inplace_through_view_updates_every_alias():
    base = torch.zeros(4, 6).to("tpu")
    view = base[1:3, ::2]
    view.add_(5.0)
    expected = torch.zeros(4, 6)
    expected[1:3, ::2] += 5
    torch.testing.assert_close(base.cpu(), expected)
    torch.testing.assert_close(view.cpu(), expected[1:3, ::2])


def test_long_async_chain_keeps_order():
    x = torch.zeros(1000).to("tpu")
    for i in range(200):
        x = x + 1 if i % 2 == 0 else x * 1
    torch.tpu.synchronize()
    torch.testing.assert_close(x.cpu(), torch.full((1000,), 100.0))
