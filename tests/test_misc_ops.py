"""masked_fill, masked_scatter, scalar_tensor, the *_scatter view inverses and
pairwise distances on tpu against the CPU, with gradients."""
import re

import pytest
import torch
import torch_tpu  # noqa: F401

DEV = "tpu"
A = torch.ops.aten
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.int8, torch.uint8,
          torch.bool]
FLOATS = [torch.float32, torch.bfloat16, torch.float16]


def make(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(0 if dtype == torch.uint8 else -20, 20, shape, generator=g).to(dtype)


def mask_of(shape, seed=1):
    return torch.rand(shape, generator=torch.Generator().manual_seed(seed)) > 0.5


def same(dev, cpu, **kw):
    torch.testing.assert_close(dev.cpu(), cpu, **kw)


def grad_check(fn, inputs, rtol=1e-4, atol=1e-4):
    """fn's output and the gradients of its float inputs agree with the CPU."""
    cpu = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
    dev = [x.detach().to(DEV).requires_grad_(x.is_floating_point()) for x in inputs]
    out_c, out_d = fn(*cpu), fn(*dev)
    same(out_d.detach(), out_c.detach(), rtol=rtol, atol=atol)
    up = torch.randn(out_c.shape, generator=torch.Generator().manual_seed(9)).to(out_c.dtype)
    out_c.backward(up)
    out_d.backward(up.to(DEV))
    for c, d in zip(cpu, dev):
        if c.requires_grad:
            same(d.grad, c.grad, rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_fill(dtype):
    x = make((3, 4), dtype)
    m = mask_of((3, 4))
    value = True if dtype == torch.bool else 5
    same(x.to(DEV).masked_fill(m.to(DEV), value), x.masked_fill(m, value))
    # A broadcast mask, a 0-dim tensor value (on the device and on the CPU).
    mb = mask_of((4,))
    v = torch.tensor(value, dtype=dtype)
    same(x.to(DEV).masked_fill(mb.to(DEV), v.to(DEV)), x.masked_fill(mb, v))
    same(x.to(DEV).masked_fill(mb.to(DEV), v), x.masked_fill(mb, v))
    y = x.to(DEV)
    y.masked_fill_(m.to(DEV), value)
    same(y, x.clone().masked_fill_(m, value))
    if dtype.is_floating_point:
        same(x.to(DEV).masked_fill(m.to(DEV), float("-inf")), x.masked_fill(m, float("-inf")))


def test_masked_fill_errors_and_grad():
    x = torch.ones(3, device=DEV)
    with pytest.raises(RuntimeError, match="only supports boolean masks"):
        x.masked_fill(torch.tensor([1, 0, 1], device=DEV), 2.0)
    with pytest.raises(RuntimeError, match="only supports a 0-dimensional value tensor"):
        x.masked_fill(torch.tensor([True, False, True], device=DEV), torch.ones(3, device=DEV))
    same(torch.ones(3, dtype=torch.int64, device=DEV).masked_fill(torch.tensor([True, False, True], device=DEV), 2.7),
         torch.ones(3, dtype=torch.int64).masked_fill(torch.tensor([True, False, True]), 2.7))
    m = mask_of((2, 5))
    grad_check(lambda x: x.masked_fill(m.to(x.device), 0.5) * 2, [torch.randn(2, 5)])
    grad_check(lambda x, v: x.masked_fill(m.to(x.device), v), [torch.randn(2, 5), torch.tensor(1.5)])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mshape", [(3, 4), (4,), (1, 4)])
def test_masked_scatter(dtype, mshape):
    x = make((3, 4), dtype)
    m = mask_of(mshape, seed=2)
    src = make((5, 4), dtype, seed=3)
    same(x.to(DEV).masked_scatter(m.to(DEV), src.to(DEV)), x.masked_scatter(m, src))
    y = x.to(DEV)
    y.masked_scatter_(m.expand(3, 4).to(DEV), src.to(DEV))
    same(y, x.clone().masked_scatter_(m.expand(3, 4), src))


def test_masked_scatter_grad_and_edges():
    m = mask_of((4, 3), seed=4)
    grad_check(lambda x, s: x.masked_scatter(m.to(x.device), s), [torch.randn(4, 3), torch.randn(15)])
    none = torch.zeros(2, 3, dtype=torch.bool)
    x = torch.randn(2, 3)
    same(x.to(DEV).masked_scatter(none.to(DEV), torch.empty(0, device=DEV)), x.masked_scatter(none, torch.empty(0)))


@pytest.mark.parametrize("dtype", [None, torch.float64, torch.int32, torch.bool, torch.bfloat16])
def test_scalar_tensor(dtype):
    for s in [3, 2.5, True, -7]:
        got = torch.scalar_tensor(s, dtype=dtype, device=DEV)
        ref = torch.scalar_tensor(s, dtype=dtype)
        assert got.dtype == ref.dtype and got.shape == ref.shape
        same(got, ref)


@pytest.mark.parametrize("dtype", DTYPES)
def test_select_scatter(dtype):
    x = make((3, 4, 5), dtype)
    for dim, index in [(0, 1), (1, -1), (2, 4), (-1, 0)]:
        src = make(x.select(dim, index).shape, dtype, seed=5)
        same(torch.select_scatter(x.to(DEV), src.to(DEV), dim, index), torch.select_scatter(x, src, dim, index))
    with pytest.raises(IndexError, match="out of range"):
        torch.select_scatter(x.to(DEV), src.to(DEV), 0, 3)
    grad_check(lambda a, b: torch.select_scatter(a, b, 1, 2), [torch.randn(3, 4), torch.randn(3)])


@pytest.mark.parametrize("dtype", DTYPES)
def test_slice_scatter(dtype):
    x = make((6, 7), dtype)
    for dim, start, end, step in [(0, None, None, 1), (0, 1, 5, 2), (1, -4, None, 3), (1, 2, 100, 1), (0, 3, 3, 1),
                                  (1, 0, 7, 7)]:
        view = x.narrow(0, 0, x.shape[0]) if False else x
        sl = [slice(None)] * 2
        sl[dim] = slice(start, end, step)
        src = make(view[tuple(sl)].shape, dtype, seed=6)
        same(torch.slice_scatter(x.to(DEV), src.to(DEV), dim, start, end, step),
             torch.slice_scatter(x, src, dim, start, end, step))
    grad_check(lambda a, b: torch.slice_scatter(a, b, 1, 1, 6, 2), [torch.randn(3, 7), torch.randn(3, 3)])


@pytest.mark.parametrize("dtype", DTYPES)
def test_diagonal_scatter(dtype):
    x = make((4, 5, 3), dtype)
    for offset, d1, d2 in [(0, 0, 1), (1, 0, 1), (-2, 0, 1), (2, 1, 0), (0, 2, 0), (-1, -1, 1)]:
        src = make(torch.diagonal(x, offset, d1, d2).shape, dtype, seed=7)
        same(torch.diagonal_scatter(x.to(DEV), src.to(DEV), offset, d1, d2),
             torch.diagonal_scatter(x, src, offset, d1, d2))
    grad_check(lambda a, b: torch.diagonal_scatter(a, b, 1), [torch.randn(4, 4), torch.randn(3)])


@pytest.mark.parametrize("dtype", DTYPES)
def test_as_strided_scatter(dtype):
    x = make((4, 6), dtype)
    for size, stride, offset in [((2, 3), (6, 1), 0), ((3, 2), (1, 6), 2), ((2, 2), (12, 2), 1), ((5,), (4,), 3)]:
        src = make(size, dtype, seed=8)
        same(torch.as_strided_scatter(x.to(DEV), src.to(DEV), size, stride, offset),
             torch.as_strided_scatter(x, src, size, stride, offset))
    grad_check(lambda a, b: torch.as_strided_scatter(a, b, (2, 2), (3, 1), 1), [torch.randn(3, 3), torch.randn(2, 2)])


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, 0.5, float("inf")])
def test_cdist(dtype, p):
    x1 = make((2, 5, 4), dtype)
    x2 = make((2, 6, 4), dtype, seed=1)
    kw = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    ref = torch.cdist(x1.double(), x2.double(), p).to(dtype)
    same(torch.cdist(x1.to(DEV), x2.to(DEV), p), ref, **kw)
    if dtype == torch.float32 and p != 0.0:
        grad_check(lambda a, b: torch.cdist(a, b, p), [x1, x2], rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.0, float("inf")])
def test_pdist(p):
    x = make((6, 4), torch.float32)
    same(torch.pdist(x.to(DEV), p), torch.pdist(x, p), rtol=1e-4, atol=1e-4)
    if p != 0.0:
        grad_check(lambda a: torch.pdist(a, p), [x], rtol=1e-3, atol=1e-3)
    same(torch.pdist(torch.randn(1, 3, device=DEV)), torch.pdist(torch.randn(1, 3)))



FFTS = [
    (torch.fft.fft, dict(dim=-1)), (torch.fft.ifft, dict(dim=0)), (torch.fft.fft2, {}), (torch.fft.ifftn, {}),
    (torch.fft.rfft, dict(dim=-1)), (torch.fft.rfft2, {}), (torch.fft.irfft, dict(dim=-1)),
    (torch.fft.irfft2, {}), (torch.fft.hfft, {}), (torch.fft.fftn, dict(dim=(0, 2))),
]
REAL_ONLY = {torch.fft.rfft, torch.fft.rfft2}


@pytest.mark.parametrize("case", range(len(FFTS)))
@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
@pytest.mark.parametrize("cplx", [False, True])
def test_fft(case, norm, cplx):
    fn, kw = FFTS[case]
    if cplx and fn in REAL_ONLY:
        pytest.skip("real-input transform")
    x = torch.randn(4, 6, 5, generator=torch.Generator().manual_seed(case))
    if cplx:
        x = torch.complex(x, torch.randn(4, 6, 5, generator=torch.Generator().manual_seed(50 + case)))
    # ifft of a real input comes back as a conjugate view (the conj bit), as
    # on the CPU: the copy to the host resolves it.
    same(fn(x.to(DEV), norm=norm, **kw), fn(x, norm=norm, **kw), rtol=1e-4, atol=1e-4)


def test_fft_roundtrip_grad():
    grad_check(lambda a: torch.fft.irfft(torch.fft.rfft(a) * 2, n=8), [torch.randn(3, 8)], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("fn,kw", [
    (torch.fft.ifft, dict(n=10, dim=1, norm="ortho")), (torch.fft.ifft, {}),
    (torch.fft.ihfft, dict(n=10, dim=1, norm="ortho")), (torch.fft.ihfft2, {}),
    (torch.fft.ihfftn, dict(s=[3, 10], dim=[1, 2])), (torch.fft.hfft2, dict(s=[3, 10], dim=[1, 2])),
])
def test_fft_of_real_input_and_backward(fn, kw):
    # These go through a lazy conj (ifft of real input), conj_physical and
    # view_as_real; values and gradients must match the CPU.
    g = torch.Generator().manual_seed(7)
    x = torch.randn(5, 6, 7, generator=g)
    cx = x.clone().requires_grad_()
    tx = x.to("tpu").requires_grad_()
    e, d = fn(cx, **kw), fn(tx, **kw)
    torch.testing.assert_close(d.detach().cpu(), e.detach(), rtol=1e-4, atol=1e-5)
    up = torch.randn(e.shape, dtype=e.dtype, generator=g)
    e.backward(up)
    d.backward(up.to("tpu"))
    torch.testing.assert_close(tx.grad.cpu(), cx.grad, rtol=1e-4, atol=1e-5)


def test_equal_returns_a_python_bool_like_cpu():
    a = torch.arange(6.0).reshape(2, 3)
    for other in (a.clone(), a + 1, a[:1], a.to(torch.int64)):
        assert torch.equal(a.to("tpu"), other.to("tpu")) is torch.equal(a, other)


@pytest.mark.parametrize("value,msg", [(0, None), (0.0, "boom"), ([1, 1], None), ([], None), (3, None), (1j, None),
                                       (True, "never"), (float("nan"), None)])
def test_assert_async_raises_as_the_cpu_does(value, msg):
    args = (msg,) if msg else ()
    try:
        torch._assert_async(torch.tensor(value), *args)
    except RuntimeError as e:
        with pytest.raises(RuntimeError, match=re.escape(str(e))):
            torch._assert_async(torch.tensor(value, device="tpu"), *args)
    else:
        torch._assert_async(torch.tensor(value, device="tpu"), *args)
