"""sampling.cpp on tpu against the CPU, forward and backward: grid_sample (bilinear/nearest/bicubic x
zeros/border/reflection x align_corners), unfold/fold (im2col/col2im), pixel (un)shuffle,
channel_shuffle, bicubic upsampling, glu, prelu.

Tolerances: assert_close's defaults, except half-type results (HALF_TOL): tpu computes in float32
and rounds once, while the CPU kernels round some intermediate products to the half type.
"""
import pytest
import torch
import torch.nn.functional as F
import torch_tpu  # noqa: F401

DEV = "tpu"
FLOATS = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
HALF_TOL = {torch.bfloat16: dict(atol=5e-2, rtol=2e-2), torch.float16: dict(atol=5e-3, rtol=2e-3)}


def make(shape, dtype, seed=0, lo=-2.0, hi=2.0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo
    if dtype.is_floating_point:
        return x.to(dtype)
    if dtype == torch.bool:
        return x > 0
    return (x * 20).round().to(dtype)


def check(fn, *xs, grad=False, **tol):
    tol = tol or HALF_TOL.get(xs[0].dtype, {})
    cs = [x.detach().clone().requires_grad_(grad) for x in xs]
    ds = [x.detach().to(DEV).requires_grad_(grad) for x in xs]
    out_c, out_d = fn(*cs), fn(*ds)
    assert out_d.device.type == DEV
    torch.testing.assert_close(out_d.cpu(), out_c, **tol)
    if grad:
        g = make(out_c.shape, out_c.dtype, seed=9)
        out_c.backward(g)
        out_d.backward(g.to(DEV))
        for c, d in zip(cs, ds):
            torch.testing.assert_close(d.grad.cpu(), c.grad, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [False, True])
def test_grid_sample(dtype, mode, padding, align):
    x = make((2, 3, 5, 7), dtype)
    grid = make((2, 4, 6, 2), dtype, seed=1, lo=-1.4, hi=1.4)
    fn = lambda a, g: F.grid_sample(a, g, mode=mode, padding_mode=padding, align_corners=align)
    if dtype == torch.bfloat16 and mode == "nearest":
        pytest.skip("bfloat16 grid coordinates that round to a tie pick either neighbour")
    tol = {} if dtype != torch.bfloat16 else dict(atol=0.1, rtol=0.05)
    if mode == "bicubic":
        # Bicubic weights are steep in the grid value: the CPU's own float32
        # grid gradient is up to 2.4e-5 from its float64 one on these
        # inputs, and its bfloat16 output up to 0.2 from float64 (both
        # compute coordinates in the grid's type); tpu is as far or closer.
        tol = {torch.float32: dict(atol=5e-5, rtol=1e-4), torch.bfloat16: dict(atol=0.25, rtol=0.1)}.get(dtype, tol)
    check(fn, x, grid, grad=dtype != torch.bfloat16, **tol)


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [False, True])
def test_grid_sample_bicubic_far_outside_and_on_pixels(padding, align):
    # Points far outside (several reflections), exactly on pixel centres and
    # edges, and on a one-pixel-wide input whose reflection span is empty.
    fn = lambda a, g: F.grid_sample(a, g, mode="bicubic", padding_mode=padding, align_corners=align)
    pts = torch.tensor([-3.7, -1.0, -0.5, 0.0, 0.25, 1.0, 2.2, 5.1], dtype=torch.float64)
    grid = torch.stack(torch.meshgrid(pts, pts.flip(0), indexing="ij"), -1)[None]
    check(fn, make((1, 2, 4, 5), torch.float64), grid, grad=True)
    check(fn, make((1, 1, 1, 3), torch.float64), grid, grad=True)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=(2, 3), stride=(2, 1), padding=1),
                                dict(kernel_size=3, dilation=2, padding=(1, 2), stride=2)])
def test_unfold_fold(dtype, kw):
    x = make((2, 3, 7, 8), dtype)
    check(lambda a: F.unfold(a, **kw), x, grad=True)
    check(lambda a: F.unfold(a, **kw), x[0], grad=True)
    cols = F.unfold(x, **kw)
    check(lambda c: F.fold(c, (7, 8), **kw), cols, grad=True)
    check(lambda c: F.fold(c, (7, 8), **kw), cols[0], grad=True)


def test_unfold_bool_complex():
    for dtype in (torch.bool, torch.complex64):
        x = make((1, 2, 4, 4), dtype) if dtype == torch.bool else torch.randn(1, 2, 4, 4, dtype=dtype)
        check(lambda a: F.unfold(a, kernel_size=2, padding=1), x)
        check(lambda a: F.fold(a, (4, 4), kernel_size=2, padding=1), F.unfold(x, kernel_size=2, padding=1))
    with pytest.raises(NotImplementedError, match="im2col_out_cpu"):
        F.unfold(torch.zeros(1, 2, 4, 4, dtype=torch.int64, device=DEV), 2)


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.bool])
def test_shuffles(dtype):
    grad = dtype.is_floating_point
    check(lambda a: F.pixel_shuffle(a, 2), make((2, 8, 3, 4), dtype), grad=grad)
    check(lambda a: F.pixel_shuffle(a, 3), make((3, 2, 9, 2, 2), dtype), grad=grad)
    check(lambda a: F.pixel_unshuffle(a, 2), make((2, 3, 4, 6), dtype), grad=grad)
    check(lambda a: F.pixel_unshuffle(a, 2), make((4, 4, 2), dtype), grad=grad)
    check(lambda a: F.channel_shuffle(a, 3), make((2, 6, 3, 2), dtype))
    check(lambda a: torch.ops.aten.channel_shuffle(a, 2), make((2, 4, 5), dtype))


def test_shuffle_errors():
    with pytest.raises(RuntimeError, match="divisible"):
        F.pixel_shuffle(torch.zeros(1, 3, 2, 2, device=DEV), 2)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("kw", [dict(scale_factor=2), dict(size=(3, 9)), dict(scale_factor=(0.6, 1.7))])
def test_bicubic(dtype, align, kw):
    check(lambda a: F.interpolate(a, mode="bicubic", align_corners=align, **kw), make((2, 3, 5, 6), dtype),
          grad=True)


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
def test_downscale_rows_weighted_as_the_cpu(mode):
    # 345 -> 270: the source coordinate of row 200 rounds differently with
    # and without fma, and a one-ulp shift moved outputs by 4e-4 (values up to 9).
    check(lambda a: F.interpolate(a, size=(270, 8), mode=mode, align_corners=False),
          make((1, 2, 345, 8), torch.float32, lo=-9, hi=9), grad=True)


@pytest.mark.parametrize("dtype", FLOATS)
def test_glu_prelu(dtype):
    check(lambda a: F.glu(a, -1), make((3, 8), dtype), grad=True)
    check(lambda a: F.glu(a, 1), make((2, 4, 5), dtype), grad=True)
    if dtype != torch.float16:
        w = make((3,), dtype, seed=2)
        check(lambda a, ww: F.prelu(a, ww), make((2, 3, 4), dtype), w, grad=True)
        check(lambda a, ww: F.prelu(a, ww), make((5, 3), dtype), make((1,), dtype, seed=3), grad=True)
