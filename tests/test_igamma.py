"""torch.igamma / torch.igammac (torch.special.gammainc / gammaincc) on tpu against the
CPU, in every eager mode: PyTorch's OpInfo samples, then the boundary values (a or x
at 0, inf, NaN, negative), each branch of the CPU kernel (lower series, upper series,
continued fraction, the asymptotic expansion for 20 < a < 200 and a > 200 near x),
the half types, type promotion, out= and in-place forms, and the gradient in x.

The lowerings (csrc/lowering/special_iterative.cpp) run the kernels' series and
continued fraction to convergence in a device while loop."""
import os
import sys

import pytest
import torch
import torch_tpu  # noqa: F401

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "opinfo"))

import harness  # noqa: E402

NAN, INF = float("nan"), float("inf")
FNS = {"igamma": torch.igamma, "igammac": torch.igammac,
       "gammainc": torch.special.gammainc, "gammaincc": torch.special.gammaincc}


def same(got, want, **tol):
    assert got.device.type == "tpu"
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got.cpu(), want, equal_nan=True, **tol)


@pytest.mark.parametrize("dtype_name", ["float32", "float64"])
@pytest.mark.parametrize("key", ["igamma", "igammac"])
def test_opinfo_samples_match_cpu(key, dtype_name):
    op = harness.op_by_key().get(key)
    assert op is not None, f"no OpInfo named {key} in this torch"
    dtype = getattr(torch, dtype_name)
    assert dtype in op.supported_dtypes("cpu"), f"{key} does not support {dtype_name} on the CPU"
    r = harness.run_opinfo(op, dtype, max_samples=4)
    details = "; ".join(f"{f['dir']} {f['kind']} {f['sample']}: {f['reason']}" for f in r["failures"])
    assert r["fwd"] == "pass", f"{key} {dtype_name} fwd {r['fwd']}: {details}"
    assert r["bwd"] in ("pass", "n/a"), f"{key} {dtype_name} bwd {r['bwd']}: {details}"
    assert r["fwd_pass"] > 0


# Boundaries: 0, inf, NaN and negative a or x (in the kernels' order of
# precedence, e.g. a = NaN with x = 0 is 0, a = inf with x = NaN is 0/1).
A_EDGE = [0.0, 0.0, 0.0, 0.0, 1.0, 2.0, INF, INF, INF, NAN, NAN, 1.0, -1.0, -1.0, 3.0, 0.5, -0.0, INF, 0.0]
X_EDGE = [0.0, 1.0, INF, NAN, 0.0, INF, 1.0, INF, NAN, 0.0, 1.0, NAN, 1.0, -1.0, -1.0, -0.0, 2.0, 0.0, -INF]
# One pair per branch: the lower series (x < a or x <= 1), the upper series
# (x <= 1.1 and small a), the continued fraction (x > 1.1 and x > a), the
# asymptotic expansion (20 < a < 200 and |x - a| < 0.3 a; a > 200 and
# |x - a| < 4.5 sqrt(a)), underflowing factors, and large a or x.
A_BRANCH = [0.5, 3.0, 1e-3, 0.2, 0.05, 1.5, 2.0, 7.5, 25.0, 25.0, 150.0, 300.0, 300.0, 1e4, 1e4, 5.0, 1e-2, 80.0, 0.7, 2e3]
X_BRANCH = [0.3, 2.0, 0.4, 0.9, 1.05, 5.0, 30.0, 4.0, 24.0, 31.0, 120.0, 310.0, 280.0, 1.01e4, 9.7e3, 200.0, 1e3, 5.0, 0.6, 1.5e3]


@pytest.mark.parametrize("name", sorted(FNS))
def test_boundaries_and_branches(name):
    f = FNS[name]
    for dtype in (torch.float32, torch.float64):
        a, x = torch.tensor(A_EDGE + A_BRANCH, dtype=dtype), torch.tensor(X_EDGE + X_BRANCH, dtype=dtype)
        same(f(a.to("tpu"), x.to("tpu")), f(a, x))


@pytest.mark.parametrize("name", ["igamma", "igammac"])
def test_grid_broadcast_and_half_types(name, eager):
    f = FNS[name]
    a = torch.tensor([0.1, 0.5, 1.0, 2.5, 9.0, 21.0, 60.0, 250.0], dtype=torch.float64)[:, None]
    x = torch.tensor([0.01, 0.4, 0.8, 1.0, 1.08, 2.0, 7.0, 20.0, 55.0, 240.0, 800.0], dtype=torch.float64)[None, :]
    # The half types (computed in float) once, in strict mode: compiles are slow.
    half = (torch.bfloat16, torch.float16) if eager == "strict" else ()
    for dtype in (torch.float64, torch.float32) + half:
        same(f(a.to(dtype).to("tpu"), x.to(dtype).to("tpu")), f(a.to(dtype), x.to(dtype)))
    # A float and an int64 tensor promote to float; two int64 tensors raise, as on the CPU.
    xi = torch.tensor([0, 1, 3, 10])
    same(f(torch.full((4,), 2.5).to("tpu"), xi.to("tpu")), f(torch.full((4,), 2.5), xi))
    with pytest.raises(NotImplementedError, match=f"{name}_cpu"):
        f(xi.to("tpu"), xi.to("tpu"))
    # 0-dim and empty.
    same(f(torch.tensor(3.0).to("tpu"), x.float().to("tpu")), f(torch.tensor(3.0), x.float()))
    same(f(torch.empty(0, 1).to("tpu"), torch.ones(3).to("tpu")), f(torch.empty(0, 1), torch.ones(3)))


@pytest.mark.parametrize("name", ["igamma", "igammac"])
def test_out_and_inplace(name):
    f = FNS[name]
    special = FNS["gammainc" if name == "igamma" else "gammaincc"]
    a = torch.tensor([0.5, 1.0, 3.0, 30.0, 0.0, -1.0])
    x = torch.tensor([0.2, 2.0, 3.5, 29.0, 1.0, 1.0])
    want = f(a, x)
    out = torch.empty(6, device="tpu")
    assert f(a.to("tpu"), x.to("tpu"), out=out) is out
    same(out, want)
    out = torch.empty(0, device="tpu")
    special(a.to("tpu"), x.to("tpu"), out=out)
    same(out, want)
    d = a.to("tpu")
    getattr(d, name + "_")(x.to("tpu"))
    same(d, want)
    # In place into a view.
    base = torch.ones(2, 6)
    base_d = base.to("tpu")
    getattr(base[1], name + "_")(x)
    getattr(base_d[1], name + "_")(x.to("tpu"))
    same(base_d, base)


def test_gradient_in_x():
    a = torch.tensor([0.5, 1.0, 3.0, 30.0, 2.0], dtype=torch.float64)
    x = torch.tensor([0.2, 2.0, 3.5, 29.0, 0.7], dtype=torch.float64)
    for f in (torch.igamma, torch.igammac):
        xc = x.clone().requires_grad_()
        xd = x.to("tpu").requires_grad_()
        (gc,) = torch.autograd.grad(f(a, xc).sum(), xc)
        (gd,) = torch.autograd.grad(f(a.to("tpu"), xd).sum(), xd)
        same(gd, gc)
