"""Ops whose output shape depends on data (csrc/aten/data_dependent.cpp):
one host sync learns the size, then the values move on the device. Every
result is compared with the CPU's."""
import pytest
import torch

DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.uint8, torch.bool]


def same(a, b):
    assert a.device.type == "tpu"
    torch.testing.assert_close(a.cpu(), b, rtol=0, atol=0, equal_nan=True)


def data(dtype, shape=(4, 5), seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-2, 3, shape, generator=g)
    if dtype == torch.bool:
        return x > 0
    if dtype == torch.uint8:
        return x.abs().to(dtype)
    return x.to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(0,), (7,), (4, 5), (2, 3, 4), ()])
def test_nonzero(tpu, dtype, shape):
    x = data(dtype, shape)
    same(torch.nonzero(x.to(tpu)), torch.nonzero(x))
    if x.dim():
        for a, b in zip(torch.nonzero(x.to(tpu), as_tuple=True), torch.nonzero(x, as_tuple=True)):
            same(a, b)
        same(torch.argwhere(x.to(tpu)), torch.argwhere(x))


def test_nonzero_out_and_static(tpu):
    x = data(torch.float32)
    out = torch.empty(0, dtype=torch.long, device=tpu)
    torch.nonzero(x.to(tpu), out=out)
    same(out, torch.nonzero(x))
    same(torch.nonzero_static(x.to(tpu), size=30, fill_value=-1), torch.nonzero_static(x, size=30, fill_value=-1))
    same(torch.nonzero_static(x.to(tpu), size=2), torch.nonzero_static(x, size=2))


def test_nonzero_sees_pending_work(tpu):
    # The sync waits for the op that produces the input.
    x = torch.arange(10.0, device=tpu)
    m = (x * 3) % 2
    same(torch.nonzero(m), torch.nonzero((torch.arange(10.0) * 3) % 2))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sorted_", [True, False])
@pytest.mark.parametrize("inverse", [False, True])
@pytest.mark.parametrize("counts", [False, True])
def test_unique(tpu, dtype, sorted_, inverse, counts):
    x = data(dtype, (6, 5))
    got = torch.unique(x.to(tpu), sorted=sorted_, return_inverse=inverse, return_counts=counts)
    want = torch.unique(x, sorted=sorted_, return_inverse=inverse, return_counts=counts)
    if isinstance(want, torch.Tensor):
        got, want = (got,), (want,)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        same(a, b)


@pytest.mark.parametrize("dim", [0, 1])
def test_unique_dim_and_consecutive(tpu, dim):
    x = torch.tensor([[1, 2, 2], [1, 2, 2], [3, 0, 0], [1, 2, 2]])
    for a, b in zip(torch.unique(x.to(tpu), dim=dim, return_inverse=True, return_counts=True),
                    torch.unique(x, dim=dim, return_inverse=True, return_counts=True)):
        same(a, b)
    for a, b in zip(torch.unique_consecutive(x.to(tpu), return_inverse=True, return_counts=True),
                    torch.unique_consecutive(x, return_inverse=True, return_counts=True)):
        same(a, b)
    for a, b in zip(torch.unique_consecutive(x.to(tpu), dim=dim, return_counts=True),
                    torch.unique_consecutive(x, dim=dim, return_counts=True)):
        same(a, b)


def test_unique_empty_and_nan(tpu):
    e = torch.empty(0)
    same(torch.unique(e.to(tpu)), torch.unique(e))
    x = torch.tensor([1.0, float("nan"), 1.0, 2.0])
    a = torch.unique(x.to(tpu))
    assert a.shape == torch.unique(x).shape


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
@pytest.mark.parametrize("mshape", [(4, 5), (5,), (1, 5), (4, 1), ()])
def test_masked_select(tpu, dtype, mshape):
    x = data(dtype, (4, 5))
    mask = data(torch.bool, mshape, seed=1)
    same(torch.masked_select(x.to(tpu), mask.to(tpu)), torch.masked_select(x, mask))


def test_masked_select_broadcasts_self(tpu):
    x = torch.arange(5.0)
    mask = data(torch.bool, (3, 5), seed=2)
    same(torch.masked_select(x.to(tpu), mask.to(tpu)), torch.masked_select(x, mask))
    out = torch.empty(0, device=tpu)
    torch.masked_select(x.to(tpu), mask.to(tpu), out=out)
    same(out, torch.masked_select(x, mask))


def test_masked_select_non_contiguous(tpu):
    x = torch.randn(5, 4)
    mask = x > 0
    same(torch.masked_select(x.to(tpu).t(), mask.to(tpu).t()), torch.masked_select(x.t(), mask.t()))


def test_masked_select_errors(tpu):
    x = torch.randn(3)
    with pytest.raises(RuntimeError, match="BoolTensor"):
        torch.masked_select(x.to(tpu), torch.ones(3, dtype=torch.int64, device=tpu))


def test_masked_select_backward(tpu):
    x = torch.randn(4, 5)
    mask = x > 0
    xc = x.clone().requires_grad_()
    torch.masked_select(xc, mask).mul(2).sum().backward()
    xt = x.to(tpu).requires_grad_()
    torch.masked_select(xt, mask.to(tpu)).mul(2).sum().backward()
    same(xt.grad, xc.grad)


def test_masked_scatter(tpu):
    x = torch.zeros(4, 5)
    mask = data(torch.bool, (4, 5), seed=3)
    src = torch.arange(20.0).reshape(4, 5)
    same(x.to(tpu).masked_scatter(mask.to(tpu), src.to(tpu)), x.masked_scatter(mask, src))
    y = x.to(tpu)
    y.masked_scatter_(mask[0].to(tpu), src.to(tpu))  # mask broadcasts over rows
    same(y, x.clone().masked_scatter_(mask[0], src))
    with pytest.raises(RuntimeError):
        x.to(tpu).masked_scatter_(torch.ones(4, 5, dtype=torch.bool, device=tpu), torch.ones(3, device=tpu))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.bool])
def test_bool_mask_index(tpu, dtype):
    x = data(dtype, (4, 5, 3))
    m2 = data(torch.bool, (4, 5), seed=4)
    m1 = data(torch.bool, (5,), seed=5)
    xt = x.to(tpu)
    same(xt[m2.to(tpu)], x[m2])
    same(xt[:, m1.to(tpu)], x[:, m1])
    same(xt[m2.to(tpu), 1], x[m2, 1])
    same(xt[m2], x[m2])  # a CPU mask, as CUDA allows
    idx = torch.tensor([0, 2])
    same(xt[idx.to(tpu), m1.to(tpu)], x[idx, m1])  # int + bool indices broadcast together
    same(xt[x > 0], x[x > 0])


def test_bool_mask_index_all_false_and_all_true(tpu):
    x = torch.randn(3, 4)
    for m in (torch.zeros(3, 4, dtype=torch.bool), torch.ones(3, 4, dtype=torch.bool)):
        same(x.to(tpu)[m.to(tpu)], x[m])


def test_bool_mask_shape_error(tpu):
    x = torch.randn(3, 4, device=tpu)
    with pytest.raises(IndexError, match="shape of the mask"):
        x[torch.ones(4, dtype=torch.bool, device=tpu)]


@pytest.mark.parametrize("value", [7.0, "tensor", "broadcast"])
def test_bool_mask_assign(tpu, value):
    x = torch.randn(4, 5)
    m = x > 0
    n = int(m.sum())
    if value == "tensor":
        v = torch.arange(float(n))
    elif value == "broadcast":
        v = torch.tensor(3.5)
    else:
        v = value
    xt = x.to(tpu)
    view = xt[1:]  # through a view: the base sees the write
    xt[m.to(tpu)] = v.to(tpu) if isinstance(v, torch.Tensor) else v
    x[m] = v
    same(xt, x)
    assert view.shape == (3, 5)
    same(view, x[1:])


def test_bool_mask_index_put_accumulate_and_grad(tpu):
    x = torch.zeros(4, 5)
    m = data(torch.bool, (4, 5), seed=6)
    v = torch.arange(float(int(m.sum())))
    same(x.to(tpu).index_put((m.to(tpu),), v.to(tpu), accumulate=True), x.index_put((m,), v, accumulate=True))
    same(x.to(tpu).index_put_((m.to(tpu),), v.to(tpu)), x.clone().index_put_((m,), v))
    # x[mask] backward goes through index_put with the mask.
    a = torch.randn(4, 5)
    ac = a.clone().requires_grad_()
    (ac[m] * 3).sum().backward()
    at_ = a.to(tpu).requires_grad_()
    (at_[m.to(tpu)] * 3).sum().backward()
    same(at_.grad, ac.grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
@pytest.mark.parametrize("where", ["leading", "after_none", "zero_dim"])
@pytest.mark.parametrize("form", ["setitem", "index_put", "index_put_accumulate", "index_put_out"])
def test_bool_mask_put_of_one_value_needs_no_host_sync(tpu, dtype, where, form):
    # x[mask] = v with one value is where(mask, v, x): no positions, no sync.
    import torch_tpu

    x = data(dtype, () if where == "zero_dim" else (4, 5, 3), seed=2)
    mask = {"leading": data(torch.bool, (4, 5), seed=3), "after_none": data(torch.bool, (5,), seed=4),
            "zero_dim": torch.tensor(True)}[where]
    index = (slice(None), mask) if where == "after_none" else (mask,)
    value = torch.ones((), dtype=dtype)
    if form == "setitem" or where == "after_none":
        def put(t, m, v):
            t = t.clone()
            t[index[:-1] + (m,)] = v
            return t
    else:
        def put(t, m, v):
            if form == "index_put_out":
                out = torch.empty_like(t)
                torch.ops.aten.index_put.out(t, [m], v, False, out=out)
                return out
            return t.index_put((m,), v, accumulate=form == "index_put_accumulate" and dtype != torch.bool)
    xt, mt, vt = x.to(tpu), mask.to(tpu), value.to(tpu)
    if where == "zero_dim" and form != "setitem":  # index_put counts the mask as an index
        for args in ((x, mask, value), (xt, mt, vt)):
            with pytest.raises(IndexError, match="too many indices"):
                put(*args)
        return
    torch.tpu.synchronize()
    before = torch_tpu.metrics()["bytes_to_host"]
    result = put(xt, mt, vt)
    torch.tpu.synchronize()
    # PyTorch's own indexing reads a 0-dim bool index as a Python bool (on
    # CUDA too) before it calls index_put.
    if where != "zero_dim":
        assert torch_tpu.metrics()["bytes_to_host"] == before
    same(result, put(x, mask, value))


def test_bool_mask_put_of_one_value_compiles(tpu):
    # FastSpeech2's length regulator: durations[durations.sum(1).eq(0)] = 1.
    def f(d):
        d = d.clone()
        d[d.sum(dim=1).eq(0)] = 1
        return d * 2

    d = torch.tensor([[0, 0], [1, 2]])
    same(torch.compile(f, backend="tpu", fullgraph=True)(d.to(tpu)), f(d))


def test_repeat_interleave_and_bincount(tpu):
    r = torch.tensor([1, 0, 3, 2])
    same(torch.repeat_interleave(r.to(tpu)), torch.repeat_interleave(r))
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]])
    same(torch.repeat_interleave(x.to(tpu), r.to(tpu), dim=0), torch.repeat_interleave(x, r, dim=0))
    b = torch.tensor([0, 3, 3, 1, 7])
    w = torch.tensor([0.5, 1.0, 2.0, 0.25, 1.0])
    same(torch.bincount(b.to(tpu)), torch.bincount(b))
    same(torch.bincount(b.to(tpu), w.to(tpu), minlength=10), torch.bincount(b, w, minlength=10))


def test_no_cpu_fallback_used(tpu, run_python):
    # With the fallback off, every op above runs on tpu (nothing raises NotImplementedError).
    r = run_python("""
        import torch, torch_tpu
        x = torch.randn(4, 5, device="tpu")
        m = x > 0
        x[m]; x[m] = 1.0; torch.nonzero(x); torch.unique(x, return_inverse=True, return_counts=True)
        torch.masked_select(x, m); print("ok")
    """, TORCH_TPU_CPU_FALLBACK=None)
    assert r.returncode == 0, r.stderr
    assert "ok" in r.stdout and "runs on the CPU" not in r.stderr
