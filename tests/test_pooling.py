"""Pooling on tpu against the CPU: max_pool1d/2d/3d (values, PyTorch's indices, gradients),
avg_pool1d/2d/3d (ceil_mode, count_include_pad, divisor_override), adaptive average
pooling 1d/2d/3d and adaptive max pooling 2d, forward and backward, plus errors.

Tolerances: assert_close's defaults, except for half-type gradients of overlapping windows
(GRAD_TOL): the CPU's max-pool backward adds each window's gradient into a bfloat16/float16
buffer, rounding after every add, while tpu sums in float32 and rounds once; with
cancellation the CPU's result can be a couple of half-precision ulps of the partial sums away
(e.g. 0.0078 on a true value of ~0.07 in bfloat16).
"""
import pytest
import torch
import torch.nn.functional as F
import torch_tpu  # noqa: F401

DEV = "tpu"
FLOATS = [torch.float32, torch.bfloat16, torch.float16]


def make(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-20, 21, shape, generator=g).to(dtype)


GRAD_TOL = {torch.bfloat16: dict(atol=3e-2, rtol=1.6e-2), torch.float16: dict(atol=4e-3, rtol=1e-3)}


def check(fn, x, grad=False, **tol):
    xc = x.detach().clone().requires_grad_(grad)
    xd = x.detach().to(DEV).requires_grad_(grad)
    out_c, out_d = fn(xc), fn(xd)
    outs_c = out_c if isinstance(out_c, tuple) else (out_c,)
    outs_d = out_d if isinstance(out_d, tuple) else (out_d,)
    for c, d in zip(outs_c, outs_d):
        assert d.device.type == DEV
        torch.testing.assert_close(d.cpu(), c, **tol)
    if grad:
        g = make(outs_c[0].shape, outs_c[0].dtype, seed=9)
        outs_c[0].backward(g)
        outs_d[0].backward(g.to(DEV))
        torch.testing.assert_close(xd.grad.cpu(), xc.grad, **(tol or GRAD_TOL.get(x.dtype, {})))


MAX2D = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(3, 2), stride=(2, 1), padding=(1, 0), dilation=(2, 1)),
    dict(kernel_size=3, stride=2, ceil_mode=True),
    dict(kernel_size=2, stride=1),  # overlapping windows: gradients add up
    dict(kernel_size=3, stride=3, padding=1, ceil_mode=True),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("kw", MAX2D)
@pytest.mark.parametrize("shape", [(2, 3, 9, 8), (3, 7, 7)])
def test_max_pool2d(dtype, kw, shape):
    check(lambda x: F.max_pool2d(x, return_indices=True, **kw), make(shape, dtype), grad=True)


def test_max_pool2d_ties_nan_inf():
    x = torch.tensor([[[[1.0, 1.0, 2.0, 2.0],
                        [1.0, 1.0, float("nan"), 2.0],
                        [-float("inf"), -float("inf"), float("nan"), float("nan")],
                        [-float("inf"), -float("inf"), 3.0, float("nan")]]]])
    for kw in (dict(kernel_size=2), dict(kernel_size=2, stride=1), dict(kernel_size=3, padding=1)):
        check(lambda x: F.max_pool2d(x, return_indices=True, **kw), x, equal_nan=True)
    check(lambda x: F.max_pool2d(x, 2, return_indices=True), torch.zeros(1, 2, 4, 4))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.float64])
def test_max_pool2d_other_dtypes(dtype):
    check(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), make((2, 2, 7, 6), dtype).abs())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=(2, 3, 2), stride=(1, 2, 2), padding=1, ceil_mode=True),
                                dict(kernel_size=2, dilation=2)])
def test_max_pool3d(dtype, kw):
    check(lambda x: F.max_pool3d(x, return_indices=True, **kw), make((2, 2, 6, 7, 5), dtype), grad=True)


@pytest.mark.parametrize("kw", [dict(kernel_size=3), dict(kernel_size=2, stride=1, padding=1, dilation=1, ceil_mode=True)])
def test_max_pool1d(kw):
    check(lambda x: F.max_pool1d(x, **kw), make((2, 3, 10), torch.float32), grad=True)


AVG2D = [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    dict(kernel_size=(2, 3), stride=(1, 2), divisor_override=5),
    dict(kernel_size=4, stride=3, padding=2, ceil_mode=True),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("kw", AVG2D)
@pytest.mark.parametrize("shape", [(2, 3, 9, 8), (3, 7, 7)])
def test_avg_pool2d(dtype, kw, shape):
    check(lambda x: F.avg_pool2d(x, **kw), make(shape, dtype), grad=True)


@pytest.mark.parametrize("dtype", [torch.int64, torch.float64])
def test_avg_pool2d_other_dtypes(dtype):
    check(lambda x: F.avg_pool2d(x, 3, 2, 1), make((2, 2, 7, 6), dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])  # the CPU has no bfloat16 avg_pool3d
@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
                                dict(kernel_size=(1, 2, 3), divisor_override=3)])
def test_avg_pool3d(dtype, kw):
    check(lambda x: F.avg_pool3d(x, **kw), make((2, 2, 6, 7, 5), dtype), grad=True)


@pytest.mark.parametrize("kw", [dict(kernel_size=3), dict(kernel_size=4, stride=2, padding=2, ceil_mode=True, count_include_pad=False)])
def test_avg_pool1d(kw):
    check(lambda x: F.avg_pool1d(x, **kw), make((2, 3, 11), torch.float32), grad=True)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("out", [(1, 1), (3, 3), (4, 2), (5, 7), (9, 8)])
def test_adaptive_avg_pool2d(dtype, out):
    check(lambda x: F.adaptive_avg_pool2d(x, out), make((2, 3, 9, 8), dtype), grad=True)
    check(lambda x: F.adaptive_avg_pool2d(x, out), make((3, 9, 8), dtype), grad=True)


def test_adaptive_avg_pool1d_3d():
    check(lambda x: F.adaptive_avg_pool1d(x, 4), make((2, 3, 10), torch.float32), grad=True)
    check(lambda x: F.adaptive_avg_pool3d(x, (2, 3, 4)), make((2, 2, 5, 7, 9), torch.float32), grad=True)
    check(lambda x: F.adaptive_avg_pool3d(x, 1), make((2, 5, 7, 9), torch.bfloat16), grad=True)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("out", [(1, 1), (3, 3), (4, 2), (5, 7)])
def test_adaptive_max_pool2d(dtype, out):
    check(lambda x: F.adaptive_max_pool2d(x, out, return_indices=True), make((2, 3, 9, 8), dtype), grad=True)
    check(lambda x: F.adaptive_max_pool2d(x, out, return_indices=True), make((3, 9, 8), dtype), grad=True)


@pytest.mark.parametrize("fn", [
    lambda x: F.max_pool2d(x, 2, padding=2),
    lambda x: F.max_pool2d(x[:, :, :1, :1], 2),
    lambda x: F.avg_pool2d(x, 2, padding=2),
    lambda x: F.avg_pool2d(x[:, :, :1, :1], 2),
    lambda x: torch.ops.aten.avg_pool2d(x, [2, 2], [], [0], False, True, 0),
    lambda x: F.max_pool2d(x[0, 0], 2),
    lambda x: F.adaptive_avg_pool2d(x[0, 0], 2),
    lambda x: F.adaptive_avg_pool2d(x.long(), 2),
])
def test_errors(fn):
    x = make((2, 3, 5, 5), torch.float32)
    with pytest.raises(Exception) as cpu_err:
        fn(x)
    with pytest.raises(type(cpu_err.value)) as dev_err:
        fn(x.to(DEV))
    assert str(cpu_err.value).splitlines()[0] in str(dev_err.value)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,out", [((2, 3, 5, 7, 6), (2, 3, 4)), ((3, 4, 4, 5), (1, 2, 5)),
                                       ((1, 2, 6, 6, 6), (3, 3, 3))])
def test_adaptive_max_pool3d(dtype, shape, out):
    x = make(shape, dtype)
    check(lambda t: F.adaptive_max_pool3d(t, out, return_indices=True), x)
    check(lambda t: F.adaptive_max_pool3d(t, out), x, grad=True)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n,shape,kw", [
    (1, (2, 3, 9), dict(kernel_size=3, stride=2)),
    (2, (2, 3, 6, 7), dict(kernel_size=2)),
    (2, (3, 5, 5), dict(kernel_size=3, stride=2, padding=1)),
    (3, (1, 2, 4, 6, 5), dict(kernel_size=2, stride=2)),
])
def test_max_unpool(dtype, n, shape, kw):
    pool = getattr(F, f"max_pool{n}d")
    unpool = getattr(F, f"max_unpool{n}d")
    x = make(shape, dtype)
    v, i = pool(x, return_indices=True, **kw)
    size = list(shape[-n:])
    check(lambda t: unpool(t, i.to(t.device), output_size=size, **kw), v, grad=True)
    # The default output size, where it holds every index.
    try:
        unpool(v, i, **kw)
    except RuntimeError:
        return
    check(lambda t: unpool(t, i.to(t.device), **kw), v)
