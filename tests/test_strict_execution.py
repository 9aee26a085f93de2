"""Strict eager execution: the executable cache, number parameters, donation
of uniquely owned buffers, and asynchronous launches."""
import collections

import pytest
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
    ref = x.cpu() * 2  # add_ has launched (it may queue behind compiles)
    before = stats()["donated_buffers"]
    x.mul_(2.0)
    torch.tpu.synchronize()  # a new program launches on the worker, after its compile
    assert stats()["donated_buffers"] == before + 1
    torch.testing.assert_close(x.cpu(), ref)


def test_shared_buffer_is_not_donated_and_stays_intact():
    t = torch.arange(8.0).to("tpu")
    t.add_(0.0)
    c = t.clone()  # shares t's immutable buffer until one of them is written
    torch.tpu.synchronize()  # t.add_ donates when it launches, which may be after its compile
    before = stats()["donated_buffers"]
    c.add_(100.0)
    torch.tpu.synchronize()
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


# ---------------------------------------------------------------- running ahead of compiles
# A strict op whose program is not compiled yet goes to the compile workers,
# and the ops after it queue there behind it (they launch in order), so the
# host records on while programs compile side by side.


def _strict_train(device, steps, hidden=23):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(9, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 3))
    model = model.to(device)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    x = torch.randn(17, 9, generator=torch.Generator().manual_seed(1)).to(device)
    y = torch.randn(17, 3, generator=torch.Generator().manual_seed(2)).to(device)
    misses = []
    for _ in range(steps):
        before = stats()["misses"]
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        if device != "cpu":
            torch.tpu.synchronize()
        misses.append(stats()["misses"] - before)
    return [p.detach().cpu() for p in model.parameters()], misses


def test_a_step_recorded_ahead_of_its_compiles_is_the_step_a_warm_run_looks_up():
    # The first step runs ahead of its compiles (every program is new);
    # its programs, donation included, must be the ones the second step,
    # with every input at hand, looks up: nothing is compiled after it.
    torch_tpu._C._clear_programs_for_test()
    params, misses = _strict_train("tpu", 3)
    ref, _ = _strict_train("cpu", 3)
    assert misses[0] > 0 and misses[1:] == [0, 0]
    for p, r in zip(params, ref):
        torch.testing.assert_close(p, r, rtol=1e-5, atol=1e-5)


def test_a_failure_on_the_worker_reaches_the_ops_queued_behind_it():
    x = torch.linspace(-1, 1, 29).to("tpu")
    x.cpu()
    torch_tpu._C._clear_programs_for_test()  # sin compiles: it launches on the worker
    torch_tpu._C._fail_next_launch("boom-ahead")
    a = x.sin()
    b = a * 3  # queued behind sin, fed its (failed) output
    c = x.cos()  # independent of it
    with pytest.raises(RuntimeError, match=r"(?s)aten::sin.*boom-ahead"):
        b.cpu()
    with pytest.raises(RuntimeError, match=r"(?s)aten::sin.*boom-ahead"):
        a.cpu()
    torch.testing.assert_close(c.cpu(), torch.linspace(-1, 1, 29).cos())
    torch.testing.assert_close((x * 3).cpu(), torch.linspace(-1, 1, 29) * 3)


def test_ops_queued_behind_a_compile_keep_program_order_and_values():
    # In-place writes, views and reads of the same storage, all queued
    # behind new programs: the values are the CPU's.
    torch_tpu._C._clear_programs_for_test()
    base = torch.randn(6, 31, generator=torch.Generator().manual_seed(3))
    t = base.to("tpu")
    r = base.clone()
    for k in range(4):
        t.mul_(1.5).add_(k)
        t[:, 1::3] -= t[:, ::3].sum()
        t = t.tanh()
        r.mul_(1.5).add_(k)
        r[:, 1::3] -= r[:, ::3].sum()
        r = r.tanh()
    torch.testing.assert_close(t.cpu(), r)
