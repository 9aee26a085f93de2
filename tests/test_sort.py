"""sort, argsort, topk, kthvalue, median, nanmedian and mode on tpu against the CPU."""
import pytest
import torch
import torch_tpu  # noqa: F401

DEV = "tpu"
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.int16,
          torch.int8, torch.uint8]
SHAPES = [(), (7,), (4, 9), (2, 3, 5), (3, 0)]


def make(shape, dtype, seed=0, nan=False, ties=False):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point:
        x = torch.randint(-4, 5, shape, generator=g).float() if ties else torch.randn(shape, generator=g)
        if nan and x.numel():
            x.view(-1)[torch.randperm(x.numel(), generator=g)[: max(1, x.numel() // 4)]] = float("nan")
        return x.to(dtype)
    low = 0 if dtype == torch.uint8 else -50
    return torch.randint(low, 50, shape, generator=g).to(dtype)


def same(a, b):
    """Exact agreement of values (NaN equal to NaN) and of indices."""
    for x, y in zip(a, b) if isinstance(a, tuple) else [(a, b)]:
        torch.testing.assert_close(y.cpu(), x, rtol=0, atol=0, equal_nan=True)


def dims_of(shape):
    return [-1] if len(shape) == 0 else list(range(-len(shape), len(shape)))


@pytest.mark.parametrize("dtype", DTYPES + [torch.bool])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("descending", [False, True])
def test_sort(dtype, shape, descending):
    # Ties (small integers) check stability; NaNs check PyTorch's NaN order.
    x = make(shape, dtype, ties=True, nan=dtype.is_floating_point)
    for dim in dims_of(shape):
        for stable in [None, True, False]:
            c = torch.sort(x, dim=dim, descending=descending, stable=stable)
            d = torch.sort(x.to(DEV), dim=dim, descending=descending, stable=stable)
            same(tuple(c), tuple(d))
        same(torch.argsort(x, dim=dim, descending=descending, stable=True),
             torch.argsort(x.to(DEV), dim=dim, descending=descending, stable=True))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.int8, torch.uint8, torch.bool])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_many_ties(dtype, descending):
    # 8000 values drawn from a few: stable=True (both directions) and rows of
    # up to 16 (the CPU's insertion sort) keep ties in index order, exactly as
    # on the CPU; longer rows of stable=False follow libstdc++'s introsort on
    # the CPU, so there values agree and indices point at them.
    g = torch.Generator().manual_seed(6)
    x = torch.randint(0, 4, (8000,), generator=g).to(dtype)
    same(tuple(torch.sort(x, descending=descending, stable=True)),
         tuple(torch.sort(x.to(DEV), descending=descending, stable=True)))
    same(torch.argsort(x, descending=descending, stable=True),
         torch.argsort(x.to(DEV), descending=descending, stable=True))
    same_selection(tuple(torch.sort(x, descending=descending)),
                   tuple(torch.sort(x.to(DEV), descending=descending)), x, 0)
    same(torch.msort(x), torch.msort(x.to(DEV)))
    short = x[:16].reshape(2, 8)
    same(tuple(torch.sort(short, dim=0, descending=descending)),
         tuple(torch.sort(short.to(DEV), dim=0, descending=descending)))
    same(torch.argsort(x[:16], descending=descending), torch.argsort(x[:16].to(DEV), descending=descending))


def test_sort_special_values():
    x = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1.0, float("nan"), -1.0])
    for desc in [False, True]:
        same(tuple(torch.sort(x, descending=desc)), tuple(torch.sort(x.to(DEV), descending=desc)))


def test_sort_out_and_grad():
    x = make((3, 6), torch.float32, seed=1)
    vals = torch.empty(0, device=DEV)
    idx = torch.empty(0, dtype=torch.long, device=DEV)
    torch.sort(x.to(DEV), dim=1, out=(vals, idx))
    same(tuple(torch.sort(x, dim=1)), (vals, idx))
    xc = x.clone().requires_grad_()
    xd = x.to(DEV).requires_grad_()
    g = torch.randn(3, 6)
    torch.sort(xc, dim=0, descending=True).values.backward(g)
    torch.sort(xd, dim=0, descending=True).values.backward(g.to(DEV))
    torch.testing.assert_close(xd.grad.cpu(), xc.grad)


def test_sort_complex_error():
    with pytest.raises(RuntimeError, match="Sort does not support complex"):
        torch.sort(torch.ones(3, dtype=torch.complex64, device=DEV))


def same_selection(c, d, x, dim):
    """Values equal the CPU's; indices point at those values in x. (The CPU's
    order among ties in topk, kthvalue and sort(stable=False) on rows longer
    than 16 is an accident of std::partial_sort / nth_element / introsort.)"""
    same(c[0], d[0])
    i = d[1].cpu()
    assert i.dtype == torch.int64 and i.shape == c[1].shape
    if x.dim() == 0:
        same(x, d[0])
        return
    picked = torch.gather(x, dim, i if i.dim() == x.dim() else i.unsqueeze(dim))
    same(c[0] if c[0].dim() == x.dim() else c[0].unsqueeze(dim), picked)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("largest", [True, False])
def test_topk(dtype, largest):
    x = make((4, 10), dtype, seed=2)
    for dim, k in [(1, 3), (0, 4), (-1, 0), (1, 10)]:
        c = tuple(torch.topk(x, k, dim=dim, largest=largest))
        d = tuple(torch.topk(x.to(DEV), k, dim=dim, largest=largest))
        same_selection(c, d, x, dim)
        # Equal values come in index order.
        if k < 2:
            continue
        v, i = d[0].cpu(), d[1].cpu()
        tie = v.narrow(dim, 1, max(k - 1, 0)) == v.narrow(dim, 0, max(k - 1, 0))
        assert (i.narrow(dim, 1, max(k - 1, 0)) > i.narrow(dim, 0, max(k - 1, 0)))[tie].all()


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_many_ties(dtype, largest):
    # Rows of 8000 values drawn from 5: the k == 1 pick is the first
    # occurrence, as on the CPU; larger k agree in values.
    g = torch.Generator().manual_seed(4)
    x = torch.randint(0, 5, (3, 8000), generator=g).to(dtype)
    same(tuple(torch.topk(x, 1, largest=largest)), tuple(torch.topk(x.to(DEV), 1, largest=largest)))
    for k in [5, 100]:
        same_selection(tuple(torch.topk(x, k, largest=largest)),
                       tuple(torch.topk(x.to(DEV), k, largest=largest)), x, 1)


def test_topk_ties_nan_and_grad():
    # The CPU's order among equal values depends on its selection algorithm;
    # the values and their agreement with the indices are what is defined.
    x = torch.tensor([1.0, 2, 2, 1, float("nan"), 0])
    for largest in [True, False]:
        v, i = torch.topk(x.to(DEV), 3, largest=largest)
        same(torch.topk(x, 3, largest=largest).values, v)
        same(x[i.cpu()], v)
    s = torch.tensor(5.0)
    same(tuple(torch.topk(s, 1)), tuple(torch.topk(s.to(DEV), 1)))
    xc = torch.randn(3, 8).requires_grad_()
    xd = xc.detach().to(DEV).requires_grad_()
    torch.topk(xc, 3).values.sum().backward()
    torch.topk(xd, 3).values.sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad)
    with pytest.raises(RuntimeError, match="selected index k out of range"):
        torch.topk(torch.ones(3, device=DEV), 4)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("keepdim", [False, True])
def test_kthvalue(dtype, keepdim):
    x = make((5, 7), dtype, seed=3)
    for dim, k in [(1, 1), (1, 4), (0, 5), (-1, 7)]:
        same_selection(tuple(torch.kthvalue(x, k, dim=dim, keepdim=keepdim)),
                       tuple(torch.kthvalue(x.to(DEV), k, dim=dim, keepdim=keepdim)), x, dim)
    # Many ties: values agree; the index is one of the value's positions.
    t = torch.randint(0, 3, (4, 40), generator=torch.Generator().manual_seed(5)).to(dtype)
    for k in [1, 13, 40]:
        same_selection(tuple(torch.kthvalue(t, k, dim=1, keepdim=keepdim)),
                       tuple(torch.kthvalue(t.to(DEV), k, dim=1, keepdim=keepdim)), t, 1)
    with pytest.raises(RuntimeError, match="kthvalue\\(\\): selected number k out of range"):
        torch.kthvalue(x.to(DEV), 8, dim=1)


def test_kthvalue_nan_and_grad():
    x = torch.tensor([[3.0, float("nan"), 1.0], [2.0, 0.5, 7.0]])
    for k in [1, 2, 3]:
        same(tuple(torch.kthvalue(x, k)), tuple(torch.kthvalue(x.to(DEV), k)))
    xc = torch.randn(4, 6).requires_grad_()
    xd = xc.detach().to(DEV).requires_grad_()
    torch.kthvalue(xc, 2, dim=0).values.sum().backward()
    torch.kthvalue(xd, 2, dim=0).values.sum().backward()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad)


@pytest.mark.parametrize("op", [torch.median, torch.nanmedian])
@pytest.mark.parametrize("dtype", DTYPES)
def test_median(op, dtype):
    for shape in [(7,), (4, 6), (2, 3, 5), ()]:
        x = make(shape, dtype, seed=4, nan=True)
        same(op(x), op(x.to(DEV)))
        for dim in dims_of(shape):
            for keepdim in [False, True]:
                same(tuple(op(x, dim, keepdim)), tuple(op(x.to(DEV), dim, keepdim)))


def test_median_nan_rows():
    nan = float("nan")
    x = torch.tensor([[3.0, nan, 1.0, nan, 2.0], [1, 1, 2, 2, 0], [nan, nan, nan, nan, nan]])
    for op in [torch.median, torch.nanmedian]:
        same(tuple(op(x[:2], 1)), tuple(op(x[:2].to(DEV), 1)))
        # Which NaN of an all-NaN row nanmedian names is the CPU's accident.
        same(op(x, 1).values, op(x.to(DEV), 1).values)
        same(op(x), op(x.to(DEV)))
        same(op(x[1]), op(x[1].to(DEV)))
    same(torch.median(torch.ones(0)), torch.median(torch.ones(0, device=DEV)))
    with pytest.raises(IndexError, match="median\\(\\): Expected reduction dim 1 to have non-zero size"):
        torch.median(torch.ones(2, 0, device=DEV), 1)


def test_median_grad():
    xc = torch.randn(5, 6).requires_grad_()
    xd = xc.detach().to(DEV).requires_grad_()
    (torch.median(xc, 1).values.sum() + torch.nanmedian(xc)).backward()
    (torch.median(xd, 1).values.sum() + torch.nanmedian(xd)).backward()
    torch.testing.assert_close(xd.grad.cpu(), xc.grad)


@pytest.mark.parametrize("dtype", DTYPES)
def test_mode(dtype):
    x = make((4, 12), dtype, seed=5) % 4 if not dtype.is_floating_point else make((4, 12), dtype, ties=True)
    for dim in [0, 1, -1]:
        for keepdim in [False, True]:
            same(tuple(torch.mode(x, dim, keepdim)), tuple(torch.mode(x.to(DEV), dim, keepdim)))
    y = torch.tensor([[2, 1, 2, 1, 3, 3, 0], [5, 1, 1, 5, 0, 0, 0]])
    same(tuple(torch.mode(y, 1)), tuple(torch.mode(y.to(DEV), 1)))
    with pytest.raises(IndexError, match="mode\\(\\): Expected reduction dim 0 to have non-zero size"):
        torch.mode(torch.ones(0, device=DEV))
