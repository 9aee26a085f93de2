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


# ---- fractional max pooling: the windows come from _random_samples, given
# here so that the CPU and tpu pick the same ones (the samples are drawn by
# the caller; the starts are computed from them on the device, in the
# input's type as the CPU computes them).

FRACTIONAL = [
    (2, (2, 3, 7, 8), (2, 2), (4, 4), 2),
    (2, (3, 9, 10), (3, 2), (4, 5), 1),          # unbatched
    (2, (1, 2, 20, 20), (3, 3), (9, 13), 3),     # more samples than batches
    (2, (2, 3, 7, 8), (1, 1), (7, 8), 2),        # every element its own window
    (2, (2, 3, 7, 8), (2, 2), (1, 1), 2),
    (2, (2, 3, 7, 8), (2, 2), (0, 3), 2),        # an empty output
    (2, (2, 3, 7, 8), (0, 2), (4, 4), 2),        # empty windows: -inf at the window's start
    (3, (2, 3, 5, 7, 8), (2, 2, 2), (3, 3, 3), 2),
    (3, (3, 6, 9, 10), (3, 2, 1), (3, 4, 5), 1),  # unbatched
]


def fractional(n, k, out, u):
    pool = getattr(F, f"fractional_max_pool{n}d")
    return lambda t: pool(t, k, output_size=out, return_indices=True, _random_samples=u.to(t.device))


@pytest.mark.parametrize("dtype", FLOATS + [torch.float64])
@pytest.mark.parametrize("n,shape,k,out,batches", FRACTIONAL)
def test_fractional_max_pool_matches_cpu(dtype, n, shape, k, out, batches):
    x = make(shape, dtype)
    for seed in range(3):
        g = torch.Generator().manual_seed(seed)
        u = torch.rand(batches, shape[-n - 1], n, generator=g).to(dtype)
        check(fractional(n, k, out, u), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("n,shape,k,out", [(2, (2, 3, 9, 9), (3, 3), (5, 5)), (2, (2, 3, 8, 9), (2, 2), (7, 8)),
                                           (3, (1, 2, 6, 7, 5), (2, 3, 2), (4, 4, 3))])
def test_fractional_max_pool_backward(dtype, n, shape, k, out):
    """Overlapping windows: an element that wins several adds their gradients."""
    x = make(shape, dtype)
    u = torch.rand(shape[0], shape[1], n, generator=torch.Generator().manual_seed(5)).to(dtype)
    pool = getattr(F, f"fractional_max_pool{n}d")
    check(lambda t: pool(t, k, output_size=out, _random_samples=u.to(t.device)), x, grad=True)


def test_fractional_max_pool_nan_inf_ties():
    x = torch.tensor([[[[1.0, 1.0, float("nan"), 2.0], [float("-inf")] * 4, [3.0, float("nan"), 3.0, float("inf")],
                        [0.0, -0.0, 0.0, 5.0]]]])
    u = torch.tensor([[[0.3, 0.7]]])
    check(fractional(2, (2, 2), (3, 3), u), x, equal_nan=True)


@pytest.mark.parametrize("n", [2, 3])
def test_fractional_max_pool_module_draws_on_device(n):
    """nn.FractionalMaxPoolNd draws its samples on tpu: the values are the
    input's at the returned indices, and the gradient lands there."""
    shape = (2, 3, 10, 11) if n == 2 else (2, 3, 6, 7, 8)
    module = getattr(torch.nn, f"FractionalMaxPool{n}d")(2, output_ratio=0.5, return_indices=True)
    x = make(shape, torch.float32).to(DEV).requires_grad_()
    v, i = module(x)
    flat = x.detach().flatten(-n).cpu()
    torch.testing.assert_close(v.detach().cpu(), flat.gather(-1, i.cpu().flatten(-n)).view_as(v))
    v.sum().backward()
    expect = torch.zeros_like(flat).scatter_add_(-1, i.cpu().flatten(-n), torch.ones(i.shape).flatten(-n))
    torch.testing.assert_close(x.grad.cpu(), expect.view(shape))


def _fractional_error(fn, *args):
    """fn(*args) on the CPU and on tpu raise the same error."""
    with pytest.raises(Exception) as cpu:
        fn(*args)
    with pytest.raises(type(cpu.value)) as tpu:
        fn(*[a.to(DEV) if isinstance(a, torch.Tensor) else a for a in args])
        torch.tpu.synchronize()
    assert str(tpu.value).split("\n")[0] == str(cpu.value).split("\n")[0]


A = torch.ops.aten


@pytest.mark.parametrize("case", [
    (A.fractional_max_pool2d, (2, 3, 7, 8), [2], [4, 4], (2, 3, 2), torch.float32),
    (A.fractional_max_pool2d, (2, 3, 7, 8), [2, 2], [4], (2, 3, 2), torch.float32),
    (A.fractional_max_pool2d, (7, 8), [2, 2], [4, 4], (2, 3, 2), torch.float32),
    (A.fractional_max_pool2d, (2, 0, 7, 8), [2, 2], [4, 4], (2, 0, 2), torch.float32),
    (A.fractional_max_pool2d, (2, 3, 7, 8), [2, 2], [4, 4], (2, 3, 2), torch.float64),
    (A.fractional_max_pool2d, (2, 3, 7, 8), [2, 2], [4, 4], (6, 2), torch.float32),
    (A.fractional_max_pool2d, (2, 3, 7, 8), [2, 2], [4, 4], (1, 3, 2), torch.float32),
    (A.fractional_max_pool2d, (2, 3, 7, 8), [2, 2], [4, 4], (2, 2, 2), torch.float32),
    (A.fractional_max_pool2d, (2, 3, 7, 8), [2, 2], [4, 4], (2, 3, 3), torch.float32),
    (A.fractional_max_pool2d, (2, 3, 7, 8), [5, 2], [4, 4], (2, 3, 2), torch.float32),
    (A.fractional_max_pool2d, (2, 3, 7, 8), [2, 6], [4, 4], (2, 3, 2), torch.float32),
    (A.fractional_max_pool3d, (2, 3, 5, 7, 8), [2, 2], [3, 3, 3], (2, 3, 3), torch.float32),
    (A.fractional_max_pool3d, (7, 8, 9), [2, 2, 2], [3, 3, 3], (2, 3, 3), torch.float32),
    (A.fractional_max_pool3d, (2, 3, 5, 7, 8), [2, 2, 2], [4, 3, 3], (2, 3, 3), torch.float32),
    (A.fractional_max_pool3d, (2, 3, 5, 7, 8), [2, 2, 6], [3, 3, 3], (2, 3, 3), torch.float32),
    (A.fractional_max_pool3d, (2, 3, 5, 7, 8), [2, 2, 2], [3, 3, 3], (2, 3, 2), torch.float32),
], ids=lambda c: f"{c[0].__name__}-{c[1]}-{c[2]}-{c[3]}-{c[4]}-{c[5]}")
def test_fractional_max_pool_errors(case):
    fn, shape, k, out, ushape, udtype = case
    _fractional_error(fn, torch.randn(shape), k, out, torch.rand(ushape, dtype=udtype))


def test_fractional_max_pool_integer_input():
    _fractional_error(A.fractional_max_pool2d, torch.ones(2, 3, 7, 8, dtype=torch.int32), [2, 2], [4, 4],
                      torch.ones(2, 3, 2, dtype=torch.int32))


@pytest.mark.parametrize("case", [
    (A.fractional_max_pool2d_backward, (2, 3, 4, 5), (2, 3, 7, 8), [2, 2], [4, 4], (2, 3, 4, 4), torch.long),
    (A.fractional_max_pool2d_backward, (2, 3, 4, 4), (2, 3, 7, 8), [2, 2], [4, 4], (2, 3, 4, 3), torch.long),
    (A.fractional_max_pool2d_backward, (2, 3, 4, 4), (2, 3, 7, 8), [2, 2], [4, 4], (2, 3, 4, 4), torch.float32),
    (A.fractional_max_pool3d_backward, (2, 3, 4, 3, 3), (2, 3, 5, 7, 8), [2, 2, 2], [3, 3, 3], (2, 3, 3, 3, 3),
     torch.long),
    (A.fractional_max_pool3d_backward, (2, 3, 3, 3, 4), (2, 3, 5, 7, 8), [2, 2, 2], [3, 3, 3], (2, 3, 3, 3, 3),
     torch.long),
], ids=lambda c: f"{c[0].__name__}-{c[1]}-{c[5]}-{c[6]}")
def test_fractional_max_pool_backward_errors(case):
    fn, gshape, xshape, k, out, ishape, idtype = case
    _fractional_error(fn, torch.randn(gshape), torch.randn(xshape), k, out, torch.zeros(ishape, dtype=idtype))
