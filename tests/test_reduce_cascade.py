"""Max and min over more than 32 elements, which the builder emits as a
cascade of reductions of 16 (hlo/builder_regions.cpp, reduce_extremum): the
same values as the CPU's exactly, NaN and infinities included, for reduced
lengths that are and are not multiples of 16, reduced dims that are and are
not adjacent, and the ops built on them (softmax, log_softmax, cross_entropy,
logsumexp) at a vocabulary's length."""
import pytest
import torch
import torch.nn.functional as F
import torch_tpu  # noqa: F401

DEV = "tpu"


def randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


@pytest.mark.parametrize("op", [torch.amax, torch.amin])
@pytest.mark.parametrize("shape,dim", [
    ((4, 33), -1), ((3, 100), -1), ((2, 4096), -1), ((1000,), 0), ((5, 517), 1),
    ((40, 7), 0), ((6, 40, 9), (0, 2)), ((3, 12, 20), (1, 2)), ((2, 3, 50, 4), (1, 2)),
])
def test_extremum_equals_cpu(op, shape, dim):
    x = randn(*shape)
    assert torch.equal(op(x.to(DEV), dim).cpu(), op(x, dim))


@pytest.mark.parametrize("op", [torch.amax, torch.amin])
def test_extremum_nan_and_infinities(op):
    x = randn(6, 300)
    x[0, 17] = float("nan")
    x[1, 299] = float("nan")
    x[2, :] = float("-inf")
    x[3, 250] = float("inf")
    x[4, 5] = float("-inf")
    x[5, :] = float("inf")
    torch.testing.assert_close(op(x.to(DEV), -1).cpu(), op(x, -1), equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_extremum_integers_at_their_limits(dtype):
    info = torch.iinfo(dtype)
    x = torch.randint(-1000, 1000, (3, 200), generator=torch.Generator().manual_seed(1)).to(dtype)
    x[0, :] = info.min
    x[1, 150] = info.max
    for op in (torch.amax, torch.amin):
        assert torch.equal(op(x.to(DEV), -1).cpu(), op(x, -1))


def test_extremum_bfloat16():
    x = randn(4, 777, dtype=torch.bfloat16)
    assert torch.equal(x.to(DEV).amax(-1).cpu(), x.amax(-1))


def test_max_with_indices_over_a_long_dim():
    x = randn(3, 500)
    values, indices = x.to(DEV).max(-1)
    ref_values, ref_indices = x.max(-1)
    assert torch.equal(values.cpu(), ref_values) and torch.equal(indices.cpu(), ref_indices)


@pytest.mark.parametrize("fn", [
    lambda x: x.softmax(-1),
    lambda x: x.log_softmax(-1),
    lambda x: torch.logsumexp(x, -1),
])
def test_softmax_family_at_vocabulary_length(fn):
    x = randn(8, 4096) * 4
    x[1, :100] = float("-inf")
    torch.testing.assert_close(fn(x.to(DEV)).cpu(), fn(x))


def test_cross_entropy_and_its_gradient_at_vocabulary_length():
    logits = (randn(64, 4096) * 3).requires_grad_()
    target = torch.randint(0, 4096, (64,), generator=torch.Generator().manual_seed(2))
    dev = logits.detach().to(DEV).requires_grad_()
    loss_cpu = F.cross_entropy(logits, target)
    loss_dev = F.cross_entropy(dev, target.to(DEV))
    loss_cpu.backward()
    loss_dev.backward()
    torch.testing.assert_close(loss_dev.cpu(), loss_cpu)
    torch.testing.assert_close(dev.grad.cpu(), logits.grad)


def test_softmax_rows_of_nan_and_all_minus_infinity():
    x = randn(3, 128)
    x[0, 64] = float("nan")
    x[1, :] = float("-inf")
    torch.testing.assert_close(x.to(DEV).softmax(-1).cpu(), x.softmax(-1), equal_nan=True)


def test_extremum_under_compile():
    x = randn(16, 1024)
    fn = torch.compile(lambda t: t.amax(-1) - t.amin(-1), backend="tpu")
    assert torch.equal(fn(x.to(DEV)).cpu(), x.amax(-1) - x.amin(-1))
