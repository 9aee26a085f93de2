"""Batch norm and group norm on tpu against the CPU: outputs, saved statistics,
running statistics, and gradients of input, weight and bias."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch_tpu  # noqa: F401

DEV = "tpu"
A = torch.ops.aten
FLOATS = [torch.float32, torch.bfloat16, torch.float16]


def tol(dtype):
    return {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.bfloat16: dict(rtol=2e-2, atol=2e-2),
            torch.float16: dict(rtol=5e-3, atol=5e-3)}[dtype]


def close(dev, cpu, dtype=torch.float32):
    torch.testing.assert_close(dev.cpu(), cpu, **tol(dtype))


def randn(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


def grads(fn, inputs, upstream):
    """Gradients of fn(*inputs) for the upstream grad, on copies of the inputs."""
    leaves = [x.detach().clone().requires_grad_() if x is not None else None for x in inputs]
    out = fn(*leaves)
    out.backward(upstream)
    return out.detach(), [x.grad if x is not None else None for x in leaves]


def to_dev(x):
    return x.to(DEV) if x is not None else None


SHAPES = [(4, 3), (4, 3, 5), (2, 3, 4, 5), (2, 3, 2, 3, 4)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("affine", [True, False])
def test_native_batch_norm_train(dtype, shape, affine):
    x = randn(*shape, dtype=dtype) * 2 + 0.5
    c = shape[1]
    w = randn(c, dtype=dtype, seed=1) if affine else None
    b = randn(c, dtype=dtype, seed=2) if affine else None
    ref = A.native_batch_norm(x, w, b, None, None, True, 0.1, 1e-5)
    got = A.native_batch_norm(x.to(DEV), to_dev(w), to_dev(b), None, None, True, 0.1, 1e-5)
    for r, g in zip(ref, got):
        assert g.dtype == r.dtype and g.shape == r.shape
        close(g, r, dtype)

    up = randn(*shape, dtype=dtype, seed=3)
    fn = lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True)  # noqa: E731
    out_c, g_c = grads(fn, [x, w, b], up)
    out_d, g_d = grads(fn, [x.to(DEV), to_dev(w), to_dev(b)], up.to(DEV))
    close(out_d, out_c, dtype)
    for gd, gc in zip(g_d, g_c):
        if gc is not None:
            close(gd, gc, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_native_batch_norm_eval_and_backward(dtype):
    x = randn(4, 3, 5, dtype=dtype)
    w, b = randn(3, seed=1).to(dtype), randn(3, seed=2).to(dtype)
    rm, rv = randn(3, seed=3).to(dtype), (randn(3, seed=4).abs() + 0.5).to(dtype)
    ref = A.native_batch_norm(x, w, b, rm, rv, False, 0.1, 1e-5)
    got = A.native_batch_norm(x.to(DEV), w.to(DEV), b.to(DEV), rm.to(DEV), rv.to(DEV), False, 0.1, 1e-5)
    for r, g in zip(ref, got):
        assert g.dtype == r.dtype and g.shape == r.shape
        close(g, r, dtype)
    up = randn(4, 3, 5, dtype=dtype, seed=5)
    fn = lambda x, w, b: F.batch_norm(x, rm.to(x.device), rv.to(x.device), w, b, training=False)  # noqa: E731
    out_c, g_c = grads(fn, [x, w, b], up)
    out_d, g_d = grads(fn, [x.to(DEV), w.to(DEV), b.to(DEV)], up.to(DEV))
    close(out_d, out_c, dtype)
    for gd, gc in zip(g_d, g_c):
        close(gd, gc, dtype)


def test_mixed_precision_stats():
    # bf16 activations through an f32 module: statistics stay f32.
    x = randn(4, 3, 5, dtype=torch.bfloat16)
    w, b = randn(3, seed=1), randn(3, seed=2)
    ref = A.native_batch_norm(x, w, b, None, None, True, 0.1, 1e-5)
    got = A.native_batch_norm(x.to(DEV), w.to(DEV), b.to(DEV), None, None, True, 0.1, 1e-5)
    for r, g in zip(ref, got):
        assert g.dtype == r.dtype
        close(g, r, torch.bfloat16)
    ref = A.native_group_norm(x, w, b, 4, 3, 5, 3, 1e-5)
    got = A.native_group_norm(x.to(DEV), w.to(DEV), b.to(DEV), 4, 3, 5, 3, 1e-5)
    for r, g in zip(ref, got):
        assert g.dtype == r.dtype
        close(g, r, torch.bfloat16)


def test_legit_variants():
    x = randn(4, 3, 6)
    w, b = randn(3, seed=1), randn(3, seed=2)
    rm, rv = randn(3, seed=3), randn(3, seed=4).abs() + 0.5
    pairs = [
        (A._native_batch_norm_legit.no_stats, (x, w, b, True, 0.1, 1e-5)),
        (A._native_batch_norm_legit_no_training, (x, w, b, rm, rv, 0.1, 1e-5)),
        (A._native_batch_norm_legit_functional, (x, w, b, rm, rv, True, 0.1, 1e-5)),
    ]
    for op, args in pairs:
        ref = op(*args)
        got = op(*[to_dev(a) if isinstance(a, torch.Tensor) else a for a in args])
        assert len(ref) == len(got)
        for r, g in zip(ref, got):
            assert g.shape == r.shape
            close(g, r)


@pytest.mark.parametrize("module", [nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d])
def test_modules_train_then_eval(module):
    """nn.BatchNorm*d end to end: outputs and parameter gradients over a few
    steps, then eval with the running statistics."""
    shape = {nn.BatchNorm1d: (6, 4, 5), nn.BatchNorm2d: (3, 4, 5, 5), nn.BatchNorm3d: (2, 4, 3, 3, 3)}[module]
    torch.manual_seed(0)
    m_c = module(4)
    m_d = module(4).to(DEV)
    m_d.load_state_dict(m_c.state_dict())
    for step in range(2):
        x = randn(*shape, seed=step) * 3 + 1
        out_c, out_d = m_c(x), m_d(x.to(DEV))
        close(out_d, out_c)
        out_c.square().sum().backward()
        out_d.square().sum().backward()
        close(m_d.weight.grad, m_c.weight.grad, torch.float32)
        close(m_d.bias.grad, m_c.bias.grad, torch.float32)
    m_c.eval()
    m_d.eval()
    x = randn(*shape, seed=9)
    close(m_d(x.to(DEV)), m_c(x))


def test_running_stats_updated_in_place():
    """native_batch_norm writes the running statistics back in place."""
    m_c = nn.BatchNorm1d(3)
    m_d = nn.BatchNorm1d(3).to(DEV)
    x = randn(8, 3) * 2 + 1
    m_c(x)
    m_d(x.to(DEV))
    close(m_d.running_mean, m_c.running_mean)
    close(m_d.running_var, m_c.running_var)
    assert int(m_d.num_batches_tracked) == 1


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,groups", [((2, 6, 5), 3), ((2, 4, 3, 3), 2), ((3, 4), 4), ((2, 6, 2, 2, 2), 1)])
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm(dtype, shape, groups, affine):
    x = randn(*shape, dtype=dtype) * 2 + 0.5
    c = shape[1]
    w = randn(c, dtype=dtype, seed=1) if affine else None
    b = randn(c, dtype=dtype, seed=2) if affine else None
    n, hw = shape[0], x[0, 0].numel()
    ref = A.native_group_norm(x, w, b, n, c, hw, groups, 1e-5)
    got = A.native_group_norm(x.to(DEV), to_dev(w), to_dev(b), n, c, hw, groups, 1e-5)
    for r, g in zip(ref, got):
        assert g.dtype == r.dtype and g.shape == r.shape
        close(g, r, dtype)
    up = randn(*shape, dtype=dtype, seed=3)
    fn = lambda x, w, b: F.group_norm(x, groups, w, b)  # noqa: E731
    out_c, g_c = grads(fn, [x, w, b], up)
    out_d, g_d = grads(fn, [x.to(DEV), to_dev(w), to_dev(b)], up.to(DEV))
    close(out_d, out_c, dtype)
    for gd, gc in zip(g_d, g_c):
        if gc is not None:
            close(gd, gc, dtype)


def test_group_norm_module_and_errors():
    m_c = nn.GroupNorm(2, 4)
    m_d = nn.GroupNorm(2, 4).to(DEV)
    m_d.load_state_dict(m_c.state_dict())
    x = randn(3, 4, 7)
    close(m_d(x.to(DEV)), m_c(x))
    with pytest.raises(RuntimeError, match="divisible by num_groups"):
        A.native_group_norm(x.to(DEV), None, None, 3, 4, 7, 3, 1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_batch_norm_with_update_and_backward(dtype):
    # The torch >= 2.3 entry points: _batch_norm_with_update writes the running
    # statistics; batch_norm_backward takes its saved mean and invstd.
    x = randn(4, 3, 5, dtype=dtype)
    w, b = randn(3, seed=1), randn(3, seed=2)
    rm, rv = randn(3, seed=3), randn(3, seed=4).abs() + 0.5
    ops = torch.ops.aten
    rm_d, rv_d = rm.to(DEV), rv.to(DEV)
    c = ops._batch_norm_with_update(x, w, b, rm, rv, 0.3, 1e-5)
    d = ops._batch_norm_with_update(x.to(DEV), w.to(DEV), b.to(DEV), rm_d, rv_d, 0.3, 1e-5)
    for u, v in zip(c, d):
        assert u.dtype == v.dtype and u.shape == v.shape
        torch.testing.assert_close(v.cpu(), u, **tol(dtype))
    close(rm_d, rm)
    close(rv_d, rv)
    g = randn(4, 3, 5, dtype=dtype, seed=5)
    cb = ops.batch_norm_backward(g, x, w, rm, rv, c[1], c[2], True, 1e-5, [True, True, True], c[3])
    db = ops.batch_norm_backward(g.to(DEV), x.to(DEV), w.to(DEV), rm_d, rv_d, d[1], d[2], True, 1e-5,
                                 [True, True, True], d[3])
    for u, v in zip(cb, db):
        torch.testing.assert_close(v.cpu(), u, **tol(dtype))
    c = ops._batch_norm_no_update(x, w, b, rm, rv, 0.3, 1e-5)
    d = ops._batch_norm_no_update(x.to(DEV), w.to(DEV), b.to(DEV), rm_d, rv_d, 0.3, 1e-5)
    for u, v in zip(c, d):
        assert u.dtype == v.dtype and u.shape == v.shape
        torch.testing.assert_close(v.cpu(), u, **tol(dtype))
