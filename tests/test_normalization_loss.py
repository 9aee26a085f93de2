"""Softmax family, layer norm and losses on tpu against the CPU: values, dtypes, shapes,
gradients and errors."""
import math

import pytest
import torch
import torch.nn.functional as F
import torch_tpu  # noqa: F401

DEV = "tpu"
FLOATS = [torch.float32, torch.bfloat16, torch.float16]


def make(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype)


def to_dev(x):
    return x.to(DEV) if isinstance(x, torch.Tensor) else x


HALF = (torch.float16, torch.bfloat16)
# Gradients in half precision: the forward's outputs saved for the backward
# (softmax, log_softmax, normalized x) are rounded to half, and the backward
# formulas cancel (g - sum(g * y)), so a half-ulp there becomes an absolute
# error of about one ulp at the gradient's scale (|g| ~ 1): two ulps of 1.
HALF_GRAD_TOL = {torch.float16: dict(rtol=1e-3, atol=2e-3), torch.bfloat16: dict(rtol=1.6e-2, atol=1.6e-2)}


def check(fn, *inputs, grad=(), native=False, **kw):
    """fn on CPU inputs and on their tpu copies gives the same results; the
    inputs at positions `grad` also get the same gradients for a random
    upstream gradient.

    For half-precision inputs the reference is the CPU in float64, rounded to
    the input's dtype (the design's numerics policy): tpu computes these ops
    in f32 and rounds once, while the CPU kernels round some intermediates to
    half, so the two can differ by an ulp or two either way. native=True
    compares with the CPU in the inputs' own dtypes instead."""
    half = None if native else next(
        (x.dtype for x in inputs if isinstance(x, torch.Tensor) and x.dtype in HALF), None)

    def prepare(x, i, dev):
        if not isinstance(x, torch.Tensor):
            return x
        x = x.detach().clone()
        if dev:
            x = to_dev(x)
        elif half is not None and x.dtype in HALF:
            x = x.double()
        return x.requires_grad_(i in grad)

    cpu = [prepare(x, i, False) for i, x in enumerate(inputs)]
    dev = [prepare(x, i, True) for i, x in enumerate(inputs)]
    out_c, out_d = fn(*cpu), fn(*dev)
    outs_c = out_c if isinstance(out_c, (tuple, list)) else (out_c,)
    outs_d = out_d if isinstance(out_d, (tuple, list)) else (out_d,)
    for c, d in zip(outs_c, outs_d):
        assert d.device.type == DEV
        if half is not None and c.dtype == torch.float64:
            c = c.to(d.dtype)
        torch.testing.assert_close(d.cpu(), c, equal_nan=True, **kw)
    if grad:
        g = make(outs_d[0].shape, outs_d[0].dtype, seed=11)
        outs_c[0].backward(g.to(outs_c[0].dtype))
        outs_d[0].backward(to_dev(g))
        for i in grad:
            c, d = cpu[i].grad, dev[i].grad.cpu()
            tol = dict(kw)
            if half is not None and d.dtype in HALF:
                c = c.to(d.dtype)
                tol = {**HALF_GRAD_TOL[d.dtype], **kw}
            torch.testing.assert_close(d, c, equal_nan=True, **tol)


def raises_like(fn, *inputs):
    with pytest.raises(Exception) as cpu_err:
        fn(*inputs)
    with pytest.raises(type(cpu_err.value)) as dev_err:
        fn(*[to_dev(x) for x in inputs])
    assert str(cpu_err.value).splitlines()[0] in str(dev_err.value)


# ---- softmax / log_softmax


@pytest.mark.parametrize("fn", [torch.softmax, torch.log_softmax])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,dim", [((), 0), ((5,), 0), ((3, 4), 1), ((3, 4), 0), ((2, 3, 4), -2),
                                       ((2, 3, 4), -1), ((0, 3), 1), ((3, 0), 1)])
def test_softmax(fn, dtype, shape, dim):
    check(lambda t: fn(t, dim), make(shape, dtype), grad=(0,))


@pytest.mark.parametrize("fn", [torch.softmax, torch.log_softmax])
def test_softmax_infinities(fn):
    x = torch.tensor([[-math.inf, -math.inf, -math.inf], [-math.inf, 0.0, 1.0], [1000.0, 1000.0, -1000.0]])
    check(lambda t: fn(t, 1), x)


@pytest.mark.parametrize("fn", [torch.softmax, torch.log_softmax])
def test_softmax_dtype_arg(fn):
    check(lambda t: fn(t, 1, dtype=torch.float32), make((3, 4), torch.bfloat16), grad=(0,))


def test_softmax_int_error():
    # the CPU names its inner kernel, which differs by dim; the type and dtype match
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        torch.ops.aten._softmax(torch.arange(3, device=DEV), 0, False)


# ---- layer norm


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,normalized", [((2, 4), (4,)), ((2, 3, 4), (4,)), ((2, 3, 4), (3, 4)),
                                              ((4,), (4,)), ((0, 4), (4,)), ((3, 1, 5), (1, 5))])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(dtype, shape, normalized, affine):
    x = make(shape, dtype)
    w = make(normalized, dtype, 1) if affine else None
    b = make(normalized, dtype, 2) if affine else None
    grad = (0, 1, 2) if affine else (0,)
    check(lambda x, w, b: F.layer_norm(x, normalized, w, b, eps=1e-5), x, w, b, grad=grad)


@pytest.mark.parametrize("dtype", FLOATS)
def test_native_layer_norm_outputs(dtype):
    # mean and rstd keep the input's rank with the normalized dims set to 1
    x, w, b = make((2, 3, 4), dtype), make((3, 4), dtype, 1), make((3, 4), dtype, 2)
    check(lambda x, w, b: torch.ops.aten.native_layer_norm(x, [3, 4], w, b, 1e-5), x, w, b)
    check(lambda x: torch.ops.aten.native_layer_norm(x, [4], None, None, 1e-3), x)


def test_layer_norm_mixed_dtypes():
    # bf16 activations with f32 parameters: mean/rstd come back in f32
    x, w, b = make((2, 3), torch.bfloat16), make((3,), torch.float32, 1), make((3,), torch.float32, 2)
    check(lambda x, w, b: torch.ops.aten.native_layer_norm(x, [3], w, b, 1e-5), x, w, b, native=True)


def test_layer_norm_module():
    torch.manual_seed(0)
    cpu = torch.nn.LayerNorm(6)
    with torch.no_grad():
        cpu.weight.copy_(make((6,), seed=3))
        cpu.bias.copy_(make((6,), seed=4))
    dev = torch.nn.LayerNorm(6)
    dev.load_state_dict(cpu.state_dict())
    dev.to(DEV)
    x, g = make((4, 6)), make((4, 6), seed=5)
    cpu(x).backward(g)
    dev(to_dev(x)).backward(to_dev(g))
    torch.testing.assert_close(dev.weight.grad.cpu(), cpu.weight.grad)
    torch.testing.assert_close(dev.bias.grad.cpu(), cpu.bias.grad)


def test_layer_norm_errors():
    raises_like(lambda t: F.layer_norm(t, (4,)), make((2, 3)))
    raises_like(lambda t, w: F.layer_norm(t, (3,), w), make((2, 3)), make((4,)))
    raises_like(lambda t: torch.ops.aten.native_layer_norm(t, [3], None, None, 1e-5),
                torch.ones(2, 3, dtype=torch.int32))


# ---- nll_loss / cross_entropy


def targets(shape, classes, seed=0):
    return torch.randint(0, classes, shape, generator=torch.Generator().manual_seed(seed))


REDUCTIONS = ["mean", "sum", "none"]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore_index", [-100, 1])
def test_cross_entropy_indices(dtype, reduction, weighted, ignore_index):
    x, t = make((6, 5), dtype), targets((6,), 5)
    w = make((5,), dtype, 3).abs() if weighted else None
    check(lambda x, t, w: F.cross_entropy(x, t, w, reduction=reduction, ignore_index=ignore_index),
          x, t, w, grad=(0,))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_unbatched_and_spatial(reduction):
    check(lambda x, t: F.cross_entropy(x, t, reduction=reduction), make((5,)), torch.tensor(3), grad=(0,))
    x, t = make((2, 4, 3, 3)), targets((2, 3, 3), 4)
    w = make((4,), seed=3).abs()
    check(lambda x, t: F.cross_entropy(x, t, reduction=reduction, ignore_index=2), x, t, grad=(0,))
    check(lambda x, t, w: F.cross_entropy(x, t, w, reduction=reduction), x, t, w, grad=(0,))
    # more than two spatial dims goes through nll_loss (flattened) rather than nll_loss2d
    x, t = make((2, 3, 2, 2, 2)), targets((2, 2, 2, 2), 3)
    check(lambda x, t: F.cross_entropy(x, t, reduction=reduction), x, t, grad=(0,))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_cross_entropy_probabilities(reduction, smoothing):
    x, p = make((4, 5)), torch.softmax(make((4, 5), seed=1), 1)
    check(lambda x, p: F.cross_entropy(x, p, reduction=reduction, label_smoothing=smoothing), x, p, grad=(0,))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_cross_entropy_label_smoothing_indices(reduction, require_ops):
    require_ops("aten::masked_fill.Scalar")  # cross_entropy's smoothing term masks ignored targets
    x, t = make((6, 5)), targets((6,), 5)
    check(lambda x, t: F.cross_entropy(x, t, reduction=reduction, label_smoothing=0.1, ignore_index=0),
          x, t, grad=(0,))


def test_nll_all_ignored_mean_is_nan():
    check(lambda x, t: F.nll_loss(x, t, ignore_index=1), make((3, 4)), torch.tensor([1, 1, 1]))


def test_nll_loss_direct_outputs():
    x, t, w = make((4, 3)), targets((4,), 3), make((3,), seed=2).abs()
    for r in range(3):
        check(lambda x, t, w: torch.ops.aten.nll_loss_forward(x, t, w, r, -100), x, t, w)


def test_nll_loss_errors():
    raises_like(lambda x, t: F.nll_loss(x, t), make((3, 5)), torch.tensor([1, 2]))
    raises_like(lambda x, t, w: F.nll_loss(x, t, w), make((3, 5)), torch.tensor([1, 2, 3]), make((4,)))
    raises_like(lambda x, t: F.nll_loss(x, t), make((3, 5)), torch.tensor([1, 2, 3], dtype=torch.int32))


# ---- pointwise losses


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("loss", [F.mse_loss, F.smooth_l1_loss, F.huber_loss,
                                  lambda x, y, reduction: F.smooth_l1_loss(x, y, reduction=reduction, beta=0.5),
                                  lambda x, y, reduction: F.smooth_l1_loss(x, y, reduction=reduction, beta=0.0),
                                  lambda x, y, reduction: F.huber_loss(x, y, reduction=reduction, delta=0.3)])
@pytest.mark.parametrize("shape", [(), (7,), (3, 4), (0, 2)])
def test_pointwise_losses(dtype, reduction, loss, shape):
    check(lambda x, y: loss(x, y, reduction=reduction), make(shape, dtype), make(shape, dtype, 1), grad=(0, 1))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
def test_binary_cross_entropy(dtype, reduction, weighted):
    g = torch.Generator().manual_seed(0)
    x = torch.rand((4, 3), generator=g).to(dtype)
    y = torch.rand((4, 3), generator=g).to(dtype)
    w = torch.rand((3,), generator=g).to(dtype) if weighted else None
    check(lambda x, y, w: F.binary_cross_entropy(x, y, w, reduction=reduction), x, y, w, grad=(0,))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("pos_weighted", [False, True])
def test_binary_cross_entropy_with_logits(dtype, reduction, weighted, pos_weighted):
    g = torch.Generator().manual_seed(0)
    x = (torch.randn((4, 3), generator=g) * 4).to(dtype)
    y = torch.rand((4, 3), generator=g).to(dtype)
    w = torch.rand((3,), generator=g).to(dtype) if weighted else None
    pw = (torch.rand((3,), generator=g) * 3).to(dtype) if pos_weighted else None
    check(lambda x, y, w, pw: F.binary_cross_entropy_with_logits(x, y, w, reduction=reduction, pos_weight=pw),
          x, y, w, pw, grad=(0,))


def test_binary_cross_entropy_with_logits_extremes():
    x = torch.tensor([-200.0, -30.0, 0.0, 30.0, 200.0])
    y = torch.tensor([1.0, 0.0, 0.5, 1.0, 0.0])
    check(lambda x, y: F.binary_cross_entropy_with_logits(x, y, reduction="none"), x, y)


def test_binary_cross_entropy_saturated():
    # log(0) is clamped at -100 in the loss and the gradient's denominator at 1e-12
    x = torch.tensor([0.0, 1.0, 0.5, 1e-30])
    y = torch.tensor([1.0, 0.0, 0.5, 0.0])
    check(lambda x, y: F.binary_cross_entropy(x, y, reduction="none"), x, y)
    check(lambda x, y: F.binary_cross_entropy(x, y), x, y, grad=(0,))


def test_loss_errors():
    raises_like(lambda x, y: torch.ops.aten.mse_loss(x, y), torch.ones(3, dtype=torch.int32),
                torch.ones(3, dtype=torch.int32))
