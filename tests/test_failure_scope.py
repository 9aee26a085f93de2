"""Failure scope in defer_and_fuse (runtime/failure_scope.h): when a fused
graph fails, only the results that depend on the op at fault carry its error;
every other result of the graph gets the value the CPU computes."""
import pytest
import torch

import torch_tpu

# Far beyond any machine's memory: the plugin refuses the allocation at
# launch (torch.OutOfMemoryError, "tpu out of memory: ..." from the memory guard).
HUGE = 1 << 38


@pytest.fixture
def defer():
    with torch_tpu.eager_mode("defer_and_fuse"):
        yield
    torch_tpu._C._reject_op_for_test("", "")


def test_out_of_memory_op_poisons_only_its_dependants(defer):
    x_cpu = torch.randn(16)
    y_cpu = torch.randn(16)
    x, y = x_cpu.to("tpu"), y_cpu.to("tpu")
    a = torch.sin(x) + y  # before the failing op
    big = torch.ones(HUGE, device="tpu") * 2
    dep = big[:4] + 1  # depends on it
    b = x * y - 3  # after it, unrelated: the case
    c = a.exp()
    torch.testing.assert_close(b.cpu(), x_cpu * y_cpu - 3)
    torch.testing.assert_close(a.cpu(), torch.sin(x_cpu) + y_cpu)
    torch.testing.assert_close(c.cpu(), (torch.sin(x_cpu) + y_cpu).exp())
    for t in (big[:4], dep):  # (big.cpu() would need a terabyte of host memory)
        with pytest.raises(RuntimeError, match="(?i)out of memory") as e:
            t.cpu()
        assert "test_failure_scope.py:26" in str(e.value)  # the line that issued `big`
    with pytest.raises(RuntimeError, match="(?i)out of memory"):
        (dep * 2).cpu()


def test_invalid_op_poisons_only_its_dependants(defer):
    x_cpu = torch.randn(8, 8)
    x = x_cpu.to("tpu")
    torch_tpu._C._reject_op_for_test("aten::tanh", "invalid op")
    a = x.cos()
    t = x.tanh()
    u = t @ x
    b = (x @ x).relu()
    torch.testing.assert_close(a.cpu(), x_cpu.cos())
    torch.testing.assert_close(b.cpu(), (x_cpu @ x_cpu).relu())
    for v in (t, u):
        with pytest.raises(RuntimeError, match="aten::tanh.*rejected: invalid op"):
            v.cpu()


def test_in_place_writes_beside_a_failure_keep_their_values(defer):
    w_cpu = torch.randn(6)
    w = w_cpu.clone().to("tpu")
    v = torch.zeros(3).to("tpu")
    torch_tpu._C._reject_op_for_test("aten::sigmoid", "invalid op")
    w.mul_(3)            # unrelated in-place write
    w[1:3] += 1          # through a view
    v.copy_(w[:3].sigmoid())  # depends on the failing op: v's new base fails
    s = w.sum()
    expect = w_cpu * 3
    expect[1:3] += 1
    torch.testing.assert_close(w.cpu(), expect)
    torch.testing.assert_close(s.cpu(), expect.sum())
    with pytest.raises(RuntimeError, match="aten::sigmoid.*invalid op"):
        v.cpu()


def test_graph_runs_normally_after_a_split(defer):
    x_cpu = torch.randn(5)
    x = x_cpu.to("tpu")
    torch_tpu._C._reject_op_for_test("aten::erf", "invalid op")
    bad = torch.erf(x)
    good = x + 1
    torch.testing.assert_close(good.cpu(), x_cpu + 1)
    torch_tpu._C._reject_op_for_test("", "")
    for _ in range(3):  # the same graph again, compiled as one program
        bad, good = torch.erf(x), x + 1
        torch.testing.assert_close(bad.cpu(), torch.erf(x_cpu))
        torch.testing.assert_close(good.cpu(), x_cpu + 1)


def test_failed_input_from_an_earlier_graph_poisons_only_its_readers(defer):
    x_cpu = torch.randn(4)
    x = x_cpu.to("tpu")
    big = torch.ones(HUGE, device="tpu")
    with pytest.raises(RuntimeError, match="(?i)out of memory"):
        big[:2].cpu()
    part = big[:4] * 2  # a failed input
    ok = x * 4
    torch.testing.assert_close(ok.cpu(), x_cpu * 4)
    with pytest.raises(RuntimeError, match="(?i)out of memory"):
        part.cpu()
