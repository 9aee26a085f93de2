"""Reductions and scans on tpu against the CPU: values, dtypes, shapes, gradients, errors."""
import math

import pytest
import torch
import torch_tpu  # noqa: F401

DEV = "tpu"
FLOATS = [torch.float32, torch.bfloat16, torch.float16]
INTS = [torch.int64, torch.int32]
SHAPES = [(), (0,), (5,), (3, 4), (2, 3, 4), (2, 0, 3)]


def make(shape, dtype, seed=0, low=-3, high=4):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(low, high, shape, generator=g).to(dtype)


def to_dev(x):
    return x.to(DEV) if isinstance(x, torch.Tensor) else x


def check(fn, *inputs, grad=False, ref64=False, **kw):
    """fn on the CPU inputs and on their tpu copies gives the same results
    (and, with grad=True, the same input gradients for a random upstream grad).
    ref64: the reference is computed in float64 and rounded, for ops whose
    CPU kernel rounds intermediates to half precision (tpu keeps them in f32)."""
    cpu = [x.detach().clone().requires_grad_(grad) if isinstance(x, torch.Tensor) else x for x in inputs]
    dev = [to_dev(x).detach().requires_grad_(grad) if isinstance(x, torch.Tensor) else x for x in inputs]
    if ref64:
        wide = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in cpu]
        out_c = fn(*wide)
        out_c = out_c.to(inputs[0].dtype) if inputs[0].is_floating_point() else out_c.float()
    else:
        out_c = fn(*cpu)
    out_d = fn(*dev)
    outs_c = out_c if isinstance(out_c, (tuple, list)) else (out_c,)
    outs_d = out_d if isinstance(out_d, (tuple, list)) else (out_d,)
    assert len(outs_c) == len(outs_d)
    for c, d in zip(outs_c, outs_d):
        assert d.device.type == DEV
        torch.testing.assert_close(d.cpu(), c, equal_nan=True, **kw)
    if grad:
        pairs = [(c, d) for c, d in zip(outs_c, outs_d) if c.requires_grad]
        gs = [make(c.shape, c.dtype, seed=7) for c, _ in pairs]
        torch.autograd.backward([c for c, _ in pairs], gs)
        torch.autograd.backward([d for _, d in pairs], [to_dev(g) for g in gs])
        for c, d in zip(cpu, dev):
            if isinstance(c, torch.Tensor):
                torch.testing.assert_close(d.grad.cpu(), c.grad, equal_nan=True, **kw)


def raises_like(fn, *inputs):
    """The tpu op raises the CPU op's exception type with the same message."""
    with pytest.raises(Exception) as cpu_err:
        fn(*inputs)
    with pytest.raises(type(cpu_err.value)) as dev_err:
        fn(*[to_dev(x) for x in inputs])
    assert str(cpu_err.value).splitlines()[0] in str(dev_err.value)


def dims_for(shape):
    r = len(shape)
    out = [None] if r == 0 else [None, 0, -1, (0, -1) if r > 1 else (0,)]
    return out


# logcumsumexp's backward chains exp/log over the scan; bf16 rounding of the
# saved output leaves a couple of bf16 ulps at unit scale.
LOOSE_BF16 = dict(rtol=3e-2, atol=3e-2)


# ---- sum / mean / prod


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", FLOATS + INTS + [torch.bool])
def test_sum_all(shape, dtype):
    check(torch.sum, make(shape, dtype))


@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4), (2, 0, 3), ()])
@pytest.mark.parametrize("dtype", FLOATS + INTS + [torch.bool])
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_dim(shape, dtype, keepdim):
    x = make(shape, dtype)
    for dim in dims_for(shape):
        if dim is None:
            continue
        check(lambda t: t.sum(dim, keepdim=keepdim), x)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.int32])
def test_sum_dtype_arg(dtype):
    x = make((3, 5), torch.int32)
    check(lambda t: t.sum(dtype=dtype), x)
    check(lambda t: t.sum(1, dtype=dtype), x)


def test_sum_long_rows_half():
    # half-precision sums accumulate in f32 like the CPU's
    x = make((4, 4096), torch.bfloat16)
    check(lambda t: t.sum(1), x)
    check(lambda t: t.mean(1), x)


@pytest.mark.parametrize("shape,dims", [((512, 32), [0]), ((32, 517), [1]), ((9, 8, 5, 16), [0, 2, 3])])
def test_float32_sums_round_like_the_cpus_cascade(shape, dims):
    # Swin-V2's LayerNorm and logit_scale gradients are sums of ~500 terms
    # that cancel. One reduce adding them in sequence was 3-4x further from
    # float64 than the CPU; in PyTorch's cascade of 16 it is as close.
    for seed in range(3):
        x = torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * 100
        exact = x.double().sum(dims)
        cpu_err = (x.sum(dims).double() - exact).abs().max().item()
        tpu_err = (x.to(DEV).sum(dims).cpu().double() - exact).abs().max().item()
        assert tpu_err <= 1.5 * cpu_err + 1e-7 * exact.abs().max().item(), (seed, tpu_err, cpu_err)
        torch.testing.assert_close(x.to(DEV).mean(dims).cpu(), x.mean(dims))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", FLOATS)
def test_mean(shape, dtype):
    x = make(shape, dtype)
    check(torch.mean, x)
    for dim in dims_for(shape):
        if dim is not None:
            check(lambda t: t.mean(dim, keepdim=True), x)
            check(lambda t: t.mean(dim), x)


def test_mean_int_dtype_arg():
    check(lambda t: t.mean(dtype=torch.float32), make((3, 4), torch.int64))
    check(lambda t: t.mean(0, dtype=torch.float64), make((3, 4), torch.int32))


def test_mean_int_error():
    raises_like(torch.mean, make((3,), torch.int64))


@pytest.mark.parametrize("shape", [(), (5,), (3, 4), (2, 0, 3)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.bool])
def test_prod(shape, dtype):
    x = make(shape, dtype, low=-2, high=3)
    check(torch.prod, x)
    if shape:
        check(lambda t: t.prod(-1, keepdim=True), x)
        check(lambda t: t.prod(0), x)


# ---- amax / amin / max / min / argmax / argmin


@pytest.mark.parametrize("shape", [(), (5,), (3, 4), (2, 3, 4), (0, 3)])
@pytest.mark.parametrize("dtype", FLOATS + INTS + [torch.bool])
@pytest.mark.parametrize("op", [torch.amax, torch.amin])
def test_amax_amin(shape, dtype, op):
    x = make(shape, dtype)
    if 0 not in shape:
        check(op, x)
    for dim in dims_for(shape):
        if dim is None or (0 in shape and dim in (0, (0, -1))):
            continue
        check(lambda t: op(t, dim), x)
        check(lambda t: op(t, dim, keepdim=True), x)


def test_amax_empty_dim_error():
    raises_like(lambda t: t.amax(0), torch.randn(0, 3))


@pytest.mark.parametrize("shape", [(), (5,), (3, 4), (2, 3, 4)])
@pytest.mark.parametrize("dtype", FLOATS + INTS + [torch.bool])
@pytest.mark.parametrize("op", [torch.max, torch.min])
def test_max_min(shape, dtype, op):
    x = make(shape, dtype)
    check(op, x)
    for dim in [0, -1]:
        check(lambda t: op(t, dim), x)
        check(lambda t: op(t, dim, keepdim=True), x)


@pytest.mark.parametrize("op", [torch.max, torch.min, torch.argmax, torch.argmin])
def test_ties_and_nan_pick_first(op):
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0, 0.0], [2.0, float("nan"), 5.0, float("nan"), 2.0],
                      [-math.inf, -math.inf, -math.inf, -math.inf, -math.inf]])
    check(lambda t: op(t, 1), x)
    check(lambda t: op(t, 0), x.t().contiguous())
    check(lambda t: op(t), x)


@pytest.mark.parametrize("op", [torch.amax, torch.amin])
def test_amax_nan_propagates(op):
    x = torch.tensor([[1.0, float("nan"), 2.0], [float("nan"), 0.0, -1.0], [4.0, 5.0, 6.0]])
    check(lambda t: op(t, 1), x)
    check(op, x)


def test_max_empty_errors():
    raises_like(torch.max, torch.randn(0, 3))
    raises_like(lambda t: t.max(0), torch.randn(0, 3))
    raises_like(torch.argmax, torch.randn(0, 3))


@pytest.mark.parametrize("shape", [(), (5,), (3, 4), (2, 3, 4)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32])
@pytest.mark.parametrize("op", [torch.argmax, torch.argmin])
def test_argmax_argmin(shape, dtype, op):
    x = make(shape, dtype)
    check(op, x)
    check(lambda t: op(t, None, True), x)
    for dim in [0, -1]:
        check(lambda t: op(t, dim), x)
        check(lambda t: op(t, dim, keepdim=True), x)


def test_argmax_empty_other_dim():
    check(lambda t: t.argmax(1), torch.randn(0, 3))


# ---- any / all


@pytest.mark.parametrize("shape", [(), (0,), (5,), (3, 4), (2, 3, 4)])
@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.float32, torch.int64])
@pytest.mark.parametrize("op", [torch.any, torch.all])
def test_any_all(shape, dtype, op):
    x = make(shape, dtype, low=0, high=2) if dtype != torch.float32 else make(shape, torch.int64, low=0, high=2).float()
    check(op, x)
    if shape:
        check(lambda t: op(t, -1), x)
        check(lambda t: op(t, 0, keepdim=True), x)
        check(lambda t: op(t, dim=tuple(range(len(shape)))), x)


# ---- var / std


@pytest.mark.parametrize("shape", [(), (1,), (5,), (3, 4), (2, 3, 4)])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("correction", [0, 1, 2])
def test_var_std(shape, dtype, correction):
    x = make(shape, dtype)
    for dim in dims_for(shape):
        for keepdim in (False, True):
            check(lambda t: torch.var(t, dim, correction=correction, keepdim=keepdim), x)
            check(lambda t: torch.std(t, dim, correction=correction, keepdim=keepdim), x)
    check(lambda t: torch.var_mean(t, correction=correction), x)
    check(lambda t: torch.std_mean(t, correction=correction), x)


def test_var_fractional_correction():
    check(lambda t: torch.var(t, 0, correction=1.5), make((6, 3), torch.float32))


def test_var_int_error():
    raises_like(torch.var, make((3,), torch.int64))


# ---- logsumexp


@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4), (2, 0)])
@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
def test_logsumexp(shape, dtype):
    x = make(shape, dtype)
    half = dtype in (torch.float16, torch.bfloat16)
    check(lambda t: torch.logsumexp(t, -1), x, ref64=half)
    check(lambda t: torch.logsumexp(t, 0, keepdim=True), x, ref64=half)


def test_logsumexp_infinities():
    x = torch.tensor([[-math.inf, -math.inf], [math.inf, 1.0], [1000.0, 1000.0], [-math.inf, 0.0]])
    check(lambda t: torch.logsumexp(t, 1), x)


# ---- cumsum / cumprod


@pytest.mark.parametrize("shape", [(), (1,), (7,), (3, 5), (2, 3, 17), (0, 3)])
@pytest.mark.parametrize("dtype", FLOATS + INTS + [torch.bool])
def test_cumsum(shape, dtype):
    x = make(shape, dtype)
    dims = [0, -1] if shape else [0]
    for dim in dims:
        check(lambda t: torch.cumsum(t, dim), x)


@pytest.mark.parametrize("shape", [(), (7,), (3, 5), (2, 3, 9)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.int32])
def test_cumprod(shape, dtype):
    x = make(shape, dtype, low=-2, high=3)
    for dim in ([0, -1] if shape else [0]):
        check(lambda t: torch.cumprod(t, dim), x)


def test_cumsum_dtype_arg():
    x = make((4, 6), torch.int32)
    check(lambda t: torch.cumsum(t, 1, dtype=torch.float32), x)
    check(lambda t: torch.cumsum(t, 0, dtype=torch.int32), x)


@pytest.mark.parametrize("shape", [(), (7,), (3, 5), (2, 3, 9)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
@pytest.mark.parametrize("op", [torch.cummax, torch.cummin])
def test_cummax_cummin(shape, dtype, op):
    x = make(shape, dtype, low=-2, high=2)  # few distinct values: many ties (the later index wins)
    for dim in ([0, -1] if shape else [0]):
        check(lambda t: op(t, dim), x)


def test_cummax_nan_wins():
    x = torch.tensor([1.0, float("nan"), 3.0, float("nan"), 0.0])
    check(lambda t: torch.cummax(t, 0), x)
    check(lambda t: torch.cummin(t, 0), x)


@pytest.mark.parametrize("shape", [(), (7,), (3, 5), (2, 3, 9)])
@pytest.mark.parametrize("dtype", FLOATS)
def test_logcumsumexp(shape, dtype):
    x = make(shape, dtype)
    for dim in ([0, -1] if shape else [0]):
        check(lambda t: torch.logcumsumexp(t, dim), x, ref64=dtype != torch.float32)


def test_logcumsumexp_infinities():
    x = torch.tensor([-math.inf, -math.inf, 1.0, math.inf, 2.0, -math.inf])
    check(lambda t: torch.logcumsumexp(t, 0), x)


@pytest.mark.parametrize("shape", [(), (5,), (3, 4), (0, 3)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_aminmax(shape, dtype):
    x = make(shape, dtype)
    if 0 not in shape:
        check(torch.aminmax, x)
        check(lambda t: torch.aminmax(t, keepdim=True), x)
    if shape:
        check(lambda t: torch.aminmax(t, dim=-1), x)
        check(lambda t: torch.aminmax(t, dim=-1, keepdim=True), x)


def test_aminmax_errors():
    raises_like(torch.aminmax, torch.randn(0, 3))
    raises_like(lambda t: torch.aminmax(t, dim=0), torch.randn(0, 3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32])
def test_nansum_count_nonzero(dtype):
    x = make((3, 5), dtype)
    if dtype.is_floating_point:
        x[0, 1] = float("nan")
        x[2, 4] = float("nan")
    check(torch.nansum, x)
    check(lambda t: torch.nansum(t, 1, keepdim=True), x)
    check(lambda t: torch.nansum(t, 0, dtype=torch.float64), x)
    check(torch.count_nonzero, x)
    check(lambda t: torch.count_nonzero(t, 1), x)
    check(lambda t: torch.count_nonzero(t, (0, 1)), x)


# ---- norms


@pytest.mark.parametrize("ord", [2, 1, 0, 3, 0.5, math.inf, -math.inf])
@pytest.mark.parametrize("dtype", FLOATS)
def test_vector_norm(ord, dtype):
    x = make((3, 5), dtype)
    check(lambda t: torch.linalg.vector_norm(t, ord), x)
    check(lambda t: torch.linalg.vector_norm(t, ord, dim=1, keepdim=True), x)
    check(lambda t: torch.linalg.vector_norm(t, ord, dim=(0, -1)), x)


def test_vector_norm_errors():
    raises_like(torch.linalg.vector_norm, make((3,), torch.int64))
    raises_like(lambda t: torch.linalg.vector_norm(t, math.inf), torch.randn(0, 3))


@pytest.mark.parametrize("p", [2, 1, 3, 0.5, math.inf])
@pytest.mark.parametrize("dtype", FLOATS + [torch.float64])
def test_renorm(p, dtype):
    # Slices along dim 0 have norms on both sides of maxnorm; torch.renorm and Tensor.renorm_.
    x = make((4, 3, 5), dtype) * torch.tensor([0.1, 1.0, 3.0, 0.0]).view(4, 1, 1).to(dtype)
    tol = dict(atol=1e-2, rtol=1e-2) if dtype in (torch.bfloat16, torch.float16) else {}
    check(lambda t: torch.renorm(t, p, 0, 1.5), x, grad=True, **tol)
    check(lambda t: torch.renorm(t, p, -1, 0.5), x, **tol)
    check(lambda t: t.clone().renorm_(p, 1, 2.0), x, **tol)


def test_renorm_complex_and_empty():
    x = torch.complex(make((3, 4), torch.float32), make((3, 4), torch.float32, seed=1))
    # The complex gradient only for p=2: the CPU's inf-norm gradient of a complex renorm
    # is NaN (its mask |x| == norm misses every element), tpu's is finite.
    check(lambda t: torch.renorm(t, 2, 1, 0.8), x, grad=True)
    check(lambda t: torch.renorm(t, math.inf, 0, 0.8), x)
    check(lambda t: torch.renorm(t, 2, 1, 1.0), torch.randn(0, 3))


def test_renorm_errors():
    raises_like(lambda t: torch.renorm(t, 2, 0, 1.0), make((3,), torch.float32))
    m = make((3, 2), torch.float32)
    for p, dim, maxnorm in [(0, 0, 1.0), (-1, 0, 1.0), (2, 0, -1.0), (2, 3, 1.0)]:
        raises_like(lambda t: torch.renorm(t, p, dim, maxnorm), m)
    raises_like(lambda t: torch.renorm(t, 2, 0, 1.0), make((3, 2), torch.int64))


def test_clip_grad_norm_foreach_norm():
    ps = [make((3, 4), torch.float32, seed=1), make((5,), torch.float32, seed=2)]
    gs = [make(p.shape, torch.float32, seed=3 + i) for i, p in enumerate(ps)]
    res = []
    for dev in ("cpu", DEV):
        params = [p.clone().to(dev).requires_grad_() for p in ps]
        for p, g in zip(params, gs):
            p.grad = g.clone().to(dev)
        total = torch.nn.utils.clip_grad_norm_(params, 1.0, foreach=True)
        res.append((total.cpu(), [p.grad.cpu() for p in params]))
    torch.testing.assert_close(res[1], res[0])
    check(lambda a, b: torch._foreach_norm([a, b], 3), ps[0], ps[1])


# ---- gradients


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gradients(dtype, require_ops):
    # amax/max/min/logsumexp backward use masked_fill (an elementwise lowering)
    require_ops("aten::masked_fill.Scalar", "aten::masked_fill.Tensor")
    x = make((3, 4), dtype)
    check(lambda t: t.sum(), x, grad=True)
    check(lambda t: t.sum(1, keepdim=True), x, grad=True)
    check(lambda t: t.mean(0), x, grad=True)
    check(lambda t: t.amax(1), x, grad=True)
    check(lambda t: t.max(-1), x, grad=True)
    check(lambda t: t.min(0).values, x, grad=True)
    check(lambda t: t.max(), x, grad=True)
    check(lambda t: torch.logsumexp(t, 1), x, grad=True)
    check(lambda t: t.var(1), x, grad=True)
    check(lambda t: t.std(), x, grad=True)
    check(lambda t: t.cumsum(1), x, grad=True)
    check(lambda t: t.prod(1), x, grad=True)
    check(lambda t: torch.linalg.vector_norm(t, dim=1), x, grad=True)
    check(lambda t: torch.cummax(t, 1).values, x, grad=True)
    check(lambda t: torch.logcumsumexp(t, 1), x, grad=True, **({} if dtype == torch.float32 else LOOSE_BF16))


@pytest.mark.parametrize("op", ["var", "std", "var_mean", "std_mean"])
@pytest.mark.parametrize("dim", [None, 0, (1, 2)])
def test_complex_var_std(op, dim):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(4, 5, 6, dtype=torch.complex64, generator=g)
    fn = getattr(torch, op)
    for kw in [{}, dict(correction=0), dict(keepdim=True)]:
        exp = fn(x, dim=dim, **kw)
        got = fn(x.to("tpu"), dim=dim, **kw)
        exp = exp if isinstance(exp, tuple) else (exp,)
        got = got if isinstance(got, tuple) else (got,)
        for e, t in zip(exp, got):
            assert t.dtype == e.dtype
            torch.testing.assert_close(t.cpu(), e, rtol=1e-5, atol=1e-5)


def test_complex_logsumexp():
    g = torch.Generator().manual_seed(6)
    x = torch.randn(4, 5, dtype=torch.complex64, generator=g) * 3
    for dim, keep in [(1, True), (0, False), ((0, 1), False)]:
        torch.testing.assert_close(torch.logsumexp(x.to("tpu"), dim, keep).cpu(),
                                   torch.logsumexp(x, dim, keep), rtol=1e-5, atol=1e-5)


# ---- PyTorch's edges, from its documented behaviour and its CPU kernels

def same_outcome(fn, *inputs):
    """fn raises the same exception type on tpu as on the CPU, or gives the same result."""
    try:
        want = fn(*inputs)
    except Exception as e:  # noqa: BLE001 - the CPU's exception is the reference
        with pytest.raises(type(e)) as got:
            fn(*(to_dev(x) for x in inputs))
        # The CPU names its kernel ("xor_sum_cpu"); a device's is its own.
        want_msg = str(e).split("\n")[0].replace('_cpu"', '"')
        assert want_msg in str(got.value), (str(e), str(got.value))
        return
    got = fn(*(to_dev(x) for x in inputs))
    torch.testing.assert_close(got.cpu(), want, equal_nan=True)


# The CPU keeps a reduction's dims in a 64-bit mask: more than 64 dims are
# refused when dims are named (and by all/any/vector_norm/flip even without),
# while sum()/amax()/prod() over everything run.
WIDE = [
    lambda x: x.sum(0), lambda x: x.nansum(0), lambda x: x.mean(0), lambda x: x.amax(0), lambda x: x.amin(0),
    lambda x: x.max(0).values, lambda x: x.argmax(0), lambda x: x.argmin(0), lambda x: x.std(0),
    lambda x: torch.var_mean(x, 0)[0], lambda x: torch.count_nonzero(x, 0), lambda x: torch.linalg.vector_norm(x),
    lambda x: torch.linalg.vector_norm(x, dim=0), lambda x: x.prod(0), lambda x: x.logsumexp(0), lambda x: x.all(),
    lambda x: x.any(0), lambda x: x.all(dim=(0, 1)), lambda x: torch.aminmax(x, dim=0)[0],
    lambda x: torch.masked._ops.sum(x, 0, mask=x > 0), lambda x: torch.masked._ops.argmax(x, 0, mask=x > 0),
    lambda x: x.flip(0), lambda x: torch.hash_tensor(x, dim=0),
    lambda x: x.sum(), lambda x: x.amax(), lambda x: x.prod(), lambda x: x.argmax(), lambda x: torch.count_nonzero(x),
]


@pytest.mark.parametrize("i", range(len(WIDE)))
@pytest.mark.parametrize("rank", [64, 65])
def test_reductions_refuse_more_than_64_dims_as_the_cpu(i, rank):
    same_outcome(WIDE[i], torch.ones([1] * rank))


ANY_ALL = [
    lambda x: torch.all(x, dim=()), lambda x: torch.any(x, dim=()), lambda x: torch.all(x, dim=[], keepdim=True),
    lambda x: torch.any(x, dim=[1], keepdim=True), lambda x: torch.all(x, 0), lambda x: torch.any(x),
    lambda x: torch.amax(x, dim=()), lambda x: torch.amin(x, dim=[]),
]


@pytest.mark.parametrize("i", range(len(ANY_ALL)))
@pytest.mark.parametrize("shape", [(2, 3), (0, 3), (2, 0), ()], ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.uint8, torch.bool], ids=str)
def test_all_any_over_no_dims_and_empty_dims(i, shape, dtype):
    """all/any over an empty dim list reduce nothing (the elementwise truth
    value, uint8 kept); amax/amin over no dims of an empty tensor ask for a dim."""
    same_outcome(ANY_ALL[i], make(shape, dtype))


HASHED = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int8, torch.uint8, torch.int64,
          torch.int32, torch.bool]


@pytest.mark.parametrize("dtype", HASHED, ids=str)
@pytest.mark.parametrize("dim, keepdim", [([], False), (0, False), (1, True), ([0, 1], True)])
def test_hash_tensor_matches_the_cpu(dtype, dim, keepdim):
    x = make((3, 5), dtype, seed=4)
    if dtype.is_floating_point:
        x[0, 0], x[1, 1] = float("nan"), -0.0
    same_outcome(lambda t: torch.hash_tensor(t, dim=dim, keepdim=keepdim), x)


def test_hash_tensor_hand_computed_and_refusals():
    # 1.0 and 2.0 as doubles: 0x3ff0... xor 0x4000... = 0x7ff0...
    got = torch.hash_tensor(torch.tensor([1.0, 2.0], device=DEV))
    assert got.dtype == torch.uint64 and got.cpu().item() == 0x7FF0000000000000
    assert torch.hash_tensor(torch.tensor([-1], dtype=torch.int8, device=DEV)).cpu().item() == 2**64 - 1
    for bad in [lambda t: torch.hash_tensor(t, mode=1), lambda t: torch.hash_tensor(t.to(torch.complex64)),
                lambda t: torch.hash_tensor(t[:0], dim=0), lambda t: torch.hash_tensor(t[:0])]:
        same_outcome(bad, torch.ones(3, 2))
