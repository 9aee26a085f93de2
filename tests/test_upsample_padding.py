"""Upsampling (nearest, nearest-exact, linear/bilinear/trilinear with align_corners, sizes
and scale factors) and reflection/replication padding on tpu against the CPU, forward and
backward, plus errors.

Tolerances: assert_close's defaults, except for half-type gradients (GRAD_TOL): the CPU's
backward kernels accumulate bfloat16/float16 gradients in a half-precision buffer, rounding
after every add, while tpu sums in float32 and rounds once.
"""
import pytest
import torch
import torch.nn.functional as F
import torch_tpu  # noqa: F401

DEV = "tpu"
FLOATS = [torch.float32, torch.bfloat16, torch.float16]
GRAD_TOL = {torch.bfloat16: dict(atol=3e-2, rtol=1.6e-2), torch.float16: dict(atol=4e-3, rtol=1e-3)}


def make(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(0, 100, shape, generator=g).to(dtype)


def check(fn, x, grad=False, **tol):
    xc = x.detach().clone().requires_grad_(grad)
    xd = x.detach().to(DEV).requires_grad_(grad)
    out_c, out_d = fn(xc), fn(xd)
    assert out_d.device.type == DEV
    torch.testing.assert_close(out_d.cpu(), out_c, **tol)
    if grad:
        g = make(out_c.shape, out_c.dtype, seed=9)
        out_c.backward(g)
        out_d.backward(g.to(DEV))
        torch.testing.assert_close(xd.grad.cpu(), xc.grad, **(tol or GRAD_TOL.get(x.dtype, {})))


# ---- upsampling

NEAREST_2D = [dict(scale_factor=2), dict(scale_factor=(1.5, 3)), dict(size=(5, 7)), dict(size=(3, 2)),
              dict(scale_factor=0.5), dict(size=(13, 11))]


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("kw", NEAREST_2D)
def test_nearest2d(mode, dtype, kw):
    check(lambda x: F.interpolate(x, mode=mode, **kw), make((2, 3, 6, 5), dtype), grad=True)


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
def test_nearest1d_3d(mode):
    for kw in (dict(scale_factor=2), dict(size=7), dict(scale_factor=0.7)):
        check(lambda x: F.interpolate(x, mode=mode, **kw), make((2, 3, 5), torch.float32), grad=True)
    for kw in (dict(scale_factor=2), dict(size=(3, 5, 4)), dict(scale_factor=(1.5, 0.5, 2))):
        check(lambda x: F.interpolate(x, mode=mode, **kw), make((1, 2, 4, 6, 3), torch.float32), grad=True)


def test_nearest_uint8():
    check(lambda x: F.interpolate(x, scale_factor=1.7), make((1, 3, 4, 5), torch.uint8))


BILINEAR = [dict(scale_factor=2), dict(scale_factor=(1.5, 2.5)), dict(size=(7, 4)), dict(size=(3, 2)),
            dict(scale_factor=0.6), dict(size=(1, 1))]


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("dtype", FLOATS + [torch.float64])
@pytest.mark.parametrize("kw", BILINEAR)
def test_bilinear2d(align, dtype, kw):
    check(lambda x: F.interpolate(x, mode="bilinear", align_corners=align, **kw), make((2, 3, 6, 5), dtype),
          grad=True)


@pytest.mark.parametrize("align", [False, True])
def test_linear1d_trilinear3d(align):
    for kw in (dict(scale_factor=2), dict(size=9), dict(scale_factor=0.7)):
        check(lambda x: F.interpolate(x, mode="linear", align_corners=align, **kw), make((2, 3, 5), torch.float32),
              grad=True)
    for kw in (dict(scale_factor=2), dict(size=(3, 5, 4))):
        check(lambda x: F.interpolate(x, mode="trilinear", align_corners=align, **kw),
              make((1, 2, 4, 6, 3), torch.float32), grad=True)


def test_upsample_vec_overloads_decompose():
    """The .vec overloads stay composite (so autograd sees the default overloads)."""
    x = make((1, 2, 4, 5), torch.float32)
    for op, extra in ((torch.ops.aten.upsample_nearest2d.vec, ()), (torch.ops.aten.upsample_bilinear2d.vec, (False,)),
                      (torch.ops.aten._upsample_nearest_exact2d.vec, ())):
        for size, scales in (([7, 3], None), (None, [1.5, 2.0])):
            args = (size, *extra, scales)
            torch.testing.assert_close(op(x.to(DEV), *args).cpu(), op(x, *args))


def test_upsample_errors():
    x = make((1, 2, 4, 5), torch.float32)
    for fn in (lambda x: torch.ops.aten.upsample_nearest2d.vec(x, [3, 3], [2.0, 2.0]),
               lambda x: F.interpolate(x.long(), scale_factor=2, mode="bilinear")):
        with pytest.raises(Exception) as cpu_err:
            fn(x)
        with pytest.raises(type(cpu_err.value)):
            fn(x.to(DEV))


# ---- padding

PADS = {1: [(1, 2), (0, 3), (2, 0), (-1, 2)], 2: [(1, 1, 2, 0), (2, 3, 1, 1), (0, 0, 3, 2)],
        3: [(1, 1, 1, 1, 1, 1), (2, 0, 1, 2, 0, 1)]}


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("batched", [True, False])
def test_pad(mode, dtype, n, batched):
    shape = ((2,) if batched else ()) + (3,) + (5, 4, 6)[:n]
    for pad in PADS[n]:
        check(lambda x: F.pad(x, pad, mode=mode), make(shape, dtype), grad=True)


@pytest.mark.parametrize("dtype", [torch.int64, torch.uint8, torch.float64])
def test_pad_other_dtypes(dtype):
    for mode in ("reflect", "replicate"):
        check(lambda x: F.pad(x, (1, 2, 2, 1), mode=mode), make((2, 3, 4, 5), dtype))


@pytest.mark.parametrize("fn", [
    lambda x: F.pad(x, (5, 1), mode="reflect"),            # padding >= input size
    lambda x: F.pad(x.bool(), (1, 1), mode="reflect"),     # dtype
])
def test_pad_errors(fn):
    x = make((2, 3, 4), torch.float32)
    with pytest.raises(Exception) as cpu_err:
        fn(x)
    with pytest.raises(type(cpu_err.value)) as dev_err:
        fn(x.to(DEV))
    assert str(cpu_err.value).splitlines()[0] in str(dev_err.value)
