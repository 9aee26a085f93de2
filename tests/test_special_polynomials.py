"""The orthogonal polynomials of torch.special (Chebyshev T/U/V/W and their shifted
forms, Hermite H/He, Laguerre L, Legendre P) on tpu against the CPU, in every eager
mode: PyTorch's OpInfo samples, then the edge cases they miss (NaN/inf/0/+-1 x,
negative, zero, fractional, NaN and huge n, one n per element, broadcasting, the
x_scalar/n_scalar overloads, integer inputs, out=).

The lowerings (csrc/lowering/special_iterative.cpp) run the CPU kernels'
recurrences in a device while loop; degrees are kept modest here, except where a
closed form or Hermite's cut-off makes a huge n free."""
import os
import sys

import pytest
import torch
import torch_tpu  # noqa: F401

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "opinfo"))

import harness  # noqa: E402

NAN, INF = float("nan"), float("inf")
S = torch.special

POLYS = {
    "chebyshev_polynomial_t": S.chebyshev_polynomial_t,
    "chebyshev_polynomial_u": S.chebyshev_polynomial_u,
    "chebyshev_polynomial_v": S.chebyshev_polynomial_v,
    "chebyshev_polynomial_w": S.chebyshev_polynomial_w,
    "hermite_polynomial_h": S.hermite_polynomial_h,
    "hermite_polynomial_he": S.hermite_polynomial_he,
    "laguerre_polynomial_l": S.laguerre_polynomial_l,
    "legendre_polynomial_p": S.legendre_polynomial_p,
    "shifted_chebyshev_polynomial_t": S.shifted_chebyshev_polynomial_t,
    "shifted_chebyshev_polynomial_u": S.shifted_chebyshev_polynomial_u,
    "shifted_chebyshev_polynomial_v": S.shifted_chebyshev_polynomial_v,
    "shifted_chebyshev_polynomial_w": S.shifted_chebyshev_polynomial_w,
}


def same(got, want):
    assert got.device.type == "tpu"
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got.cpu(), want, equal_nan=True)


@pytest.mark.parametrize("dtype_name", ["float32", "float64", "int64"])
@pytest.mark.parametrize("name", sorted(POLYS))
def test_opinfo_samples_match_cpu(name, dtype_name):
    key = "special." + name
    op = harness.op_by_key().get(key)
    assert op is not None, f"no OpInfo named {key} in this torch"
    dtype = getattr(torch, dtype_name)
    assert dtype in op.supported_dtypes("cpu"), f"{key} does not support {dtype_name} on the CPU"
    r = harness.run_opinfo(op, dtype, max_samples=4)
    details = "; ".join(f"{f['dir']} {f['kind']} {f['sample']}: {f['reason']}" for f in r["failures"])
    assert r["fwd"] == "pass", f"{key} {dtype_name} fwd {r['fwd']}: {details}"
    assert r["bwd"] in ("pass", "n/a"), f"{key} {dtype_name} bwd {r['bwd']}: {details}"
    assert r["fwd_pass"] > 0


# x: the special points of every kernel (+-1, 0, 1/2 where shifted ones
# are special), inside and outside [-1, 1], and NaN/inf; n: negative, 0, 1,
# the recurrence, past the closed forms' thresholds (7, 9, 50), fractional
# (truncated), NaN and past int64 (as n < 0 on the CPU).
XS = [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 0.5, -0.3, 0.25, 0.75, 0.9, 1.5, -2.0, 3.0]
NS = [-1.0, 0.0, 1.0, 2.0, 3.7, 5.0, 7.0, 9.0, 50.0, -0.5, NAN, INF, 1e30]


@pytest.mark.parametrize("name", sorted(POLYS))
def test_edge_values_broadcast(name):
    f = POLYS[name]
    for dtype in (torch.float32, torch.float64):
        x = torch.tensor(XS, dtype=dtype)[:, None]  # broadcast against n
        n = torch.tensor(NS, dtype=dtype)[None, :]
        same(f(x.to("tpu"), n.to("tpu")), f(x, n))


@pytest.mark.parametrize("name", sorted(POLYS))
def test_mixed_degrees_and_overloads(name):
    f = POLYS[name]
    g = torch.Generator().manual_seed(0)
    x = torch.rand(4, 6, generator=g, dtype=torch.float64) * 4 - 2
    n = torch.randint(-1, 12, (4, 6), generator=g)  # int64: promoted with x
    same(f(x.to("tpu"), n.to("tpu")), f(x, n))
    same(f(x.float().to("tpu"), n.to("tpu")), f(x.float(), n))
    # Integer x and n compute in the default float type.
    xi = torch.randint(-2, 3, (5,), generator=g)
    ni = torch.tensor([0, 1, 2, 3, 8])
    same(f(xi.to("tpu"), ni.to("tpu")), f(xi, ni))
    # n_scalar and x_scalar.
    for deg in (0, 1, 2, 7, 10.9):
        same(f(x.to("tpu"), deg), f(x, deg))
    for xs in (0.3, -1.0, 2):
        same(f(xs, n.to("tpu")), f(xs, n))
    # 0-dim and empty.
    same(f(torch.tensor(0.4).to("tpu"), torch.tensor(5.0).to("tpu")), f(torch.tensor(0.4), torch.tensor(5.0)))
    same(f(torch.empty(0, 3).to("tpu"), torch.ones(3).to("tpu")), f(torch.empty(0, 3), torch.ones(3)))


@pytest.mark.parametrize("name", ["chebyshev_polynomial_t", "hermite_polynomial_h", "legendre_polynomial_p"])
def test_out(name):
    f = POLYS[name]
    x = torch.linspace(-1.5, 1.5, 7, dtype=torch.float64)
    n = torch.arange(7, dtype=torch.float64)
    for args in ((x, n), (x, 4), (0.25, n)):
        want = f(*args)
        out = torch.empty(7, dtype=torch.float64, device="tpu")
        dev = tuple(a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args)
        got = f(*dev, out=out)
        assert got is out
        same(out, want)
    # out= of another shape is resized, as on the CPU.
    out = torch.empty(0, dtype=torch.float64, device="tpu")
    f(x.to("tpu"), n.to("tpu"), out=out)
    same(out, f(x, n))


def test_half_types_raise_like_cpu():
    for dtype in (torch.float16, torch.bfloat16):
        x = torch.ones(3, dtype=dtype)
        with pytest.raises(NotImplementedError, match="chebyshev_polynomial_t_cpu"):
            S.chebyshev_polynomial_t(x, x)
        with pytest.raises(NotImplementedError, match="chebyshev_polynomial_t_cpu"):
            S.chebyshev_polynomial_t(x.to("tpu"), x.to("tpu"))


def test_huge_degrees():
    """n = 10^6 costs no loop where PyTorch has a closed form (|x| < 1) and
    Hermite is NaN past 128 (float) / 512 (double); a recurrence that
    overflows leaves the loop as soon as it is NaN, as the CPU's does."""
    x = torch.tensor([-0.9, -0.2, 0.0, 0.35, 0.99], dtype=torch.float64)
    for name in ("chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v",
                 "chebyshev_polynomial_w"):
        f = POLYS[name]
        # The closed forms' argument n * acos(x) is large: compare loosely.
        torch.testing.assert_close(f(x.to("tpu"), 1e6).cpu(), f(x, 1e6), rtol=1e-6, atol=1e-6)
    for name in ("hermite_polynomial_h", "hermite_polynomial_he"):
        for dtype in (torch.float32, torch.float64):
            xd = x.to(dtype)
            same(POLYS[name](xd.to("tpu"), 1e6), POLYS[name](xd, 1e6))
            same(POLYS[name](xd.to("tpu"), 100.0), POLYS[name](xd, 100.0))
    big = torch.tensor([1.5, -3.0, 20.0], dtype=torch.float64)
    for name in ("chebyshev_polynomial_t", "legendre_polynomial_p", "shifted_chebyshev_polynomial_w"):
        same(POLYS[name](big.to("tpu"), 5000.0), POLYS[name](big, 5000.0))
