"""Factories (fill, zeros/ones/full, arange, linspace, logspace, eye) against the
CPU, and random ops by their statistics, ranges, dtypes and seeding."""
import math
import re

import pytest
import torch
import torch.nn.functional as F
import torch_tpu  # noqa: F401

DEV = "tpu"
FLOATS = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
N = 100_000


def same(got, expected, **tol):
    assert got.device.type == DEV
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    torch.testing.assert_close(got.cpu(), expected, equal_nan=True, **tol)


def routed(fn):
    """Runs fn, skipping the test while aten/ does not yet route the ATen op it
    calls to its lowering (an in-place/out= form without a functional twin of
    the same name, or an op without a generator argument)."""
    try:
        return fn()
    except (NotImplementedError, TypeError) as e:
        msg = str(e)
        if "is not implemented for the tpu device" in msg or "is not a generator" in msg:
            pytest.skip(f"not routed by aten/ yet: {msg.splitlines()[0][:120]}")
        raise


def raises_like_cpu(fn):
    """fn(device) raises on tpu what it raises on the CPU."""
    with pytest.raises(Exception) as cpu_error:
        fn("cpu")
    with pytest.raises(cpu_error.type):
        fn(DEV)


# ---------------------------------------------------------------- factories

@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.int32, torch.uint8, torch.bool], ids=str)
def test_fill_family(dtype):
    for shape in [(), (0,), (3,), (2, 3, 4)]:
        for fn in [lambda d: torch.zeros(shape, dtype=dtype, device=d),
                   lambda d: torch.ones(shape, dtype=dtype, device=d),
                   lambda d: torch.full(shape, 2.7 if dtype.is_floating_point else 3, dtype=dtype, device=d),
                   lambda d: torch.empty(shape, dtype=dtype, device=d).fill_(True),
                   lambda d: torch.empty(shape, dtype=dtype, device=d).fill_(torch.tensor(5.5)),
                   lambda d: torch.empty(shape, dtype=dtype, device=d).zero_()]:
            same(fn(DEV), fn("cpu"))
    base = torch.arange(6.0).reshape(2, 3)
    for fn in [torch.zeros_like, torch.ones_like, lambda t: torch.full_like(t, 1.5, dtype=dtype)]:
        same(fn(base.to(DEV)), fn(base))


def test_fill_into_views_and_errors():
    def fill_view(d):
        t = torch.zeros(3, 4, device=d)
        t[:, 1].fill_(7)
        t[1:, 2:].fill_(torch.tensor(-1.0, device=d))
        return t
    same(fill_view(DEV), fill_view("cpu"))
    raises_like_cpu(lambda d: torch.zeros(3, device=d).fill_(torch.ones(2, device=d)))
    same(torch.full((2, 2), 3, device=DEV), torch.full((2, 2), 3))  # int64 from an int
    same(torch.full((2, 2), True, device=DEV), torch.full((2, 2), True))
    same(torch.full((2,), math.inf, device=DEV), torch.full((2,), math.inf))


ARANGES = [
    (5,), (0,), (1, 4), (-3, 10, 3), (10, -3, -3), (0, 1, 0.1), (-1, 1, 0.3), (0.5, 5.0),
    (1, 1), (0, 10, 4), (2.5, -2.5, -0.5), (0, 1000, 7), (-2**40, -2**40 + 10, 3),
]


@pytest.mark.parametrize("args", ARANGES, ids=str)
@pytest.mark.parametrize("dtype", [None, torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.int32],
                         ids=str)
def test_arange(args, dtype):
    if dtype == torch.bfloat16 and any(abs(a) > 256 for a in args):
        return  # not representable; PyTorch refuses some of these sizes
    try:
        expected = torch.arange(*args, dtype=dtype)
    except (RuntimeError, ValueError):
        raises_like_cpu(lambda d: torch.arange(*args, dtype=dtype, device=d))
        return
    same(torch.arange(*args, dtype=dtype, device=DEV), expected)


def test_arange_errors_and_out():
    raises_like_cpu(lambda d: torch.arange(0, 5, 0, device=d))
    raises_like_cpu(lambda d: torch.arange(0, 5, -1, device=d))
    raises_like_cpu(lambda d: torch.arange(0, math.inf, device=d))
    out = torch.empty(0, dtype=torch.float32, device=DEV)
    routed(lambda: torch.arange(0, 5, out=out))
    same(out, torch.arange(0, 5, dtype=torch.float32))


@pytest.mark.parametrize("start,end,steps", [(0, 1, 5), (-1, 1, 7), (3, 3, 1), (0, 1, 0), (10, -10, 11),
                                             (0, 100, 1001), (-2.5, 7.25, 64)])
@pytest.mark.parametrize("dtype", [None, torch.float64, torch.bfloat16, torch.float16, torch.int64], ids=str)
def test_linspace_logspace(start, end, steps, dtype):
    if dtype == torch.int64 and steps > 1 and (end - start) % (steps - 1):
        # PyTorch's integer linspace truncates values that depend on its
        # SIMD width; only exact steps are comparable.
        return
    same(torch.linspace(start, end, steps, dtype=dtype, device=DEV), torch.linspace(start, end, steps, dtype=dtype))
    if dtype in (None, torch.float64) and max(abs(start), abs(end)) <= 10:
        for base in (10.0, 2.0):
            same(torch.logspace(start, end, steps, base=base, dtype=dtype, device=DEV),
                 torch.logspace(start, end, steps, base=base, dtype=dtype))


def test_linspace_errors():
    raises_like_cpu(lambda d: torch.linspace(0, 1, -1, device=d))


@pytest.mark.parametrize("dtype", [None, torch.float64, torch.bfloat16, torch.int64, torch.bool], ids=str)
def test_eye(dtype):
    for args in [(0,), (1,), (4,), (2, 5), (5, 2), (3, 0)]:
        same(torch.eye(*args, dtype=dtype, device=DEV), torch.eye(*args, dtype=dtype))
    raises_like_cpu(lambda d: torch.eye(-1, device=d))


# ---------------------------------------------------------------- random ops

def stats(t):
    t = t.cpu().double().flatten()
    return t.mean().item(), t.var().item()


def assert_moments(t, mean, var, sigmas=5.0, var_rtol=0.03):
    m, v = stats(t)
    se = math.sqrt(var / t.numel())
    assert abs(m - mean) < sigmas * se + 1e-12, (m, mean, se)
    assert abs(v - var) <= var_rtol * var, (v, var)


def draws(fn, seed):
    torch.manual_seed(seed)
    return fn().cpu()


def check_seeding(fn):
    """manual_seed replays the draw; another seed, or the next draw, differs."""
    a, b, c = draws(fn, 1234), draws(fn, 1234), draws(fn, 4321)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    torch.manual_seed(1234)
    first, second = fn().cpu(), fn().cpu()
    assert torch.equal(first, a)
    assert not torch.equal(first, second)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_rand_uniform(dtype):
    x = torch.rand(N, dtype=dtype, device=DEV)
    assert x.dtype == dtype and x.shape == (N,)
    c = x.cpu().double()
    assert c.min() >= 0 and c.max() < 1
    # Half types have 8-11 random bits: the mean of k / 2^d is 1/2 - 2^-(d+1).
    assert_moments(x, 0.5, 1 / 12, var_rtol=0.05 if dtype == torch.bfloat16 else 0.02)
    t = torch.empty(N, 3, dtype=dtype, device=DEV).uniform_(-2, 3)
    c = t.cpu().double()
    assert c.min() >= -2 and c.max() <= 3
    assert_moments(t, 0.5, 25 / 12, sigmas=6 if dtype == torch.bfloat16 else 5, var_rtol=0.05)
    # every column is an independent stream
    cols = c.T
    assert not torch.equal(cols[0], cols[1])
    check_seeding(lambda: torch.rand(64, dtype=dtype, device=DEV))


def test_rand_shapes_and_generators():
    assert torch.rand((), device=DEV).shape == ()
    assert torch.rand(0, 3, device=DEV).shape == (0, 3)
    g = torch.Generator(device=DEV)
    g.manual_seed(7)
    a = torch.rand(100, device=DEV, generator=g).cpu()
    g.manual_seed(7)
    b = torch.rand(100, device=DEV, generator=g).cpu()
    assert torch.equal(a, b)
    # a private generator does not disturb the default one
    torch.manual_seed(3)
    x = torch.rand(10, device=DEV).cpu()
    torch.manual_seed(3)
    torch.rand(10, device=DEV, generator=g)
    assert torch.equal(torch.rand(10, device=DEV).cpu(), x)
    # neighbouring draws are uncorrelated
    torch.manual_seed(0)
    u, v = torch.rand(N, device=DEV).cpu().double(), torch.rand(N, device=DEV).cpu().double()
    corr = ((u - u.mean()) * (v - v.mean())).mean() / (u.std() * v.std())
    assert abs(corr.item()) < 5 / math.sqrt(N)


def test_uniform_errors():
    raises_like_cpu(lambda d: torch.empty(3, device=d).uniform_(3, 2))
    raises_like_cpu(lambda d: torch.empty(3, dtype=torch.int64, device=d).uniform_())


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_randn_normal(dtype):
    x = routed(lambda: torch.randn(N, dtype=dtype, device=DEV))
    assert x.dtype == dtype
    assert_moments(x, 0.0, 1.0)
    c = x.cpu().double()
    # the tails of a normal: about 4.6% beyond 2 sigma, 0.27% beyond 3
    assert abs((c.abs() > 2).double().mean().item() - 0.0455) < 0.004
    assert abs((c.abs() > 3).double().mean().item() - 0.0027) < 0.001
    t = torch.empty(N, dtype=dtype, device=DEV).normal_(3.0, 0.5)
    assert_moments(t, 3.0, 0.25, sigmas=6)
    check_seeding(lambda: torch.randn(64, dtype=dtype, device=DEV))


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128], ids=str)
def test_complex_randn_normal_uniform_as_the_cpu_fills_them(dtype):
    # The CPU fills view_as_real(self): randn's real and imaginary parts are
    # each N(0, 1/2), normal_(mean, std) gives each part N(mean, std^2 / 2),
    # uniform_ draws each part from [from, to).
    real = torch.float64 if dtype == torch.complex128 else torch.float32
    for x in (torch.randn(N, dtype=dtype, device=DEV), torch.randn_like(torch.empty(N, dtype=dtype, device=DEV))):
        assert x.dtype == dtype and x.shape == (N,)
        parts = torch.view_as_real(x.cpu())
        assert parts.dtype == real
        for k in (0, 1):
            assert_moments(parts[:, k], 0.0, 0.5)
        assert abs(x.cpu().abs().pow(2).double().mean().item() - 1.0) < 0.03  # E|z|^2 = 1, as on the CPU
        re, im = parts[:, 0].double(), parts[:, 1].double()
        assert abs(((re - re.mean()) * (im - im.mean())).mean().item() / (re.std() * im.std()).item()) < 5 / math.sqrt(N)
    t = torch.empty(N, dtype=dtype, device=DEV).normal_(2.0, 3.0)
    for k in (0, 1):
        assert_moments(torch.view_as_real(t.cpu())[:, k], 2.0, 4.5)
    u = torch.empty(N, dtype=dtype, device=DEV).uniform_(-1, 3)
    for k in (0, 1):
        p = torch.view_as_real(u.cpu())[:, k].double()
        assert p.min() >= -1 and p.max() < 3
        assert_moments(p, 1.0, 16 / 12)
    r = torch.rand(N, dtype=dtype, device=DEV)
    p = torch.view_as_real(r.cpu())
    assert p.min() >= 0 and p.max() < 1
    check_seeding(lambda: torch.randn(64, dtype=dtype, device=DEV))
    # the CPU's reference draws have the same moments (a check of the test itself)
    c = torch.view_as_real(torch.randn(N, dtype=dtype))
    assert_moments(c[:, 0], 0.0, 0.5)


def test_complex_random_errors_like_cpu():
    raises_like_cpu(lambda d: torch.empty(3, dtype=torch.complex64, device=d).normal_(0, -1))
    raises_like_cpu(lambda d: torch.empty(3, dtype=torch.complex64, device=d).uniform_(3, 2))


def test_normal_errors():
    raises_like_cpu(lambda d: torch.empty(3, device=d).normal_(0, -1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int64, torch.bool], ids=str)
def test_bernoulli(dtype):
    p = 0.3
    x = routed(lambda: torch.empty(N, dtype=dtype, device=DEV).bernoulli_(p))
    assert x.dtype == dtype
    c = x.cpu().double()
    assert set(c.unique().tolist()) <= {0.0, 1.0}
    assert_moments(x, p, p * (1 - p))
    for q in (0.0, 1.0):
        assert torch.equal(torch.empty(100, dtype=dtype, device=DEV).bernoulli_(q).cpu(),
                           torch.full((100,), q).to(dtype))
    probs = torch.tensor([0.0, 0.25, 0.5, 1.0]).repeat(N // 4, 1)
    b = torch.bernoulli(probs.to(DEV)).cpu()
    assert b.dtype == torch.float32
    assert torch.allclose(b.mean(0), torch.tensor([0.0, 0.25, 0.5, 1.0]), atol=0.015)
    b = torch.empty(N // 4, 4, device=DEV).bernoulli_(probs[0].to(DEV)).cpu()
    assert torch.allclose(b.mean(0), torch.tensor([0.0, 0.25, 0.5, 1.0]), atol=0.015)
    check_seeding(lambda: torch.bernoulli(torch.full((64,), 0.5, device=DEV)))
    raises_like_cpu(lambda d: torch.empty(3, device=d).bernoulli_(1.5))


@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.9])
def test_dropout(p):
    x = torch.randn(400, 250) + 3  # nonzero everywhere
    xd = x.to(DEV).requires_grad_()
    y = routed(lambda: F.dropout(xd, p, training=True))
    kept = (y != 0).cpu()
    assert abs(kept.double().mean().item() - (1 - p)) < 5 * math.sqrt(p * (1 - p) / x.numel()) + 1e-9
    torch.testing.assert_close(y.detach().cpu()[kept], x[kept] / (1 - p))
    y.backward(torch.ones_like(y))
    torch.testing.assert_close(xd.grad.cpu(), kept.float() / (1 - p))
    assert torch.equal(F.dropout(xd, p, training=False).detach().cpu(), x)
    routed(lambda: check_seeding(lambda: F.dropout(torch.ones(64, device=DEV), 0.5)))


def test_native_dropout_directly():
    x = torch.randn(50, 40)
    out, mask = routed(lambda: torch.ops.aten.native_dropout(x.to(DEV), 0.25, True))
    assert mask.dtype == torch.bool and out.dtype == x.dtype
    torch.testing.assert_close(out.cpu(), x * mask.cpu() / 0.75)
    out, mask = torch.ops.aten.native_dropout(x.to(DEV), 0.25, False)
    assert torch.equal(out.cpu(), x) and bool(mask.cpu().all())
    g = torch.randn(50, 40)
    m = torch.rand(50, 40) > 0.5
    torch.testing.assert_close(torch.ops.aten.native_dropout_backward(g.to(DEV), m.to(DEV), 2.0).cpu(),
                               torch.ops.aten.native_dropout_backward(g, m, 2.0))
    gb = g.bfloat16()
    torch.testing.assert_close(torch.ops.aten.native_dropout_backward(gb.to(DEV), m.to(DEV), 1 / 0.7).cpu(),
                               torch.ops.aten.native_dropout_backward(gb, m, 1 / 0.7))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_functional_random_ops(dtype):
    """The functional ops the in-place forms become, called directly."""
    aten = torch.ops.aten
    t = torch.empty(N, dtype=dtype, device=DEV)
    z = aten.normal_functional(t, 1.5, 2.0)
    assert z.dtype == dtype and z.shape == t.shape
    assert_moments(z, 1.5, 4.0, sigmas=6)
    b = aten.bernoulli.p(t, 0.3)
    assert b.dtype == dtype and set(b.cpu().double().unique().tolist()) <= {0.0, 1.0}
    assert_moments(b, 0.3, 0.21)
    u = aten.uniform(t, -1.0, 1.0)
    assert_moments(u, 0.0, 1 / 3, sigmas=6, var_rtol=0.05)
    probs = torch.rand(N, device=DEV).to(dtype)
    bt = aten.bernoulli(probs)
    assert abs(bt.cpu().double().mean().item() - probs.cpu().double().mean().item()) < 0.01
    check_seeding(lambda: aten.normal_functional(torch.empty(64, dtype=dtype, device=DEV), 0.0, 1.0))
    check_seeding(lambda: aten.bernoulli.p(torch.empty(64, dtype=dtype, device=DEV), 0.5))
    raises_like_cpu(lambda d: aten.normal_functional(torch.empty(3, device=d), 0.0, -1.0))
    raises_like_cpu(lambda d: aten.bernoulli.p(torch.empty(3, device=d), 1.5))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8, torch.float32,
                                   torch.float64, torch.bfloat16], ids=str)
def test_randint_random(dtype):
    x = torch.randint(-5, 7, (N,), dtype=dtype, device=DEV) if dtype != torch.uint8 else \
        torch.randint(0, 12, (N,), dtype=dtype, device=DEV)
    lo = -5 if dtype != torch.uint8 else 0
    c = x.cpu()
    assert c.dtype == dtype
    assert c.min().item() == lo and c.max().item() == lo + 11
    counts = torch.bincount((c.long() - lo))
    expected = N / 12
    chi2 = ((counts.double() - expected) ** 2 / expected).sum().item()
    assert chi2 < 40  # 11 degrees of freedom: p < 1e-4
    t = torch.empty(N, dtype=dtype, device=DEV).random_(10)
    assert t.cpu().min() >= 0 and t.cpu().max() <= 9
    t = torch.empty(N, dtype=dtype, device=DEV).random_().cpu().double()
    top = {torch.int64: 2**63 - 1, torch.int32: 2**31 - 1, torch.int16: 2**15 - 1, torch.uint8: 255,
           torch.float32: 2**24, torch.float64: 2**53, torch.bfloat16: 2**8}[dtype]
    assert t.min() >= 0 and t.max() <= top and t.max() > top * 0.9
    check_seeding(lambda: torch.randint(0, 100, (64,), dtype=dtype, device=DEV))


def test_random_full_range_and_errors():
    t = torch.empty(N, dtype=torch.int64, device=DEV).random_(-2**63, None).cpu()
    assert (t < 0).any() and (t > 2**62).any()
    b = torch.empty(N, dtype=torch.bool, device=DEV).random_().cpu()
    assert 0.45 < b.double().mean().item() < 0.55
    raises_like_cpu(lambda d: torch.empty(3, dtype=torch.int64, device=d).random_(5, 2))


@pytest.mark.parametrize("dtype,bounds", [
    (torch.bool, (0, 3)), (torch.int8, (0, 1000)), (torch.int8, (-200, 0)), (torch.uint8, (-1, 10)),
    (torch.int16, (0, 2**16)), (torch.uint16, (0, 70000)), (torch.int32, (0, 2**32)), (torch.float16, (0, 70000)),
], ids=str)
def test_random_bounds_outside_the_dtype_raise_like_cpu(dtype, bounds):
    # Without the check the draws wrap into the type: int8 random_(0, 1000) gave negative values.
    lo, hi = bounds
    calls = [lambda d: torch.empty(3, dtype=dtype, device=d).random_(lo, hi),
             lambda d: torch.randint(lo, hi, (3,), dtype=dtype, device=d),
             (lambda d: torch.empty(3, dtype=dtype, device=d).random_(hi)) if lo == 0 else
             (lambda d: torch.empty(3, dtype=dtype, device=d).random_(lo, None))]
    for call in calls:
        with pytest.raises(RuntimeError) as cpu_error:
            call("cpu")
        with pytest.raises(RuntimeError, match="out of bounds") as tpu_error:
            call(DEV)
        assert str(tpu_error.value).splitlines()[0] == str(cpu_error.value).splitlines()[0]


def test_randperm():
    g = torch.Generator(device=DEV)
    g.manual_seed(0)
    for n in (0, 1, 10, 1000):
        p = torch.randperm(n, generator=g, device=DEV).cpu()
        assert p.dtype == torch.int64
        assert torch.equal(p.sort().values, torch.arange(n))
    g.manual_seed(5)
    a = torch.randperm(50, generator=g, device=DEV).cpu()
    g.manual_seed(5)
    assert torch.equal(a, torch.randperm(50, generator=g, device=DEV).cpu())
    assert not torch.equal(a, torch.randperm(50, generator=g, device=DEV).cpu())
    # position of element 0 is uniform
    pos = torch.stack([torch.randperm(8, generator=g, device=DEV).cpu().argmin() for _ in range(400)])
    assert torch.bincount(pos, minlength=8).min() > 20


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
def test_other_distributions(dtype):
    lam = 2.0
    e = torch.empty(N, dtype=dtype, device=DEV).exponential_(lam)
    assert e.cpu().min() >= 0
    assert_moments(e, 1 / lam, 1 / lam**2, var_rtol=0.05)
    p = 0.25
    g = torch.empty(N, dtype=dtype, device=DEV).geometric_(p)
    c = g.cpu().double()
    assert c.min() >= 1 and torch.equal(c, c.round())
    assert_moments(g, 1 / p, (1 - p) / p**2, var_rtol=0.06)
    ln = torch.empty(N, dtype=dtype, device=DEV).log_normal_(0.0, 0.5)
    assert_moments(ln.log() if dtype != torch.bfloat16 else ln.float().log(), 0.0, 0.25, sigmas=6, var_rtol=0.05)
    cy = torch.empty(N, dtype=dtype, device=DEV).cauchy_(1.0, 2.0).cpu().double()
    # quartiles of a Cauchy: median -+ sigma
    q = torch.quantile(cy[:N // 2].float(), torch.tensor([0.25, 0.5, 0.75])).double()
    torch.testing.assert_close(q, torch.tensor([-1.0, 1.0, 3.0], dtype=torch.float64), atol=0.1, rtol=0)
    check_seeding(lambda: torch.empty(64, dtype=dtype, device=DEV).exponential_())
    raises_like_cpu(lambda d: torch.empty(3, device=d).exponential_(-1))
    raises_like_cpu(lambda d: torch.empty(3, device=d).geometric_(1.5))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64,
                                   torch.int32, torch.uint8, torch.bool])
def test_native_dropout_backward_dtype(dtype):
    # grad * mask * scale: integer and bool grads become the default float type.
    g = torch.Generator().manual_seed(0)
    grad = (torch.randn(4, 5, generator=g) * 5).to(dtype)
    mask = torch.rand(4, 5, generator=g) > 0.3
    for scale in [0.0, 2.0, 1.25]:
        c = torch.ops.aten.native_dropout_backward(grad, mask, scale)
        d = torch.ops.aten.native_dropout_backward(grad.to(DEV), mask.to(DEV), scale)
        assert d.dtype == c.dtype
        torch.testing.assert_close(d.cpu(), c)


# ---- rrelu (nn.RReLU): in training, each element that is not positive is
# scaled by its own slope drawn from U[lower, upper) and the slope is kept in
# `noise` (1 elsewhere); outside training it is leaky_relu with the mean slope.

RRELU_DTYPES = [torch.float32, torch.float64, torch.bfloat16]


@pytest.mark.parametrize("dtype", RRELU_DTYPES)
@pytest.mark.parametrize("lower,upper", [(1 / 8, 1 / 3), (0.5, 0.6), (0.2, 0.2)])
def test_rrelu_training_draws_slopes(dtype, lower, upper):
    """Run after one another at one shape: each call's bounds reach the
    program (a lowering that baked the first call's in would fail here)."""
    x = -(torch.rand(N, dtype=torch.float64) + 0.5).to(dtype)
    noise = torch.empty(N, dtype=dtype, device=DEV)
    y = torch.ops.aten.rrelu_with_noise(x.to(DEV), noise, lower, upper, True).cpu().double()
    slope = y / x.double()
    tol = 1e-2 if dtype == torch.bfloat16 else 1e-6
    assert slope.min() >= lower - tol and slope.max() <= upper + tol
    torch.testing.assert_close(noise.cpu().double(), slope, atol=tol, rtol=tol)
    if upper > lower:  # uniform: the mean and the spread of U[lower, upper)
        assert abs(slope.mean().item() - (lower + upper) / 2) < 0.01 * (upper - lower) + tol
        assert slope.max() - slope.min() > 0.95 * (upper - lower)


def test_rrelu_training_keeps_positive_nan_and_inf():
    x = torch.tensor([-2.0, -0.0, 0.0, 1.0, float("nan"), float("inf"), float("-inf"), 3.0])
    noise = torch.full((8,), 7.0, device=DEV)
    y = torch.ops.aten.rrelu_with_noise(x.to(DEV), noise, 0.1, 0.3, True).cpu()
    n = noise.cpu()
    keep = torch.tensor([False, False, False, True, True, True, False, True])
    same(y[keep].to(DEV), x[keep])
    assert torch.equal(n[keep], torch.ones(int(keep.sum())))
    slopes = n[~keep]
    assert ((slopes >= 0.1) & (slopes < 0.3)).all()
    torch.testing.assert_close(y[~keep], x[~keep] * slopes)


@pytest.mark.parametrize("dtype", RRELU_DTYPES)
def test_rrelu_eval_matches_cpu(dtype):
    x = torch.tensor([-3.0, -1.0, -0.0, 0.0, 0.5, 2.0, float("nan"), float("-inf"), float("inf")]).to(dtype)
    for lower, upper in [(1 / 8, 1 / 3), (0.0, 1.0)]:
        same(F.rrelu(x.to(DEV), lower, upper, training=False), F.rrelu(x, lower, upper, training=False))
    noise = torch.full((9,), 7.0, dtype=dtype, device=DEV)
    torch.ops.aten.rrelu_with_noise(x.to(DEV), noise, 0.1, 0.3, False)
    assert torch.equal(noise.cpu(), torch.full((9,), 7.0, dtype=dtype))  # left as it was


def test_rrelu_gradient_is_the_drawn_slope():
    x = torch.randn(1000, device=DEV, requires_grad=True)
    y = F.rrelu(x, 0.1, 0.3, training=True)
    y.backward(torch.ones_like(y))
    xc, yc = x.detach().cpu(), y.detach().cpu()
    torch.testing.assert_close(x.grad.cpu(), torch.where(xc > 0, torch.ones_like(xc), yc / xc))


def test_rrelu_in_place_module_and_seeding():
    torch.manual_seed(3)
    x = torch.randn(64, device=DEV)
    a = F.rrelu(x, training=True)
    torch.manual_seed(3)
    x2 = torch.randn(64, device=DEV)
    b = x2.clone()
    F.rrelu_(b, training=True)
    same(b, a.cpu())
    m = torch.nn.RReLU(0.2, 0.4).to(DEV).train()
    y = m(x).cpu()
    neg = x.cpu() < 0
    s = y[neg] / x.cpu()[neg]
    assert ((s >= 0.2 - 1e-6) & (s < 0.4 + 1e-6)).all()
    same(m.eval()(x), F.leaky_relu(x.cpu(), 0.3))


@pytest.mark.parametrize("args", [
    (torch.randn(6), torch.empty(5), 0.1, 0.3, True),
    (torch.randn(6), torch.empty(5), 0.1, 0.3, False),
    (torch.randn(6), torch.empty(6, dtype=torch.float64), 0.1, 0.3, True),
    (torch.ones(6, dtype=torch.int32), torch.ones(6, dtype=torch.int32), 0.1, 0.3, True),
    (torch.ones(6, dtype=torch.int32), torch.ones(6, dtype=torch.int32), 0.1, 0.3, False),
    (-torch.rand(6), torch.empty(6), 0.5, 0.3, True),
], ids=["shape-train", "shape-eval", "noise-dtype", "int-train", "int-eval", "lower-above-upper"])
def test_rrelu_errors_like_cpu(args):
    with pytest.raises(Exception) as cpu:
        torch.ops.aten.rrelu_with_noise(*args)
    dev_args = [a.to(DEV) if isinstance(a, torch.Tensor) else a for a in args]
    with pytest.raises(type(cpu.value), match=re.escape(str(cpu.value).split("\n")[0][:45])):
        torch.ops.aten.rrelu_with_noise(*dev_args)
    with pytest.raises(RuntimeError, match="Lower bound should be less than or equal to the upper bound"):
        F.rrelu(torch.randn(3, device=DEV), 0.5, 0.3, training=True)


# ---- gamma draws (torch.distributions' Gamma, Beta, Dirichlet, Chi2,
# StudentT): Marsaglia-Tsang rejection in a device while loop. The tpu
# generator is not the CPU's, so draws are compared as distributions: a
# two-sample Kolmogorov-Smirnov statistic against the CPU's own draws.

def _ks(a, b):
    a, b = a.double().sort().values, b.double().sort().values
    both = torch.cat([a, b]).sort().values
    fa = torch.searchsorted(a, both, right=True).double() / len(a)
    fb = torch.searchsorted(b, both, right=True).double() / len(b)
    return (fa - fb).abs().max().item()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("alpha", [0.02, 0.4, 1.0, 3.5, 250.0])
def test_standard_gamma_draws_the_cpus_distribution(dtype, alpha):
    n = 50_000
    torch.manual_seed(7)
    a = torch.full((n,), alpha, dtype=dtype)
    got = torch._standard_gamma(a.to(DEV))
    assert got.dtype == dtype and got.shape == a.shape
    # 1.95 sqrt(2 / n): the 0.1% critical value of the two-sample statistic.
    assert _ks(got.cpu(), torch._standard_gamma(a)) < 1.95 * math.sqrt(2 / n)


def test_standard_gamma_edges_like_cpu():
    a = torch.tensor([0.0, 1e-30, -1.0, float("nan"), float("inf"), 1e-3])
    got = torch._standard_gamma(a.to(DEV)).cpu()
    tiny = torch.finfo(torch.float32).tiny
    assert torch.equal(got[:4], torch.full((4,), tiny))  # clamped to the smallest normal, as the CPU does
    assert got[4] == float("inf")
    assert tiny <= got[5] < 1
    torch.manual_seed(0)
    a = torch.tensor([0.5, 1.0, 3.0], device=DEV)
    first = torch._standard_gamma(a).cpu()
    torch.manual_seed(0)
    assert torch.equal(torch._standard_gamma(a).cpu(), first)  # the seed replays the draw


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dirichlet_and_beta_draws(dtype):
    n = 50_000
    alpha = torch.tensor([0.3, 2.0, 5.0], dtype=dtype)
    got = torch._sample_dirichlet(alpha.expand(n, 3).contiguous().to(DEV)).cpu()
    cpu = torch._sample_dirichlet(alpha.expand(n, 3).contiguous())
    assert got.dtype == dtype
    torch.testing.assert_close(got.sum(-1), torch.ones(n, dtype=dtype), rtol=0, atol=1e-5)
    for k in range(3):
        assert _ks(got[:, k], cpu[:, k]) < 1.95 * math.sqrt(2 / n)
    beta = torch.distributions.Beta(torch.tensor(2.0, dtype=dtype, device=DEV), torch.tensor(5.0, dtype=dtype,
                                                                                             device=DEV))
    assert abs(beta.sample((n,)).cpu().mean().item() - 2 / 7) < 0.005


def test_dirichlet_edges_like_cpu():
    alpha = torch.tensor([[0.0, 0.0, 0.0], [1e-3, 1e-3, 1e-3], [1.0, 1.0, 1.0]])
    got = torch._sample_dirichlet(alpha.to(DEV)).cpu()
    torch.testing.assert_close(got[0], torch.full((3,), 1 / 3))  # all draws clamped alike: equal shares
    tiny, below_one = torch.finfo(torch.float32).tiny, 1 - torch.finfo(torch.float32).eps / 2
    assert ((got >= tiny) & (got <= below_one)).all()
    # Tiny alphas put (nearly) all the mass on one component, as the CPU's double draws do.
    assert got[1].max() > 0.99
    assert torch._sample_dirichlet(torch.ones((), device=DEV)).item() == below_one
    assert torch._sample_dirichlet(torch.ones(0, 3, device=DEV)).shape == (0, 3)


@pytest.mark.parametrize("fn", [torch._standard_gamma, torch._sample_dirichlet])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int64])
def test_gamma_draws_refuse_types_the_cpu_refuses(fn, dtype):
    with pytest.raises(NotImplementedError) as cpu:
        fn(torch.ones(3, dtype=dtype))
    with pytest.raises(NotImplementedError, match=re.escape(str(cpu.value))):
        fn(torch.ones(3, dtype=dtype, device=DEV))


def test_gamma_rsample_gradient():
    """Gamma.rsample's gradient through _standard_gamma_grad: E[dx/dalpha] = 1."""
    torch.manual_seed(1)
    a = torch.tensor([0.5, 2.0, 12.0], device=DEV, requires_grad=True)
    x = torch.distributions.Gamma(a, torch.ones(3, device=DEV)).rsample((4000,))
    x.sum().backward()
    torch.testing.assert_close(a.grad.cpu() / 4000, torch.ones(3), rtol=0.06, atol=0)
