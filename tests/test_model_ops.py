"""Ops real models call beyond Core ATen, against the CPU in every eager mode:
isin (every overload, invert, out=), complex and polar, multi_margin_loss,
grid_sampler_2d (bicubic too) and grid_sampler_3d, antialiased bilinear
interpolation, multinomial (by its statistics: the tpu generator is not the
CPU's); and (OpInfo samples here, edge cases in their families' suites)
renorm, cholesky_inverse, cholesky_solve, triangular_solve, frexp, histogram,
multilabel_margin_loss, special.modified_bessel_i0/i1 and
special.spherical_bessel_j0.

Each op first runs PyTorch's own OpInfo samples through the OpInfo harness
(tests/opinfo/harness.py: forward, then the input gradients with a random
cotangent, compared with the CPU by the one tolerance table), then the edge
cases the samples miss, each compared with the CPU result."""
import os
import sys

import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "opinfo"))

import harness  # noqa: E402

NAN, INF = float("nan"), float("inf")

# (OpInfo key, dtypes, samples per dtype): the samples are PyTorch's.
# renorm leaves out complex: the CPU's gradient of its inf-norm sample is NaN
# (tests/test_reduction.py checks complex renorm against the CPU otherwise).
OPINFO = [
    ("_upsample_bilinear2d_aa", ("float32", "float64"), 8),
    ("cholesky_inverse", ("float32", "float64", "complex64"), 12),
    ("cholesky_solve", ("float32", "float64", "complex64"), 12),
    ("complex", ("float32", "float64"), 8),
    ("frexp", ("float32", "float64", "bfloat16"), 16),
    ("grid_sampler_2d", ("float32", "float64"), 12),
    ("grid_sampler_3d", ("float32", "float64"), 12),
    ("histogram", ("float32", "float64"), 32),
    ("isin", ("float32", "int64", "int32", "uint8", "float64"), 8),
    ("nn.functional.grid_sample", ("float32", "float64"), 24),
    ("nn.functional.multi_margin_loss", ("float32", "float64"), 12),
    ("nn.functional.multilabel_margin_loss", ("float32", "float64"), 12),
    ("polar", ("float32", "float64"), 8),
    ("renorm", ("float32", "float64", "bfloat16"), 4),
    ("special.modified_bessel_i0", ("float32", "float64"), 40),
    ("special.modified_bessel_i1", ("float32", "float64"), 40),
    ("special.spherical_bessel_j0", ("float32", "float64"), 40),
    ("triangular_solve", ("float32", "float64", "complex64"), 16),
]


def _opinfo_params():
    return [pytest.param(k, d, n, id=f"{k}-{d}") for k, ds, n in OPINFO for d in ds]


@pytest.mark.parametrize("key,dtype_name,n", _opinfo_params())
def test_opinfo_samples_match_cpu(key, dtype_name, n):
    op = harness.op_by_key().get(key)
    assert op is not None, f"no OpInfo named {key} in this torch"
    dtype = getattr(torch, dtype_name)
    assert dtype in op.supported_dtypes("cpu"), f"{key} does not support {dtype_name} on the CPU"
    r = harness.run_opinfo(op, dtype, max_samples=n)
    details = "; ".join(f"{f['dir']} {f['kind']} {f['sample']}: {f['reason']}" for f in r["failures"])
    assert r["fwd"] == "pass", f"{key} {dtype_name} fwd {r['fwd']}: {details}"
    assert r["bwd"] in ("pass", "n/a"), f"{key} {dtype_name} bwd {r['bwd']}: {details}"
    assert r["fwd_pass"] > 0


def _same(got, want, **kw):
    assert got.device.type == "tpu"
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got.cpu(), want, equal_nan=True, **kw)

def _same_loss_and_grad(x, loss_fn):
    """loss_fn(x on a device, the device) and its gradient (under an uneven
    cotangent, so that every element's weight differs) on tpu equal the CPU's."""
    def run(d):
        xd = x.to(d).requires_grad_()
        loss = loss_fn(xd, d)
        cot = torch.linspace(0.5, 2.0, loss.numel(), dtype=torch.float64).reshape(loss.shape)
        (gx,) = torch.autograd.grad(loss, xd, cot.to(d))
        return loss, gx

    want, want_g = run("cpu")
    got, got_g = run("tpu")
    _same(got.detach(), want.detach())
    _same(got_g, want_g)



# ---- isin

ISIN = [
    ("tensor_tensor", lambda d: (torch.tensor([1, 2, 3, 4, 2]).to(d), torch.tensor([2, 4]).to(d))),
    ("tensor_scalar", lambda d: (torch.tensor([[1, 2], [3, 2]]).to(d), 2)),
    ("scalar_tensor", lambda d: (3, torch.tensor([1, 3, 5]).to(d))),
    ("scalar_tensor_absent", lambda d: (4, torch.tensor([1, 3, 5]).to(d))),
    ("int_elements_float_scalar", lambda d: (torch.tensor([1, 2, 3]).to(d), 2.5)),
    ("int_elements_float_tests", lambda d: (torch.tensor([1, 2, 3]).to(d), torch.tensor([2.5, 3.0]).to(d))),
    ("nan_never_matches", lambda d: (torch.tensor([NAN, 1.0, INF]).to(d), torch.tensor([NAN, INF]).to(d))),
    ("nan_scalar", lambda d: (torch.tensor([NAN, 1.0]).to(d), NAN)),
    ("empty_tests", lambda d: (torch.tensor([1.0, 2.0]).to(d), torch.tensor([]).to(d))),
    ("empty_elements", lambda d: (torch.tensor([]).to(d), torch.tensor([1.0]).to(d))),
]


@pytest.mark.parametrize("invert", [False, True])
@pytest.mark.parametrize("name,make", ISIN, ids=[c[0] for c in ISIN])
def test_isin_matches_cpu(name, make, invert):
    want = torch.isin(*make("cpu"), invert=invert)
    _same(torch.isin(*make("tpu"), invert=invert), want)


@pytest.mark.parametrize("name,make", ISIN[:3], ids=[c[0] for c in ISIN[:3]])
def test_isin_out_variants(name, make):
    want = torch.isin(*make("cpu"), invert=True)
    out = torch.empty(0, dtype=torch.bool, device="tpu")
    torch.isin(*make("tpu"), invert=True, out=out)
    _same(out, want)


@pytest.mark.parametrize("args", [
    lambda d: (torch.tensor([True]).to(d), torch.tensor([True]).to(d)),
    lambda d: (torch.tensor([1, 2]).to(d), True),
    lambda d: (1j, torch.tensor([1, 2]).to(d)),
    lambda d: (torch.tensor([1j]).to(d), torch.tensor([1j]).to(d)),
], ids=["bool", "bool_scalar", "complex_scalar", "complex"])
def test_isin_refuses_what_the_cpu_refuses(args):
    with pytest.raises(RuntimeError, match="Unsupported input type encountered for isin") as cpu:
        torch.isin(*args("cpu"))
    with pytest.raises(RuntimeError, match="Unsupported input type encountered for isin") as tpu:
        torch.isin(*args("tpu"))
    assert str(tpu.value).split("\n")[0] == str(cpu.value).split("\n")[0]


def test_isin_out_of_another_dtype_raises_as_on_cpu():
    for d in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match="Expected out tensor to have dtype bool, but got float"):
            torch.isin(torch.tensor([1, 2]).to(d), 2, out=torch.empty(2, device=d))


# ---- complex, polar

def test_polar_special_values_match_cpu():
    r = torch.tensor([-1.0, 0.0, INF, NAN, 2.0, 0.0, 3.0])
    theta = torch.tensor([0.5, INF, 0.0, 1.0, NAN, 0.0, -1e30])
    _same(torch.polar(r.to("tpu"), theta.to("tpu")), torch.polar(r, theta))


def test_polar_broadcasts_and_out_variant():
    r, theta = torch.rand(3, 1), torch.randn(1, 4, dtype=torch.float32)
    _same(torch.polar(r.to("tpu"), theta.to("tpu")), torch.polar(r, theta))
    out = torch.empty(0, dtype=torch.complex64, device="tpu")
    torch.polar(r.to("tpu"), theta.to("tpu"), out=out)
    _same(out, torch.polar(r, theta))


def test_polar_rotary_embedding_as_deepseek_builds_it():
    # freqs_cis = polar(ones, outer(t, inv_freq)), applied to query pairs as complex numbers.
    dim, seq = 16, 12
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
    q = torch.randn(2, seq, 4, dim)

    def rotate(q, inv_freq):
        t = torch.arange(seq, device=q.device, dtype=torch.float32)
        freqs = torch.outer(t, inv_freq)
        cis = torch.polar(torch.ones_like(freqs), freqs)
        qc = torch.view_as_complex(q.reshape(*q.shape[:-1], -1, 2))
        return torch.view_as_real(qc * cis[None, :, None, :]).flatten(3)

    want = rotate(q, inv_freq)
    got = rotate(q.to("tpu"), inv_freq.to("tpu"))
    _same(got, want)


@pytest.mark.parametrize("fn", [torch.polar, torch.complex], ids=["polar", "complex"])
@pytest.mark.parametrize("a,b,err", [
    (torch.rand(3), torch.rand(3).double(), "Expected object of scalar type Float but got scalar type Double"),
    (torch.arange(3), torch.arange(3), "Expected both inputs to be Half, Float or Double tensors but got Long"),
    (torch.rand(3).bfloat16(), torch.rand(3).bfloat16(), "but got BFloat16 and BFloat16"),
], ids=["mixed", "long", "bfloat16"])
def test_polar_and_complex_argument_errors_as_on_cpu(fn, a, b, err):
    with pytest.raises(RuntimeError, match=err):
        fn(a, b)
    with pytest.raises(RuntimeError, match=err):
        fn(a.to("tpu"), b.to("tpu"))


@pytest.mark.parametrize("fn", [torch.polar, torch.complex], ids=["polar", "complex"])
def test_polar_and_complex_out_of_another_dtype_raise_as_on_cpu(fn):
    for d in ("cpu", "tpu"):
        out = torch.empty(3, dtype=torch.complex128, device=d)
        with pytest.raises(RuntimeError, match="Expected object of scalar type ComplexFloat but got "
                                               "scalar type ComplexDouble for argument 'out'"):
            fn(torch.rand(3).to(d), torch.rand(3).to(d), out=out)


# ---- multi_margin_loss

@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("p,margin,weighted", [(1, 1.0, False), (2, 1.0, False), (1, 0.3, True),
                                               (2, 2.5, True)])
@pytest.mark.parametrize("shape", [(5, 4), (4,), ()], ids=["batched", "unbatched", "scalar"])
def test_multi_margin_loss_and_grad_match_cpu(shape, p, margin, weighted, reduction):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    c = shape[-1] if shape else 1
    n = shape[0] if len(shape) == 2 else None
    target = torch.randint(0, c, (n,) if n else (), generator=g)
    weight = torch.rand(c, generator=g, dtype=torch.float64) if weighted else None

    _same_loss_and_grad(x, lambda xd, d: F.multi_margin_loss(
        xd, target.to(d), p=p, margin=margin, weight=None if weight is None else weight.to(d),
        reduction=reduction))


def test_multi_margin_loss_ties_on_the_margin_give_no_loss():
    # z == 0 exactly is not > 0: no loss and no gradient, as on the CPU.
    x = torch.tensor([[1.0, 0.0, 2.0]], requires_grad=True)
    t = torch.tensor([2])
    for d in ("cpu", "tpu"):
        xd = x.detach().to(d).requires_grad_()
        F.multi_margin_loss(xd, t.to(d)).backward()
        if d == "cpu":
            want = xd.grad
        else:
            _same(xd.grad, want)


@pytest.mark.parametrize("make,err", [
    (lambda d: (torch.randn(3, 4).to(d), torch.tensor([1, 2]).to(d)), "Expected target size \\[3\\]"),
    (lambda d: (torch.randn(3, 4).to(d), torch.tensor([1, 2, 3], dtype=torch.int32).to(d)),
     "expected scalar type Long but found Int"),
    (lambda d: (torch.randn(3, 0).to(d), torch.tensor([1, 2, 3]).to(d)), "Expected non-empty vector or matrix"),
    (lambda d: (torch.randn(2, 3, 4).to(d), torch.tensor([1, 2]).to(d)), "Expected non-empty vector or matrix"),
], ids=["target_size", "target_dtype", "empty_classes", "rank3"])
def test_multi_margin_loss_argument_errors_as_on_cpu(make, err):
    for d in ("cpu", "tpu"):
        with pytest.raises(RuntimeError, match=err):
            F.multi_margin_loss(*make(d))


def test_multi_margin_loss_weight_errors_as_on_cpu():
    for d in ("cpu", "tpu"):
        x, t = torch.randn(3, 4).to(d), torch.tensor([1, 2, 3]).to(d)
        with pytest.raises(RuntimeError, match="inconsistent weight size, expected 4 but got \\[3\\]"):
            F.multi_margin_loss(x, t, weight=torch.ones(3).to(d))
        with pytest.raises(RuntimeError, match="expected scalar type Float but found Double"):
            F.multi_margin_loss(x, t, weight=torch.ones(4, dtype=torch.float64).to(d))
        with pytest.raises(NotImplementedError, match="multi_margin_loss_cpu_kernel"):
            F.multi_margin_loss(x.long(), t)


# ---- multilabel_margin_loss

MULTILABEL = [
    ("batch", torch.randn(4, 5, generator=torch.Generator().manual_seed(8), dtype=torch.float64),
     torch.tensor([[3, 0, -1, 1, 2], [1, 2, 3, 4, 0], [-1, 2, 3, 0, 0], [4, 4, 1, -1, 3]])),
    ("one_sample", torch.tensor([0.1, 0.2, 0.4, 0.8], dtype=torch.float64), torch.tensor([3, 0, -1, 1])),
    ("scalar", torch.tensor(0.3, dtype=torch.float64), torch.tensor(0)),
    # 1 - x[y] + x[i] == 0 exactly: no loss and no gradient, as on the CPU.
    ("ties", torch.tensor([[1.0, 0.0, 2.0]], dtype=torch.float64), torch.tensor([[0, -1, 2]])),
]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name,x,target", MULTILABEL, ids=[c[0] for c in MULTILABEL])
def test_multilabel_margin_loss_and_grad_match_cpu(name, x, target, reduction):
    # Listed classes end at the first -1; a repeated one counts twice.
    _same_loss_and_grad(x, lambda xd, d: torch.nn.MultiLabelMarginLoss(reduction=reduction)(
        xd, target.to(d)))
    _, is_target = torch.ops.aten.multilabel_margin_loss_forward(x.float().to("tpu"), target.to("tpu"), 1)
    _same(is_target, torch.ops.aten.multilabel_margin_loss_forward(x.float(), target, 1)[1])


@pytest.mark.parametrize("make,err,match", [
    (lambda d: (torch.randn(2, 4).to(d), torch.zeros(2, 3, dtype=torch.long).to(d)), RuntimeError,
     "inconsistent target size"),
    (lambda d: (torch.randn(2, 4).to(d), torch.zeros(2, 4, dtype=torch.int32).to(d)), RuntimeError,
     "expected scalar type Long but found Int"),
    (lambda d: (torch.randn(2, 3, 4).to(d), torch.zeros(2, 3, 4, dtype=torch.long).to(d)), RuntimeError,
     "Expected non-empty vector or matrix"),
    (lambda d: (torch.randn(2, 4).bfloat16().to(d), torch.zeros(2, 4, dtype=torch.long).to(d)), NotImplementedError,
     "multilabel_margin_loss_forward_out_frame"),
], ids=["target_size", "target_dtype", "rank3", "bfloat16"])
def test_multilabel_margin_loss_argument_errors_as_on_cpu(make, err, match):
    for d in ("cpu", "tpu"):
        with pytest.raises(err, match=match):
            F.multilabel_margin_loss(*make(d))


# ---- antialiased interpolation

AA = [
    ("down_3x", (2, 3, 12, 15), dict(size=(4, 5))),
    ("down_uneven", (1, 2, 10, 20), dict(size=(3, 7))),
    ("down_8x_wide_support", (1, 1, 32, 40), dict(size=(4, 5))),
    ("up", (1, 2, 4, 5), dict(size=(9, 11))),
    ("mixed_up_down", (1, 2, 8, 5), dict(size=(3, 12))),
    ("one_pixel", (1, 1, 7, 6), dict(size=(1, 1))),
    ("height_unchanged", (1, 2, 6, 9), dict(size=(6, 4))),
    ("scale_factor", (1, 2, 10, 20), dict(scale_factor=(0.37, 0.6))),
    ("scale_factor_recomputed", (1, 2, 10, 20), dict(scale_factor=0.45, recompute_scale_factor=True)),
]


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("name,shape,kw", AA, ids=[c[0] for c in AA])
def test_antialiased_interpolate_and_grad_match_cpu(name, shape, kw, mode, align):
    g = torch.Generator().manual_seed(7)
    x = torch.randn(shape, generator=g)

    def run(d):
        xd = x.to(d).requires_grad_()
        y = F.interpolate(xd, mode=mode, antialias=True, align_corners=align, **kw)
        cot = torch.randn(y.shape, generator=torch.Generator().manual_seed(8))
        (gx,) = torch.autograd.grad(y, xd, cot.to(d))
        return y.detach(), gx

    want, want_g = run("cpu")
    got, got_g = run("tpu")
    _same(got, want)
    _same(got_g, want_g)


def test_antialiased_interpolate_refuses_integers_clearly():
    x = torch.zeros(1, 1, 4, 4, dtype=torch.int32, device="tpu")
    with pytest.raises(NotImplementedError, match="_upsample_bilinear2d_aa"):
        F.interpolate(x, size=(2, 2), mode="bilinear", antialias=True)


# ---- grid_sampler_3d: the cases OpInfo's samples miss

@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_grid_sample_3d_and_grads_match_cpu(mode, padding, align):
    # Points well outside the volume too (the grid spans [-1.6, 1.6]), where
    # the padding modes differ; a volume of unequal sides catches swapped axes.
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 3, 4, 5, 6, generator=g)
    grid = torch.rand(2, 3, 2, 4, 3, generator=g) * 3.2 - 1.6

    def run(d):
        xd, gd = x.to(d).requires_grad_(), grid.to(d).requires_grad_()
        y = F.grid_sample(xd, gd, mode=mode, padding_mode=padding, align_corners=align)
        cot = torch.randn(y.shape, generator=torch.Generator().manual_seed(4))
        gx, gg = torch.autograd.grad(y, (xd, gd), cot.to(d))
        return y.detach(), gx, gg

    for got, want in zip(run("tpu"), run("cpu")):
        _same(got, want)


@pytest.mark.parametrize("dtype,tol", [(torch.float16, 2e-3), (torch.bfloat16, 1.6e-2)])
def test_grid_sample_3d_half_types_match_cpu(dtype, tol):
    # Both sides compute the coordinates in the half type (the CPU computes
    # everything in it); tpu interpolates in float32 and rounds once, so the
    # results differ by about one rounding of the half type.
    g = torch.Generator().manual_seed(5)
    x = torch.randn(1, 2, 3, 4, 5, generator=g).to(dtype)
    grid = (torch.rand(1, 2, 3, 2, 3, generator=g) * 2 - 1).to(dtype)
    got = F.grid_sample(x.to("tpu"), grid.to("tpu"), align_corners=False)
    _same(got, F.grid_sample(x, grid, align_corners=False), atol=tol, rtol=tol)


@pytest.mark.parametrize("input_shape,grid_shape,mode", [
    ((1, 1, 2, 2, 2), (1, 1, 1, 1, 3), 2),   # bicubic is 2-d only
    ((1, 1, 2, 2, 2), (1, 1, 1, 1, 2), 0),   # a grid of 2-d points
    ((1, 1, 0, 2, 2), (1, 1, 1, 1, 3), 0),   # an empty volume
    ((2, 1, 2, 2, 2), (1, 1, 1, 1, 3), 0),   # batch sizes differ
])
def test_grid_sampler_3d_argument_errors_as_on_cpu(input_shape, grid_shape, mode):
    def call(d):
        return torch.grid_sampler_3d(torch.ones(input_shape, device=d), torch.zeros(grid_shape, device=d),
                                     mode, 0, False)

    with pytest.raises(RuntimeError) as want:
        call("cpu")
    with pytest.raises(RuntimeError) as got:
        call("tpu")
    assert str(want.value) in str(got.value)


# ---- multinomial: statistics, since the tpu generator is not the CPU's.
# Every seed is fixed, so each bound is checked against one known draw; the
# bounds are ~5 standard deviations, so a correct sampler passes them with
# any seed as well.

PROBS = torch.tensor([[0.1, 0.0, 0.25, 0.4, 0.0, 0.25],
                      [5.0, 1.0, 0.0, 0.0, 2.0, 2.0]])  # unnormalized rows are allowed


def _chi_square(counts, probs):
    """(statistic, bound) of counts against probs over its nonzero categories:
    the bound is the mean plus 5 standard deviations of chi-square(k - 1)."""
    p = probs / probs.sum()
    keep = p > 0
    expected = counts.sum() * p[keep]
    stat = ((counts[keep].double() - expected) ** 2 / expected).sum().item()
    df = int(keep.sum()) - 1
    return stat, df + 5 * (2 * df) ** 0.5


def _counts(samples, k):
    return torch.bincount(samples.reshape(-1).cpu(), minlength=k)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_multinomial_with_replacement_follows_the_probabilities(dtype):
    torch.manual_seed(11)
    n = 20000
    got = torch.multinomial(PROBS.to("tpu", dtype), n, replacement=True)
    assert got.device.type == "tpu" and got.dtype == torch.int64 and got.shape == (2, n)
    for row in range(2):
        counts = _counts(got[row], 6)
        assert (counts[PROBS[row] == 0] == 0).all(), counts  # never a category of probability 0
        stat, bound = _chi_square(counts, PROBS[row])
        assert stat < bound, (row, counts, stat, bound)
    # The CPU's sampler, judged by the same bound, passes it too.
    cpu = torch.multinomial(PROBS, n, replacement=True, generator=torch.Generator().manual_seed(11))
    stat, bound = _chi_square(_counts(cpu[0], 6), PROBS[0])
    assert stat < bound


@pytest.mark.parametrize("replacement", [False, True])
def test_multinomial_one_sample_per_row_follows_the_probabilities(replacement):
    # One sample per row is the CPU's fast path (the one token generate()
    # samples per step); 4000 rows of the same distribution.
    torch.manual_seed(12)
    rows = PROBS[1].expand(4000, 6)
    got = torch.multinomial(rows.to("tpu"), 1, replacement=replacement)
    assert got.shape == (4000, 1)
    counts = _counts(got, 6)
    assert (counts[PROBS[1] == 0] == 0).all(), counts
    stat, bound = _chi_square(counts, PROBS[1])
    assert stat < bound, (counts, stat, bound)


def test_multinomial_without_replacement_draws_distinct_categories_as_the_cpu_does():
    torch.manual_seed(13)
    rows, n = 4000, 3
    probs = PROBS[1].expand(rows, 6)
    got = torch.multinomial(probs.to("tpu"), n).cpu()
    assert got.shape == (rows, n) and got.dtype == torch.int64
    assert (got.sort(1).values.diff(dim=1) > 0).all()  # distinct within each row
    assert not torch.isin(got, torch.tensor([2, 3])).any()  # 4 categories can fill 3 draws
    # The first draw follows p; the later ones p among those left. Compare
    # how often each category is drawn at each position with the CPU's
    # frequencies: each is a proportion of `rows` draws, so two independent
    # estimates differ by at most 5 * sqrt(2 p (1 - p) / rows).
    want = torch.multinomial(probs, n, generator=torch.Generator().manual_seed(13))
    for pos in range(n):
        f_got = _counts(got[:, pos], 6).double() / rows
        f_want = _counts(want[:, pos], 6).double() / rows
        p = (f_got + f_want) / 2
        assert ((f_got - f_want).abs() <= 5 * (2 * p * (1 - p) / rows).sqrt() + 1e-12).all(), (pos, f_got, f_want)
    stat, bound = _chi_square(_counts(got[:, 0], 6), PROBS[1])
    assert stat < bound


def test_multinomial_without_replacement_of_every_category_is_a_permutation():
    torch.manual_seed(14)
    got = torch.multinomial(torch.rand(5, 40).to("tpu") + 0.01, 40).cpu()
    assert (got.sort(1).values == torch.arange(40)).all()


def test_multinomial_shapes_generators_and_out():
    p = torch.tensor([0.2, 0.3, 0.5])
    assert torch.multinomial(p.to("tpu"), 2).shape == (2,)
    assert torch.multinomial(p.to("tpu"), 7, True).shape == (7,)
    assert torch.multinomial(torch.ones(0, 3, device="tpu"), 2, True).shape == (0, 2)
    # A generator of its own replays its draws; the default one moves on.
    draws = [torch.multinomial(PROBS.to("tpu"), 50, True, generator=torch.Generator("tpu").manual_seed(5)).cpu()
             for _ in range(2)]
    assert torch.equal(draws[0], draws[1])
    torch.manual_seed(5)
    a = torch.multinomial(PROBS.to("tpu"), 50, True).cpu()
    b = torch.multinomial(PROBS.to("tpu"), 50, True).cpu()
    torch.manual_seed(5)
    assert torch.equal(a, torch.multinomial(PROBS.to("tpu"), 50, True).cpu()) and not torch.equal(a, b)
    out = torch.empty(0, dtype=torch.int64, device="tpu")
    r = torch.multinomial(PROBS.to("tpu"), 3, out=out)
    assert r is out and out.shape == (2, 3) and not torch.isin(out.cpu()[0], torch.tensor([1, 4])).any()


@pytest.mark.parametrize("name,probs,n,replacement", [
    ("negative", [0.5, -0.1, 0.6], 1, False),
    ("negative_with_replacement", [0.5, -0.1, 0.6], 2, True),
    ("inf", [0.5, INF, 0.6], 2, False),
    ("inf_with_replacement", [0.5, INF, 0.6], 3, True),
    ("nan", [0.5, NAN, 0.6], 1, True),
    ("nan_with_replacement", [0.5, NAN, 0.6], 2, True),
    ("zero_row", [[1.0, 2.0, 0.0], [0.0, 0.0, 0.0]], 1, False),
    ("zero_row_with_replacement", [[0.0, 0.0, 0.0], [1.0, 2.0, 0.0]], 4, True),
    ("more_than_categories", [1.0, 1.0, 1.0], 4, False),
    ("no_samples", [1.0, 1.0, 1.0], 0, True),
    ("three_dims", [[[1.0, 1.0]]], 1, True),
    ("integers", [1, 2, 3], 1, True),
    ("no_categories", [[], []], 2, True),
])
def test_multinomial_argument_errors_as_on_cpu(name, probs, n, replacement):
    p = torch.tensor(probs)
    with pytest.raises(RuntimeError) as want:
        torch.multinomial(p, n, replacement)
    with pytest.raises(RuntimeError) as got:
        torch.multinomial(p.to("tpu"), n, replacement)
    assert str(want.value) in str(got.value)


def test_generate_samples_tokens_on_tpu():
    # generate(do_sample=True) samples each token with multinomial; a tiny
    # model whose logits favour nothing still gives tokens in its vocabulary,
    # and the same seed the same tokens.
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(vocab_size=64, n_positions=32, n_embd=16, n_layer=1, n_head=2)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config).eval().to("tpu")
    ids = torch.tensor([[1, 2, 3]], device="tpu")

    def sample():
        torch.manual_seed(21)
        return model.generate(ids, do_sample=True, top_k=8, max_new_tokens=5, pad_token_id=0).cpu()

    out = sample()
    assert out.shape == (1, 8) and ((out >= 0) & (out < 64)).all()
    assert torch.equal(out, sample())
