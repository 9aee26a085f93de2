"""Special functions and the float/integer binary ops of special.cpp on tpu against the CPU
(forward, and backward where PyTorch differentiates them through these kernels).

Tolerances: assert_close's defaults for float32/float64 except where noted in TOL: the
expansions are Cephes' (as PyTorch's), but transcendental building blocks (exp, log, sin)
differ in the last bits between XLA and libm, which series amplify near poles and zeros.
"""
import math

import pytest
import torch
import torch_tpu  # noqa: F401

DEV = "tpu"
FLOATS = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
INTS = [torch.int64, torch.int32, torch.uint8]


def make(shape, dtype, lo=-5.0, hi=5.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo
    if dtype.is_floating_point:
        return x.to(dtype)
    if dtype == torch.bool:
        return x > 0
    x = x.round()
    return (x.abs() if dtype == torch.uint8 else x).to(dtype)


def check(fn, *xs, grad=False, **tol):
    cs = [x.detach().clone().requires_grad_(grad) for x in xs]
    ds = [x.detach().to(DEV).requires_grad_(grad) for x in xs]
    out_c, out_d = fn(*cs), fn(*ds)
    assert out_d.device.type == DEV
    torch.testing.assert_close(out_d.cpu(), out_c, equal_nan=True, **tol)
    if grad:
        g = torch.randn(out_c.shape, generator=torch.Generator().manual_seed(3)).to(out_c.dtype)
        out_c.backward(g)
        out_d.backward(g.to(DEV))
        for c, d in zip(cs, ds):
            torch.testing.assert_close(d.grad.cpu(), c.grad, equal_nan=True, **tol)


def tol_for(dtype, f32=None, f64=None):
    if dtype == torch.float32 and f32:
        return dict(atol=f32, rtol=f32)
    if dtype == torch.float64 and f64:
        return dict(atol=f64, rtol=f64)
    return {}


UNARY = {
    "digamma": (torch.digamma, -6, 12, 1e-4, 1e-9),
    "lgamma": (torch.lgamma, -6, 30, 1e-5, 1e-10),
    "i0": (torch.i0, -12, 12, None, None),
    "i0e": (torch.special.i0e, -12, 12, None, None),
    "i1": (torch.special.i1, -12, 12, None, None),
    "i1e": (torch.special.i1e, -12, 12, None, None),
    "sinc": (torch.sinc, -4, 4, None, None),
    "entr": (torch.special.entr, -1, 5, None, None),
    "logit": (torch.logit, -0.2, 1.2, None, None),
    "trigamma": (lambda x: torch.polygamma(1, x), -4, 10, 1e-4, 1e-9),
    "polygamma2": (lambda x: torch.polygamma(2, x), 0.1, 10, 1e-4, 1e-9),
    "polygamma3": (lambda x: torch.polygamma(3, x), -3.5, 10, 1e-4, 1e-9),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_float(name, dtype):
    fn, lo, hi, f32, f64 = UNARY[name]
    tol = tol_for(dtype, f32, f64)
    if name == "logit" and dtype == torch.bfloat16:  # one ulp: XLA's log vs libm's at bfloat16
        tol = dict(atol=4e-3, rtol=1.6e-2)
    check(fn, make((64,), dtype, lo, hi), **tol)


@pytest.mark.parametrize("dtype", INTS + [torch.bool])
@pytest.mark.parametrize("name", ["digamma", "lgamma", "i0", "i1e", "sinc", "logit", "entr"])
def test_unary_int(name, dtype):
    fn, _, _, f32, f64 = UNARY[name]
    check(fn, make((16,), dtype, -3, 8), **tol_for(torch.float32, f32, f64))


def test_special_values():
    x = torch.tensor([0.0, -0.0, -1.0, -2.0, 1.0, 2.0, float("inf"), -float("inf"), float("nan"), 1e-30, 1e20])
    for fn in (torch.digamma, torch.lgamma, torch.special.entr, torch.sinc, torch.i0, torch.special.i1e):
        check(fn, x)
        check(fn, x.double())
    check(lambda t: torch.polygamma(1, t), x[[2, 4, 5, 9]])


def test_digamma_beside_negative_poles():
    # pi / tan(pi x) beside a pole: the CPU computes it in double; float32's
    # pi x near -pi once lost three digits (-3153.7 for -3153.19 at -0.99968).
    k = torch.arange(1, 9, dtype=torch.float64)
    d = torch.tensor([1e-4, 3e-4, 2e-3, 0.02])
    x = (-k[:, None] + torch.cat([d, -d])[None, :]).flatten().float()
    check(torch.digamma, x, rtol=2e-6, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_erfcx_log_ndtr_ndtri(dtype):
    x = torch.cat([make((64,), dtype, -30, 30), torch.tensor([0.0, 1, -1, 0.3, 7.9, 8.1, 100, float("inf"), -float("inf")], dtype=dtype)])
    check(torch.special.erfcx, x)
    check(torch.special.log_ndtr, x, **tol_for(dtype, 1e-5))
    p = torch.cat([make((64,), dtype, 0, 1), torch.tensor([0, 1, 1e-20, 1 - 1e-7, 0.5, -0.1, 1.1, 1e-300], dtype=dtype)])
    check(torch.special.ndtri, p, **tol_for(dtype, 1e-5))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64])
def test_modified_bessel_i0_i1_spherical_bessel_j0(dtype):
    # modified_bessel_i0/i1 are i0 and special.i1 again; spherical_bessel_j0 switches to
    # its series below |x| = 0.5. Kernels for float and double only.
    x = torch.cat([make((64,), torch.float64, -30, 30), make((16,), torch.float64, -0.6, 0.6),
                   torch.tensor([0.0, -0.0, 1e-30, 0.5, -0.5, 8.0, -8.0, 700.0, float("inf"), -float("inf"),
                                 float("nan")])])
    x = x.round() if not dtype.is_floating_point else x
    x = x[x.isfinite()] if not dtype.is_floating_point else x
    for fn in (torch.special.modified_bessel_i0, torch.special.modified_bessel_i1,
               torch.special.spherical_bessel_j0):
        check(fn, x.to(dtype))


def test_float_double_bessels_half_unsupported():
    for fn, kernel in [(torch.special.modified_bessel_i0, "modified_bessel_i0_cpu"),
                       (torch.special.modified_bessel_i1, "modified_bessel_i1_cpu"),
                       (torch.special.spherical_bessel_j0, "spherical_bessel_j0_cpu")]:
        with pytest.raises(NotImplementedError, match=kernel):
            fn(torch.ones(2, dtype=torch.bfloat16, device=DEV))


@pytest.mark.parametrize("dtype", FLOATS)
def test_frexp(dtype):
    # Exact, subnormals included (read from the bits: the plugin may flush them in float math).
    x = torch.cat([make((64,), torch.float64, -1e3, 1e3),
                   torch.tensor([0.0, -0.0, 0.5, 1.0, -5.5, 3.4e38, 1.1754944e-38, 1e-40, -1e-44, 2.0**-149,
                                 -2.0**-126, 1e-310, 2.0**-1074, 1e308, float("inf"), -float("inf"), float("nan")],
                                dtype=torch.float64)]).to(dtype)
    want = torch.frexp(x)
    got = torch.frexp(x.to(DEV))
    for g, w in zip(got, want):
        assert g.device.type == DEV and g.dtype == w.dtype
        torch.testing.assert_close(g.cpu(), w, equal_nan=True, rtol=0, atol=0)
    m, e = torch.empty_like(x).to(DEV), torch.empty(x.shape, dtype=torch.int32).to(DEV)
    torch.frexp(x.to(DEV), out=(m, e))
    torch.testing.assert_close(m.cpu(), want.mantissa, equal_nan=True, rtol=0, atol=0)
    torch.testing.assert_close(e.cpu(), want.exponent, rtol=0, atol=0)
    check(lambda t: torch.frexp(t).mantissa, make((16,), dtype, 0.1, 50), grad=True)


def test_frexp_needs_floats():
    with pytest.raises(RuntimeError, match="only supports floating-point dtypes"):
        torch.frexp(torch.ones(2, dtype=torch.int64, device=DEV))


def test_erfcx_half_unsupported():
    with pytest.raises(NotImplementedError, match="erfcx_cpu"):
        torch.special.erfcx(torch.ones(2, dtype=torch.bfloat16, device=DEV))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_backward(dtype):
    x = make((32,), dtype, 0.5, 6)
    fns = [torch.digamma, torch.lgamma, torch.i0, torch.special.i0e, torch.sinc, torch.special.entr]
    if dtype != torch.bfloat16:  # the CPU has no bfloat16 i1/i1e backward
        fns += [torch.special.i1, torch.special.i1e]
    for fn in fns:
        check(fn, x, grad=True, **({} if dtype != torch.bfloat16 else dict(atol=2e-2, rtol=2e-2)))
    p = make((32,), dtype, 0.05, 0.95)
    tol = dict(atol=4e-3, rtol=1.6e-2) if dtype == torch.bfloat16 else {}
    check(torch.logit, p, grad=True, **tol)
    check(lambda t: torch.logit(t, 0.2), p, grad=True, **tol)


def test_polygamma_errors():
    with pytest.raises(RuntimeError, match="negative n"):
        torch.polygamma(-1, torch.ones(2, device=DEV))


@pytest.mark.parametrize("dtype", FLOATS)
def test_binary_float(dtype):
    x, y = make((4, 8), dtype, -3, 3), make((8,), dtype, -3, 3, seed=1)
    x[0, :3] = float("nan")
    y[1] = float("nan")
    x[1, 4] = 0
    check(torch.fmin, x, y)
    check(torch.fmax, x, y)
    check(torch.logaddexp2, x, y)
    check(torch.nextafter, x, y)
    check(torch.special.xlog1py, x, y)
    check(torch.heaviside, x, y)
    check(lambda a: torch.special.xlog1py(a, 2.5), x)
    check(lambda a: torch.special.xlog1py(3, a), y)


def test_nextafter_edges():
    for dtype in (torch.float32, torch.float64):
        x = torch.tensor([0.0, 0.0, 1.0, 1.0, -1.0, float("inf"), 3.0, -0.0], dtype=dtype)
        y = torch.tensor([1.0, -1.0, 2.0, 0.0, -2.0, 0.0, 3.0, 1.0], dtype=dtype)
        check(torch.nextafter, x, y, atol=0, rtol=0)


def test_binary_grad():
    x, y = make((16,), torch.float32, -3, 3), make((16,), torch.float32, -3, 3, seed=1)
    check(torch.fmin, x, y, grad=True)
    check(torch.fmax, x, y, grad=True)
    check(torch.logaddexp2, x, y, grad=True)
    check(torch.special.xlog1py, x, y.abs(), grad=True)


@pytest.mark.parametrize("dtype", INTS + [torch.int16, torch.int8])
def test_int_binary(dtype):
    x, y = make((5, 7), dtype, -60, 60), make((7,), dtype, -60, 60, seed=1)
    x[0, 0] = 0
    y[0] = 0
    check(torch.gcd, x, y)
    check(torch.lcm, x, y)
    check(torch.fmin, x, y)
    check(torch.fmax, x, y)
    check(torch.heaviside, x, y)


def test_bool_binary():
    x, y = make((9,), torch.bool), make((9,), torch.bool, seed=1)
    check(torch.fmin, x, y)
    check(torch.fmax, x, y)
    check(torch.heaviside, x, y)


def test_errors():
    with pytest.raises(RuntimeError, match="different dtypes"):
        torch.heaviside(torch.ones(2, device=DEV), torch.ones(2, device=DEV, dtype=torch.float64))
    with pytest.raises(NotImplementedError, match="gcd_cpu"):
        torch.gcd(torch.ones(2, device=DEV), torch.ones(2, device=DEV))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_standard_gamma_grad_matches_cpu(dtype):
    """Every piece: the Taylor series (x < 0.8), Rice's expansion near and
    away from alpha (alpha > 8), the rational fit; broadcasting; the CPU
    computes in double, so subnormal float32 x is left out."""
    alpha = torch.tensor([0.05, 0.3, 1.0, 2.5, 7.9, 8.5, 20.0, 100.0, 1e-3, 50.0, 50.0, 50.0, 3.0, 0.5, 1e4])
    x = torch.tensor([0.01, 0.5, 0.79, 0.81, 5.0, 8.6, 19.0, 80.0, 1e-30, 46.0, 55.0, 60.0, 3.0, 2.0, 9e3])
    a, v = alpha.to(dtype), x.to(dtype)
    got = torch._standard_gamma_grad(a.to(DEV), v.to(DEV))
    torch.testing.assert_close(got.cpu(), torch._standard_gamma_grad(a, v), rtol=1e-5, atol=0)
    grid = torch._standard_gamma_grad(a.to(DEV)[:, None], v.to(DEV)[None, :]).cpu()
    torch.testing.assert_close(grid, torch._standard_gamma_grad(a[:, None], v[None, :]), rtol=1e-4, atol=1e-30,
                               equal_nan=True)
    with pytest.raises(NotImplementedError, match="_standard_gamma_grad_cpu"):
        torch._standard_gamma_grad(torch.ones(2, dtype=torch.half, device=DEV), torch.ones(2, dtype=torch.half,
                                                                                             device=DEV))
