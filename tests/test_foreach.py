"""_foreach_* ops lowered as one node per list (csrc/lowering/foreach.cpp):
the same values as PyTorch's per-tensor path on the CPU, the CPU's errors,
and one recorded op per call (run in every eager mode, see conftest)."""
import pytest
import torch

import torch_tpu


def close(actual, expected, op=""):
    rtol, atol = torch_tpu.tolerance(expected.dtype, op)
    torch.testing.assert_close(actual.cpu(), expected, rtol=rtol, atol=atol)


def lists(dtype=torch.float32, n=4):
    g = torch.Generator().manual_seed(0)
    shapes = [(3, 4), (5,), (), (2, 1, 3)][:n]
    a = [torch.randn(s, generator=g).to(dtype) for s in shapes]
    b = [torch.randn(s, generator=g).to(dtype) for s in shapes]
    c = [(torch.rand(s, generator=g) + 0.5).to(dtype) for s in shapes]
    return a, b, c


def tpu(ts):
    return [t.to("tpu") for t in ts]


CASES = [
    ("add Scalar", lambda f, a, b, c: f._foreach_add(a, 0.5), "aten::add.Scalar"),
    ("add List alpha", lambda f, a, b, c: f._foreach_add(a, b, alpha=-2), "aten::add.Tensor"),
    ("addcdiv Scalar", lambda f, a, b, c: f._foreach_addcdiv(a, b, c, 0.3), "aten::addcdiv"),
    ("addcmul Scalar", lambda f, a, b, c: f._foreach_addcmul(a, b, c, 0.3), "aten::addcmul"),
    ("div List", lambda f, a, b, c: f._foreach_div(a, c), "aten::div.Tensor"),
    ("div Scalar", lambda f, a, b, c: f._foreach_div(a, 3.0), "aten::div.Scalar"),
    ("lerp Scalar", lambda f, a, b, c: f._foreach_lerp(a, b, 0.7), "aten::lerp.Scalar"),
    ("mul List", lambda f, a, b, c: f._foreach_mul(a, b), "aten::mul.Tensor"),
    ("mul Scalar", lambda f, a, b, c: f._foreach_mul(a, 0.9), "aten::mul.Scalar"),
    ("sqrt", lambda f, a, b, c: f._foreach_sqrt(c), "aten::sqrt"),
    ("sub List alpha", lambda f, a, b, c: f._foreach_sub(a, b, alpha=0.5), "aten::sub.Tensor"),
    ("sub Scalar", lambda f, a, b, c: f._foreach_sub(a, 1.5), "aten::sub.Scalar"),
    ("add ScalarList", lambda f, a, b, c: f._foreach_add(a, [0.5, -1, 2.5, 3]), "aten::add.Scalar"),
    ("addcdiv ScalarList", lambda f, a, b, c: f._foreach_addcdiv(a, b, c, [0.1, -0.2, 0.3, 2]),
     "aten::addcdiv"),
    ("addcmul ScalarList", lambda f, a, b, c: f._foreach_addcmul(a, b, c, [0.1, -0.2, 0.3, 2]),
     "aten::addcmul"),
    ("div ScalarList", lambda f, a, b, c: f._foreach_div(a, [3.0, -2, 0.5, 7]), "aten::div.Scalar"),
    ("mul ScalarList", lambda f, a, b, c: f._foreach_mul(a, [0.9, 2, -1.5, 0.25]), "aten::mul.Scalar"),
    ("sub ScalarList", lambda f, a, b, c: f._foreach_sub(a, [1.5, 0, -2, 4]), "aten::sub.Scalar"),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name,fn,op", CASES, ids=[c[0] for c in CASES])
def test_functional_matches_cpu(name, fn, op, dtype):
    a, b, c = lists(dtype)
    expected = fn(torch, a, b, c)
    actual = fn(torch, tpu(a), tpu(b), tpu(c))
    assert len(actual) == len(expected)
    for x, y in zip(actual, expected):
        assert x.device.type == "tpu" and x.shape == y.shape and x.dtype == y.dtype
        close(x, y, op)


class _InPlace:
    """torch with the in-place foreach ops under the functional names."""

    def __getattr__(self, name):
        f = getattr(torch, name + "_")

        def call(first, *rest, **kw):
            f(first, *rest, **kw)
            return first
        return call


@pytest.mark.parametrize("name,fn,op", CASES, ids=[c[0] for c in CASES])
def test_in_place_matches_cpu_and_records_one_op(name, fn, op):
    a, b, c = lists()
    da, db, dc = tpu(a), tpu(b), tpu(c)
    torch.tpu.synchronize()
    before = torch_tpu.metrics()["ops_recorded"]
    fn(_InPlace(), da, db, dc)
    assert torch_tpu.metrics()["ops_recorded"] - before == 1
    fn(_InPlace(), a, b, c)
    for x, y in zip(da + dc, a + c):
        close(x, y, op)


def test_integer_list_with_float_scalar_in_place_is_the_cpus_error():
    a = [torch.arange(3), torch.arange(4)]
    with pytest.raises(RuntimeError) as cpu:
        torch._foreach_mul_(a, 0.5)
    with pytest.raises(RuntimeError) as ours:
        torch._foreach_mul_(tpu(a), 0.5)
    assert "can't be cast" in str(cpu.value) and "can't be cast" in str(ours.value)


def test_mismatched_and_empty_lists_are_errors():
    x = [torch.ones(2, device="tpu")]
    with pytest.raises(RuntimeError, match="same number of tensors"):
        torch._foreach_add_(x, [torch.ones(2, device="tpu")] * 2)
    with pytest.raises(RuntimeError, match="at least one tensor"):
        torch._foreach_add_([], 1.0)


def test_new_scalar_list_values_reuse_the_program():
    # AdamW's step sizes change every step: they are parameters, not constants.
    a, b, c = lists()
    da, db, dc = tpu(a), tpu(b), tpu(c)
    for step in range(1, 4):
        sizes = [-1e-3 / (1 - 0.9 ** (step + k)) for k in range(len(a))]
        torch._foreach_addcdiv_(da, db, dc, sizes)
        torch._foreach_addcdiv_(a, b, c, sizes)
        torch.tpu.synchronize()
        if step == 1:
            misses = torch_tpu.metrics()["cache_misses"]
    assert torch_tpu.metrics()["cache_misses"] == misses
    for x, y in zip(da, a):
        close(x, y, "aten::addcdiv")


def test_scalar_list_of_the_wrong_length_is_the_cpus_error():
    with pytest.raises(RuntimeError, match="same number of elements as scalar list"):
        torch._foreach_div_([torch.ones(2, device="tpu")], [1.0, 2.0])


def test_out_of_place_keeps_inputs_and_autograd_flows():
    a, b, _ = lists()
    da = [t.to("tpu").requires_grad_() for t in a]
    db = tpu(b)
    out = torch._foreach_mul(da, db)
    sum(o.sum() for o in out).backward()
    for g, y in zip((t.grad for t in da), b):
        close(g, y)
