"""Bessel J0, J1, Y0, Y1, K0, K1, exp(x) K0, exp(x) K1, Airy Ai and Hurwitz zeta
(csrc/lowering/special_bessel.cpp) on tpu against the CPU, in every eager mode:
PyTorch's own OpInfo samples through the OpInfo harness (tests/opinfo/harness.py,
the one tolerance table), then the values the samples miss: NaN, infinities,
signed zeros, tiny and huge values, negatives, and both sides of each boundary
of the piecewise approximations (float32 and float64; the CPU has no half
kernels, and tpu refuses them the same way); then the out= forms (none of these
ops has an in-place form).

Known difference: float32 zeta at negative q with an integer x, where positive
and negative terms cancel, differs from the CPU by more than float32's
tolerance (the CPU sums float's terms in double); it is checked in float64 only.
"""
import math
import os
import sys

import pytest
import torch
import torch_tpu  # noqa: F401

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "opinfo"))

import harness  # noqa: E402

NAN, INF = float("nan"), float("inf")

UNARY = {
    "airy_ai": torch.special.airy_ai,
    "bessel_j0": torch.special.bessel_j0,
    "bessel_j1": torch.special.bessel_j1,
    "bessel_y0": torch.special.bessel_y0,
    "bessel_y1": torch.special.bessel_y1,
    "modified_bessel_k0": torch.special.modified_bessel_k0,
    "modified_bessel_k1": torch.special.modified_bessel_k1,
    "scaled_modified_bessel_k0": torch.special.scaled_modified_bessel_k0,
    "scaled_modified_bessel_k1": torch.special.scaled_modified_bessel_k1,
}

# Where each approximation switches pieces (both signs are swept).
BOUNDARIES = {
    "airy_ai": [2.09, 8.3203353, 103.892],
    "bessel_j0": [1e-5, 5.0],
    "bessel_j1": [5.0],
    "bessel_y0": [5.0],
    "bessel_y1": [5.0],
    "modified_bessel_k0": [2.0],
    "modified_bessel_k1": [2.0],
    "scaled_modified_bessel_k0": [2.0],
    "scaled_modified_bessel_k1": [2.0],
}

EDGES = [NAN, INF, -INF, 0.0, -0.0, 1e-30, 1e-8, 0.5, 1.0, 3.0, 10.0, 30.0, 88.0, 200.0, 710.0, 1e4, 1e6,
         1e10, 1e20, 3e38]


def _same(got, want, **kw):
    assert got.device.type == "tpu"
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got.cpu(), want, equal_nan=True, **kw)


def _edge_values(name, dtype):
    vals = torch.tensor(EDGES, dtype=dtype)
    bounds = torch.tensor(BOUNDARIES[name], dtype=dtype)
    around = torch.cat([bounds, torch.nextafter(bounds, torch.full_like(bounds, INF)),
                        torch.nextafter(bounds, torch.zeros_like(bounds))])
    sweep = torch.linspace(-12, 12, 241, dtype=dtype)
    pos = torch.cat([vals, around])
    return torch.cat([pos, -pos, sweep, torch.logspace(-6, 2.5, 60, dtype=dtype)])


def _opinfo_params():
    keys = ["special." + n for n in UNARY] + ["special.zeta"]
    return [pytest.param(k, d, id=f"{k}-{d}") for k in keys for d in ("float32", "float64")]


@pytest.mark.parametrize("key,dtype_name", _opinfo_params())
def test_opinfo_samples_match_cpu(key, dtype_name):
    op = harness.op_by_key().get(key)
    assert op is not None, f"no OpInfo named {key} in this torch"
    dtype = getattr(torch, dtype_name)
    r = harness.run_opinfo(op, dtype, max_samples=4)
    details = "; ".join(f"{f['dir']} {f['kind']} {f['sample']}: {f['reason']}" for f in r["failures"])
    assert r["fwd"] == "pass", f"{key} {dtype_name} fwd {r['fwd']}: {details}"
    assert r["bwd"] in ("pass", "n/a"), f"{key} {dtype_name} bwd {r['bwd']}: {details}"
    assert r["fwd_pass"] > 0


@pytest.mark.parametrize("name", sorted(UNARY))
def test_edges_match_cpu(name):
    fn = UNARY[name]
    for dtype in (torch.float32, torch.float64):
        x = _edge_values(name, dtype)
        _same(fn(x.to("tpu")), fn(x))
    # bfloat16 and half: no CPU kernel, the same NotImplementedError.
    for dtype in (torch.bfloat16, torch.float16):
        x = torch.ones(3, dtype=dtype)
        with pytest.raises(NotImplementedError) as cpu_err:
            fn(x)
        with pytest.raises(NotImplementedError) as tpu_err:
            fn(x.to("tpu"))
        assert str(tpu_err.value) == str(cpu_err.value)
    # Integer and bool inputs compute in the default float type.
    for x in (torch.arange(-3, 12), torch.tensor([True, False])):
        _same(fn(x.to("tpu")), fn(x))


def _zeta_grid(dtype):
    xs = [NAN, INF, -INF, 0.0, -0.0, 0.5, 1.0, 1.0000001, 1.001, 1.5, 2.0, 3.0, 7.0, 20.0, 50.0, 1e3, 1e10, -1.0, -2.5]
    qs = [NAN, INF, -INF, 0.0, -0.0, 1e-30, 1e-5, 0.5, 1.0, 2.0, 8.9, 9.0, 9.1, 100.0, 1e10, 1e30,
          -1.0, -2.0, -0.5, -3.3, -9.0, -20.25, -100.5]
    x = torch.tensor(xs, dtype=dtype).repeat_interleave(len(qs))
    q = torch.tensor(qs, dtype=dtype).repeat(len(xs))
    g = torch.Generator().manual_seed(0)
    rx = torch.rand(400, generator=g, dtype=dtype) * 30 + 1
    rq = torch.rand(400, generator=g, dtype=dtype) * 40 - 10
    if dtype == torch.float32:  # see the module docstring
        rq = rq.abs()
    return torch.cat([x, rx]), torch.cat([q, rq])


def test_zeta_edges_match_cpu():
    for dtype in (torch.float32, torch.float64):
        x, q = _zeta_grid(dtype)
        _same(torch.special.zeta(x.to("tpu"), q.to("tpu")), torch.special.zeta(x, q))
    # Integer x at negative q: alternating terms (float64).
    x = torch.arange(2, 16, dtype=torch.float64).repeat_interleave(5)
    q = torch.tensor([-26.4997, -13.5011, -7.25, -0.75, -3.5], dtype=torch.float64).repeat(14)
    _same(torch.special.zeta(x.to("tpu"), q.to("tpu")), torch.special.zeta(x, q))
    with pytest.raises(NotImplementedError, match="zeta_cpu"):
        torch.special.zeta(torch.ones(2, dtype=torch.bfloat16, device="tpu"), 1.0)


def test_zeta_overloads_and_promotion():
    q = torch.linspace(0.25, 6, 9)
    _same(torch.special.zeta(q.to("tpu"), 2.0), torch.special.zeta(q, 2.0))  # other_scalar
    _same(torch.special.zeta(3.0, q.to("tpu")), torch.special.zeta(3.0, q))  # self_scalar
    n = torch.arange(1, 6)
    _same(torch.special.zeta(n.to("tpu") + 1, n.to("tpu")), torch.special.zeta(n + 1, n))  # int -> float32
    x64 = torch.tensor(3.0, dtype=torch.float64)  # 0-dim float64 with a float32 tensor: float64
    _same(torch.special.zeta(x64.to("tpu"), q.to("tpu")), torch.special.zeta(x64, q))
    _same(torch.special.zeta(q.to("tpu").reshape(3, 3) + 1, q[:3].to("tpu")),
          torch.special.zeta(q.reshape(3, 3) + 1, q[:3]))  # broadcast


def test_out_forms():
    x = torch.linspace(-3, 9, 13, dtype=torch.float64)
    for fn in UNARY.values():
        want = fn(x)
        out = torch.empty(13, dtype=torch.float64, device="tpu")
        assert fn(x.to("tpu"), out=out) is out
        _same(out, want)
        # A float32 input into a float64 out: computed in float32, then cast.
        out = torch.empty(13, dtype=torch.float64, device="tpu")
        fn(x.float().to("tpu"), out=out)
        _same(out, fn(x.float(), out=torch.empty(13, dtype=torch.float64)))
    q = x.abs() + 0.5
    for args in ((x + 5, q), (x + 5, 2.0), (3.0, q)):
        want = torch.special.zeta(*args)
        dev = [a.to("tpu") if isinstance(a, torch.Tensor) else a for a in args]
        out = torch.empty(13, dtype=torch.float64, device="tpu")
        assert torch.special.zeta(*dev, out=out) is out
        _same(out, want)
