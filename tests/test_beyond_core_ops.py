"""More ops real models reach beyond Core ATen, against the CPU in every
eager mode: out= forms the generic routes did not reach (adaptive_avg_pool2d/3d,
conj_physical, norm with a dtype, range, nonzero_static,
_native_batch_norm_legit, __ilshift__/__irshift__), each with a wrongly
sized out (resized, as on the CPU) and the CPU's refusal of a wrong dtype
or device; normal with a tensor mean or std (by its statistics: the tpu
generator is not the CPU's), refusing a negative std as the CPU does;
embedding_renorm_ and multilabel_margin_loss refusing out-of-range indices
and targets as the CPU does (torch.histogram's non-finite ranges are in
tests/test_histogram.py)."""
import warnings

import pytest
import torch


def _same(got, want):
    assert got.device.type == "tpu"
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got.cpu(), want, equal_nan=True)


def _raises_like_cpu(fn):
    """fn(device) raises on tpu what it raises on the CPU (type and message)."""
    with pytest.raises(Exception) as want:
        fn("cpu")
    with pytest.raises(type(want.value)) as got:
        fn("tpu")
    assert str(got.value).splitlines()[0] == str(want.value).splitlines()[0]


X = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(3))
INTS = torch.tensor([1, 2, -8, 100, 0], dtype=torch.int32)

# (name, fn(device, out) -> the op's result, the out tensor for a device).
# Outs start wrongly sized: the op resizes them, as ATen's resize_output does.
OUT_FORMS = [
    ("adaptive_avg_pool2d", lambda d, o: torch._C._nn.adaptive_avg_pool2d(X.to(d), (3, 2), out=o),
     lambda d: torch.empty(5, device=d)),
    ("adaptive_avg_pool3d", lambda d, o: torch._C._nn.adaptive_avg_pool3d(X.to(d), (3, 2, 5), out=o),
     lambda d: torch.empty(5, device=d)),
    ("conj_physical_complex", lambda d, o: torch.conj_physical((X * (1 + 2j)).to(d), out=o),
     lambda d: torch.empty(5, dtype=torch.complex64, device=d)),
    ("conj_physical_real", lambda d, o: torch.conj_physical(X.to(d), out=o), lambda d: torch.empty(5, device=d)),
    ("norm_dtype", lambda d, o: torch.ops.aten.norm.dtype_out(X.to(d), 3, [1, 2], True, dtype=torch.float64, out=o),
     lambda d: torch.empty(0, dtype=torch.float64, device=d)),
    ("norm_dtype_p_none", lambda d, o: torch.ops.aten.norm.dtype_out(X.to(d), None, [3], False, dtype=torch.float64,
                                                                    out=o),
     lambda d: torch.empty(0, dtype=torch.float64, device=d)),
    ("range_long", lambda d, o: torch.range(0, 5, out=o), lambda d: torch.empty(2, dtype=torch.long, device=d)),
    ("range_float", lambda d, o: torch.range(-1.5, 3.2, 1.1, out=o), lambda d: torch.empty(2, device=d)),
    ("range_tenths", lambda d, o: torch.range(0, 1, 0.1, out=o),
     lambda d: torch.empty(0, dtype=torch.float64, device=d)),
    ("range_down_int32", lambda d, o: torch.range(5, 1, -2, out=o),
     lambda d: torch.empty(9, dtype=torch.int32, device=d)),
    ("nonzero_static", lambda d, o: torch.nonzero_static((X > 0.5).to(d), size=7, out=o),
     lambda d: torch.empty(3, dtype=torch.long, device=d)),
    ("nonzero_static_fill", lambda d, o: torch.nonzero_static((X > 2.5).to(d), size=9, fill_value=5, out=o),
     lambda d: torch.empty(3, dtype=torch.long, device=d)),
]


@pytest.mark.parametrize("name,fn,make_out", OUT_FORMS, ids=[c[0] for c in OUT_FORMS])
def test_out_form_matches_cpu(name, fn, make_out):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "An output with one or more elements was resized"
        want_out = make_out("cpu")
        want = fn("cpu", want_out)
        out = make_out("tpu")
        got = fn("tpu", out)
    assert got is out
    _same(out, want_out)


# Outs the CPU refuses: its message, and an out on another device.
BAD_OUTS = [
    ("adaptive_avg_pool2d_dtype", lambda d: torch._C._nn.adaptive_avg_pool2d(
        X.to(d), (3, 2), out=torch.empty(0, dtype=torch.float64, device=d))),
    ("adaptive_avg_pool3d_dtype", lambda d: torch._C._nn.adaptive_avg_pool3d(
        X.to(d), (3, 2, 2), out=torch.empty(0, dtype=torch.long, device=d))),
    ("conj_physical_dtype", lambda d: torch.conj_physical(X.to(d), out=torch.empty(0, dtype=torch.float64, device=d))),
    ("conj_physical_complex_to_real", lambda d: torch.conj_physical(
        X.to(d).to(torch.complex64), out=torch.empty(0, device=d))),
    ("norm_dtype", lambda d: torch.ops.aten.norm.dtype_out(X.to(d), 2, [1], False, dtype=torch.float64,
                                                           out=torch.empty(0, device=d))),
    ("range_step_sign", lambda d: torch.range(0, 5, -1, out=torch.empty(0, device=d))),
    ("nonzero_static_float", lambda d: torch.nonzero_static(X.to(d), size=4, out=torch.empty(0, device=d))),
    ("nonzero_static_int32", lambda d: torch.nonzero_static(X.to(d), size=4,
                                                            out=torch.empty(0, dtype=torch.int32, device=d))),
]


@pytest.mark.parametrize("name,fn", BAD_OUTS, ids=[c[0] for c in BAD_OUTS])
def test_out_form_refuses_what_the_cpu_refuses(name, fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _raises_like_cpu(fn)


def test_out_on_another_device_is_refused():
    with pytest.raises(RuntimeError, match="Expected out tensor to have device tpu:0, but got cpu instead"):
        torch._C._nn.adaptive_avg_pool2d(X.to("tpu"), (3, 2), out=torch.empty(0))
    with pytest.raises(RuntimeError, match="Expected out tensor to have device tpu:0, but got cpu instead"):
        torch.conj_physical(X.to("tpu"), out=torch.empty(0))


def test_conj_physical_in_place_and_gradient_match_cpu():
    z = X * (1 - 3j)
    _same(z.to("tpu").conj_physical_(), z.clone().conj_physical_())
    # The functional op keeps its CompositeImplicit decomposition and its gradient.
    zt = z.to("tpu").requires_grad_()
    (g,) = torch.autograd.grad(torch.conj_physical(zt).real.sum() + torch.conj_physical(zt).imag.sum(), zt)
    zc = z.clone().requires_grad_()
    (want,) = torch.autograd.grad(torch.conj_physical(zc).real.sum() + torch.conj_physical(zc).imag.sum(), zc)
    _same(g, want)


def test_norm_with_dtype_and_its_gradient_match_cpu():
    def run(d):
        x = X.to(d).requires_grad_()
        y = torch.ops.aten.norm.ScalarOpt_dim_dtype(x, 2, [1, 3], False, dtype=torch.float64)
        (g,) = torch.autograd.grad(y.sum(), x)
        return y, g
    (y, g), (wy, wg) = run("tpu"), run("cpu")
    _same(y.detach(), wy.detach())
    _same(g, wg)


@pytest.mark.parametrize("args", [(0, 5), (0, 5, 2), (-1.5, 3.2, 1.1), (5, 1, -2), (0.5, 2.7, 1.5)])
@pytest.mark.parametrize("dtype", [None, torch.float64, torch.int64, torch.int32])
def test_range_factory_matches_cpu(args, dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.range is deprecated
        want = torch.range(*args, dtype=dtype)
        _same(torch.range(*args, dtype=dtype, device="tpu"), want)


def _batch_norm_legit_out(d, training, out_dtype=torch.float32, mean_dtype=torch.float32):
    w, b = torch.linspace(0.5, 1.5, 3), torch.tensor([0.1, -0.2, 0.3])
    running = [torch.full((3,), 0.5, device=d), torch.full((3,), 2.0, device=d)]
    outs = (torch.empty(0, dtype=out_dtype, device=d), torch.full((5,), 7.0, dtype=mean_dtype, device=d),
            torch.empty(0, device=d))
    r = torch.ops.aten._native_batch_norm_legit.out(X.to(d), w.to(d), b.to(d), *running, training, 0.1, 1e-5,
                                                     out=outs[0], save_mean=outs[1], save_invstd=outs[2])
    assert all(x is y for x, y in zip(r, outs))
    return (*outs, *running)


@pytest.mark.parametrize("training", [True, False])
def test_native_batch_norm_legit_out_matches_cpu(training):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for got, want in zip(_batch_norm_legit_out("tpu", training), _batch_norm_legit_out("cpu", training)):
            _same(got, want)


@pytest.mark.parametrize("which", ["out", "save_mean"])
def test_native_batch_norm_legit_out_refuses_a_wrong_dtype(which):
    kw = {"out_dtype" if which == "out" else "mean_dtype": torch.float64}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _raises_like_cpu(lambda d: _batch_norm_legit_out(d, True, **kw))


SHIFTS = [
    ("ilshift_scalar", lambda t, d: t.__ilshift__(3)),
    ("irshift_scalar", lambda t, d: t.__irshift__(1)),
    ("ilshift_tensor", lambda t, d: t.__ilshift__(torch.tensor([1, 2, 3, 4, 5], dtype=torch.int32, device=d))),
    ("irshift_long_tensor", lambda t, d: t.__irshift__(torch.tensor([1, 2, 3, 0, 1], device=d))),
    ("ilshift_broadcast", lambda t, d: t.__ilshift__(torch.tensor(2, dtype=torch.int32, device=d))),
    ("operator", lambda t, d: t.__ilshift__(2).__irshift__(1)),
]


@pytest.mark.parametrize("name,fn", SHIFTS, ids=[c[0] for c in SHIFTS])
def test_in_place_shift_matches_cpu(name, fn):
    want_t = INTS.clone()
    want = fn(want_t, "cpu")
    t = INTS.to("tpu")
    got = fn(t, "tpu")
    assert got is t
    _same(t, want_t)


@pytest.mark.parametrize("fn", [
    lambda d: torch.ones(3, device=d).__ilshift__(2),
    lambda d: INTS.to(d).__irshift__(torch.ones(2, 5, dtype=torch.int32, device=d)),
], ids=["float_self", "broadcast_into_self"])
def test_in_place_shift_refuses_what_the_cpu_refuses(fn):
    _raises_like_cpu(lambda d: fn(d))


# ---- normal(mean, std) with tensors

MEAN = torch.tensor([-3.0, 0.0, 2.0, 10.0])[:, None]
STD = torch.tensor([0.5, 1.0, 2.0])
NORMAL = [
    ("tensor_tensor", lambda d, n: torch.normal(MEAN.to(d).expand(4, n), STD.to(d)[:, None, None].expand(3, 4, n)),
     lambda n: (MEAN.expand(3, 4, n), STD[:, None, None].expand(3, 4, n))),
    ("float_tensor", lambda d, n: torch.normal(2.0, STD.to(d)[:, None].expand(3, n)),
     lambda n: (torch.full((3, n), 2.0), STD[:, None].expand(3, n))),
    ("tensor_float", lambda d, n: torch.normal(MEAN.to(d).expand(4, n), 0.25),
     lambda n: (MEAN.expand(4, n), torch.full((4, n), 0.25))),
]


@pytest.mark.parametrize("name,draw,params", NORMAL, ids=[c[0] for c in NORMAL])
def test_normal_with_tensors_has_the_asked_mean_and_std(name, draw, params):
    n = 4000
    x = draw("tpu", n)
    mean, std = params(n)
    assert x.device.type == "tpu" and x.shape == mean.shape and x.dtype == torch.float32
    x = x.cpu()
    # 4000 draws: the sample mean is within 5 standard errors, the std within 10%.
    torch.testing.assert_close(x.mean(-1), mean[..., 0], atol=5 * float(std.max()) / n ** 0.5, rtol=0)
    torch.testing.assert_close(x.std(-1), std[..., 0], rtol=0.1, atol=0)


def test_normal_with_tensors_follows_the_generator_and_broadcasts():
    g = torch.Generator(device="tpu")
    g.manual_seed(5)
    a = torch.normal(MEAN.to("tpu"), STD.to("tpu"), generator=g)
    g.manual_seed(5)
    b = torch.normal(MEAN.to("tpu"), STD.to("tpu"), generator=g)
    assert a.shape == (4, 3) and torch.equal(a.cpu(), b.cpu())
    assert torch.normal(torch.zeros(0, device="tpu"), torch.ones(0, device="tpu")).shape == (0,)
    _raises_like_cpu(lambda d: torch.normal(torch.zeros(2, 3, device=d), torch.ones(6, device=d)))
    _raises_like_cpu(lambda d: torch.normal(torch.zeros(3, dtype=torch.long, device=d), torch.ones(3, device=d)))


def test_normal_with_tensors_out_forms():
    for fn in (lambda o: torch.normal(MEAN.to("tpu"), STD.to("tpu"), out=o),
               lambda o: torch.normal(1.0, STD.to("tpu"), out=o)):
        out = torch.empty(0, dtype=torch.float64, device="tpu")
        assert fn(out) is out
        assert out.dtype == torch.float64 and out.shape == torch.broadcast_shapes(out.shape, STD.shape)
    out = torch.empty(4, 1, device="tpu")
    torch.normal(MEAN.to("tpu"), 0.5, out=out)
    assert out.shape == (4, 1) and torch.isfinite(out.cpu()).all()


@pytest.mark.parametrize("fn", [
    lambda d: torch.normal(torch.zeros(3, device=d), torch.tensor([1.0, -0.5, 2.0], device=d)),
    lambda d: torch.normal(0.0, torch.tensor([1.0, -0.5], device=d)),
    lambda d: torch.normal(torch.zeros(3, device=d), torch.tensor([1.0, float("nan"), 2.0], device=d)),
    lambda d: torch.normal(torch.zeros(3, device=d), -1.0),
    lambda d: torch.normal(torch.zeros(2, device=d), -torch.ones(2, device=d), out=torch.empty(2, device=d)),
], ids=["tensor_tensor", "float_tensor", "nan_std", "tensor_float", "out"])
def test_normal_refuses_a_negative_std_as_the_cpu_does(fn):
    _raises_like_cpu(fn)


def test_normal_gradients_match_cpu():
    # ATen's formula gives zeros (sampling is not reparameterized).
    def run(d):
        mean, std = MEAN.to(d).requires_grad_(), STD.to(d).requires_grad_()
        return torch.autograd.grad(torch.normal(mean, std).sum(), (mean, std))
    for got, want in zip(run("tpu"), run("cpu")):
        _same(got, want)


# ---- value checks: indices and targets the CPU refuses

TABLE = torch.randn(5, 3, generator=torch.Generator().manual_seed(4)) * 3


@pytest.mark.parametrize("idx", [[1, 7, 9], [-6, 7, 1], [5], [[0, 5]]], ids=["above", "below", "size", "2d"])
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_embedding_renorm_refuses_out_of_range_indices(idx, dtype):
    _raises_like_cpu(lambda d: torch.embedding_renorm_(TABLE.clone().to(d), torch.tensor(idx, dtype=dtype, device=d),
                                                       1.0, 2.0))
    _raises_like_cpu(lambda d: torch.nn.functional.embedding(torch.tensor(idx, device=d), TABLE.clone().to(d),
                                                             max_norm=1.0))


def test_embedding_renorm_wraps_negative_indices_as_the_cpu_does():
    idx = torch.tensor([-1, 2, -5, 2])
    want = torch.embedding_renorm_(TABLE.clone(), idx, 1.0, 2.0)
    _same(torch.embedding_renorm_(TABLE.clone().to("tpu"), idx.to("tpu"), 1.0, 2.0), want)


@pytest.mark.parametrize("x,target", [
    (torch.randn(2, 4), [[5, 0, -1, 0], [1, 2, 3, 0]]),
    (torch.randn(2, 4), [[-2, 0, -1, 0], [1, 2, 3, 0]]),
    (torch.randn(2, 4), [[1, -1, 7, 0], [1, 2, 3, 0]]),  # after the end mark too
    (torch.randn(4), [4, 0, -1, 0]),
    (torch.tensor(0.3), 1),
], ids=["above", "below_end_mark", "after_end_mark", "one_sample", "scalar"])
def test_multilabel_margin_loss_refuses_out_of_range_targets(x, target):
    _raises_like_cpu(lambda d: torch.nn.functional.multilabel_margin_loss(x.to(d), torch.tensor(target, device=d)))
