"""Indexing (index_select, embedding and its max_norm renorm, gather, scatter*, advanced indexing, index_put,
index_add) and data-copying shape ops (cat, stack, pad, repeat, flip, roll, tril/triu)
on tpu against the CPU: values, dtypes, shapes, gradients and errors."""
import pytest
import torch
import torch.nn.functional as F
import torch_tpu  # noqa: F401

DEV = "tpu"
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.bool]
FLOATS = [torch.float32, torch.bfloat16, torch.float16]


def make(shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-5, 6, shape, generator=g).to(dtype)


def idx(high, shape, seed=0, dtype=torch.int64):
    return torch.randint(0, high, shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def to_dev(x):
    if isinstance(x, (list, tuple)):
        return type(x)(to_dev(e) for e in x)
    return x.to(DEV) if isinstance(x, torch.Tensor) else x


def check(fn, *inputs, grad=(), **kw):
    """fn on CPU inputs and on their tpu copies gives the same results; the
    inputs at positions `grad` (floating tensors) also get the same gradients
    for a random upstream gradient. These ops move values without arithmetic
    (or add them in the input's dtype, as the CPU does), so the default
    tolerances hold for every dtype."""
    def prep(x, i, dev):
        if isinstance(x, (list, tuple)):
            return type(x)(prep(e, i, dev) for e in x)
        if not isinstance(x, torch.Tensor):
            return x
        x = x.detach().clone()
        return (to_dev(x) if dev else x).requires_grad_(i in grad)

    cpu = [prep(x, i, False) for i, x in enumerate(inputs)]
    dev = [prep(x, i, True) for i, x in enumerate(inputs)]
    out_c, out_d = fn(*cpu), fn(*dev)
    assert out_d.device.type == DEV
    torch.testing.assert_close(out_d.cpu(), out_c, **kw)
    if grad:
        g = make(out_c.shape, out_c.dtype, seed=13)
        out_c.backward(g)
        out_d.backward(to_dev(g))
        for i in grad:
            cs = cpu[i] if isinstance(cpu[i], (list, tuple)) else [cpu[i]]
            ds = dev[i] if isinstance(dev[i], (list, tuple)) else [dev[i]]
            for c, d in zip(cs, ds):
                torch.testing.assert_close(d.grad.cpu(), c.grad, **kw)


def raises_like(fn, *inputs):
    with pytest.raises(Exception) as cpu_err:
        fn(*inputs)
    with pytest.raises(type(cpu_err.value)) as dev_err:
        fn(*to_dev(list(inputs)))
    assert str(cpu_err.value).splitlines()[0] in str(dev_err.value)


# ---- index_select / embedding


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,dim", [((5,), 0), ((4, 3), 0), ((4, 3), -1), ((2, 3, 4), 1), ((2, 0, 4), 2)])
@pytest.mark.parametrize("index_dtype", [torch.int64, torch.int32])
def test_index_select(dtype, shape, dim, index_dtype):
    x = make(shape, dtype)
    n = shape[dim]
    for index in ([idx(n, (6,), dtype=index_dtype), idx(n, (), dtype=index_dtype)] if n else []) + \
            [torch.zeros(0, dtype=index_dtype)]:
        check(lambda x, i: torch.index_select(x, dim, i), x, index)


def test_index_select_scalar_self():
    check(lambda x, i: torch.index_select(x, 0, i), torch.tensor(5.0), torch.tensor([0]))
    check(lambda x, i: torch.index_select(x, 0, i), torch.tensor(5.0), torch.tensor(0))


@pytest.mark.parametrize("dtype", FLOATS)
def test_index_select_grad(dtype):
    check(lambda x, i: torch.index_select(x, 1, i), make((3, 5), dtype), torch.tensor([4, 0, 4, 2]), grad=(0,))


def test_index_select_errors():
    raises_like(lambda x, i: torch.index_select(x, 1, i), make((2, 3)), torch.tensor([[0]]))
    raises_like(lambda x, i: torch.index_select(x, 1, i), make((2, 3)), torch.tensor([0.0]))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("ishape", [(4,), (2, 3), (), (0,)])
@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding(dtype, ishape, padding_idx):
    w, i = make((6, 4), dtype), idx(6, ishape, seed=1)
    check(lambda w, i: F.embedding(i, w, padding_idx=padding_idx), w, i, grad=(0,))


@pytest.mark.parametrize("padding_idx", [-1, 3])
def test_embedding_scale_grad_by_freq(padding_idx):
    check(lambda w, i: F.embedding(i, w, padding_idx=padding_idx, scale_grad_by_freq=True),
          make((6, 4)), torch.tensor([[1, 3, 3], [1, 1, 5]]), grad=(0,))


def test_embedding_module_int32_indices():
    cpu = torch.nn.Embedding(10, 3)
    dev = torch.nn.Embedding(10, 3)
    dev.load_state_dict(cpu.state_dict())
    dev.to(DEV)
    i = torch.tensor([[1, 2], [3, 3]], dtype=torch.int32)
    g = make((2, 2, 3), seed=4)
    cpu(i).backward(g)
    dev(to_dev(i)).backward(to_dev(g))
    torch.testing.assert_close(dev.weight.grad.cpu(), cpu.weight.grad)


@pytest.mark.parametrize("dtype", FLOATS + [torch.float64])
@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, float("inf")])
def test_embedding_max_norm(dtype, norm_type):
    # Rows of all sizes, some named twice, some not at all: the lookup, the renormed
    # table (F.embedding writes it in place) and the gradient match the CPU's.
    w = make((10, 4), dtype) * torch.linspace(0.1, 3, 10).view(10, 1).to(dtype)
    i = torch.tensor([[1, 3, 3], [9, 0, 7]])
    tables = []

    def fn(w, i):
        out = F.embedding(i, w, max_norm=1.5, norm_type=norm_type)
        tables.append(w.detach().cpu())
        return out

    check(fn, w, i, grad=(0,))
    torch.testing.assert_close(tables[1], tables[0])
    assert not torch.equal(tables[0], w), "no row was renormed"
    check(lambda w, i: torch.embedding_renorm_(w, i, 1.0, norm_type), w, torch.tensor([], dtype=torch.int64))
    check(lambda w, i: torch.embedding_renorm_(w, i, 0.5, norm_type), w, idx(10, (5,), seed=2, dtype=torch.int32))


def test_embedding_max_norm_module_and_errors():
    cpu = torch.nn.Embedding(20, 8, max_norm=1.0)
    dev = torch.nn.Embedding(20, 8, max_norm=1.0)
    dev.load_state_dict(cpu.state_dict())
    dev.to(DEV)
    i = torch.tensor([[1, 2], [2, 19]])
    torch.testing.assert_close(dev(to_dev(i)).cpu(), cpu(i))
    torch.testing.assert_close(dev.weight.detach().cpu(), cpu.weight.detach())
    raises_like(lambda w, i: torch.embedding_renorm_(w, i, 1.0, 2.0), make((3,)), torch.tensor([0]))
    raises_like(lambda w, i: torch.embedding_renorm_(w, i, 1.0, 2.0), make((3, 2)), torch.tensor([0.0]))
    raises_like(lambda w, i: torch.embedding_renorm_(w, i, 1.0, 2.0), make((3, 2), torch.int64), torch.tensor([1]))


def test_embedding_dense_backward_direct():
    g, i = make((2, 3, 4), torch.bfloat16), idx(5, (2, 3))
    check(lambda g, i: torch.ops.aten.embedding_dense_backward(g, i, 5, -1, False), g, i)


# ---- gather / scatter


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,dim,ishape", [((5,), 0, (7,)), ((3, 4), 1, (3, 6)), ((3, 4), 0, (2, 4)),
                                              ((3, 4), -1, (2, 2)), ((2, 3, 4), 1, (2, 5, 3)), ((3, 4), 1, (0, 2)),
                                              ((), 0, ())])
def test_gather(dtype, shape, dim, ishape):
    n = shape[dim] if shape else 1
    check(lambda x, i: torch.gather(x, dim, i), make(shape, dtype), idx(n, ishape, seed=2))


@pytest.mark.parametrize("dtype", FLOATS)
def test_gather_grad(dtype):
    check(lambda x, i: torch.gather(x, 1, i), make((3, 4), dtype), idx(4, (3, 5), seed=3), grad=(0,))


def test_gather_errors():
    raises_like(lambda x, i: torch.gather(x, 1, i), make((2, 3)), torch.zeros(3, 1, dtype=torch.long))
    raises_like(lambda x, i: torch.gather(x, 1, i), make((2, 3)), torch.zeros(2, dtype=torch.long))


def unique_rows(shape, n, dim, seed):
    """An index along dim with no repeats within each line (scatter is then deterministic)."""
    g = torch.Generator().manual_seed(seed)
    size = shape[dim]
    perm = torch.stack([torch.randperm(n, generator=g)[:size] for _ in range(torch.Size(shape).numel() // size)])
    moved = list(shape)
    moved.append(moved.pop(dim))
    return perm.reshape(moved).movedim(-1, dim).contiguous()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter_src_value(dtype, dim):
    self = make((4, 5), dtype)
    ishape = (3, 2) if dim == 0 else (2, 3)
    index = unique_rows(ishape, 4 if dim == 0 else 5, dim % 2, seed=5)
    src = make((4, 5), dtype, 6)
    check(lambda s, i, u: torch.scatter(s, dim, i, u), self, index, src)
    value = True if dtype == torch.bool else 3
    check(lambda s, i: torch.scatter(s, dim, i, value), self, index)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.int32])
def test_scatter_add(dtype):
    self, index, src = make((4, 5), dtype), idx(4, (6, 5), seed=1), make((6, 5), dtype, 2)
    check(lambda s, i, u: torch.scatter_add(s, 0, i, u), self, index, src)
    check(lambda s, i, u: torch.scatter(s, 0, i, u, reduce="add"), self, index, src)
    check(lambda s, i, u: torch.scatter(s, 0, i, u, reduce="multiply"), self, index, src)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(dtype, reduce, include_self):
    self, index, src = make((4, 5), dtype), idx(3, (6, 4), seed=1), make((6, 5), dtype, 2)
    check(lambda s, i, u: torch.scatter_reduce(s, 0, i, u, reduce, include_self=include_self), self, index, src)


@pytest.mark.parametrize("dtype", FLOATS)
def test_scatter_grads(dtype):
    index = unique_rows((2, 3), 5, 1, seed=3)
    check(lambda s, i, u: torch.scatter(s, 1, i, u), make((4, 5), dtype), index, make((2, 3), dtype, 1),
          grad=(0, 2))
    check(lambda s, i, u: torch.scatter_add(s, 1, i, u), make((4, 5), dtype), idx(5, (4, 3)),
          make((4, 3), dtype, 1), grad=(0, 2))


# ---- advanced indexing


# Each takes x and T, which makes an index tensor on x's device.
INDEXINGS = [
    lambda x, T: x[T([0, 2, -1])],
    lambda x, T: x[T([[0, 1], [2, -2]])],
    lambda x, T: x[:, T([1, 0, 1])],
    lambda x, T: x[T([0, 2]), T([1, 3])],
    lambda x, T: x[T([[0], [2]]), T([1, 3, 0])],
    lambda x, T: x[:, T([1, 0]), T([2, 3])],
    lambda x, T: x[T([1, 0]), :, T([2, 3])],
    lambda x, T: x[T([1, 0]), 1:, T([[2], [3]])],
    lambda x, T: x[..., T([0, 3, 3])],
    lambda x, T: x[T([], dtype=torch.long)],
    lambda x, T: x[T([1, 0], dtype=torch.int32)],
    lambda x, T: x[T(1), T([0, 2])],
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("k", range(len(INDEXINGS)))
def test_index_tensor(dtype, k):
    x = make((3, 4, 5), dtype)
    expect = INDEXINGS[k](x, torch.tensor)
    got = INDEXINGS[k](to_dev(x), lambda v, **kw: torch.tensor(v, **kw).to(DEV))
    torch.testing.assert_close(got.cpu(), expect)


@pytest.mark.parametrize("dtype", FLOATS)
def test_index_tensor_grad(dtype):
    i = torch.tensor([0, 2, 0, -1])
    j = torch.tensor([1, 1, 1, 3])
    check(lambda x, i: x[i], make((3, 4), dtype), i, grad=(0,))
    check(lambda x, i, j: x[i, :, j], make((3, 2, 4), dtype), i, j, grad=(0,))


def test_index_errors():
    raises_like(lambda x, i, j: x[i, j], make((3, 4)), torch.tensor([0, 1]), torch.tensor([0, 1, 2]))
    raises_like(lambda x, i: x[i], make((3, 4)), torch.tensor([0.0]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put(dtype, accumulate):
    x = make((4, 3, 5), dtype)
    i = torch.tensor([2, 0, 3]) if not accumulate else torch.tensor([2, 0, 2, 2])
    vals = make((len(i), 3, 5), dtype, 1)
    check(lambda x, i, v: x.index_put((i,), v, accumulate=accumulate), x, i, vals)
    # broadcast values, and non-adjacent indexed dims (batch first in PyTorch's layout)
    check(lambda x, i, v: x.index_put((i,), v, accumulate=accumulate), x, i, make((5,), dtype, 2))
    j = torch.tensor([4, 1, 0]) if not accumulate else torch.tensor([4, 1, 4, 4])
    index_put = torch.ops.aten.index_put
    check(lambda x, i, j, v: index_put(x, [i, None, j], v, accumulate), x, i, j, make((len(i), 3), dtype, 3))
    check(lambda x, i, j, v: index_put(x, [None, i.clamp(max=2), j], v, accumulate), x, i, j,
          make((4, len(i)), dtype, 4))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_setitem(dtype):
    x = make((4, 5), dtype)
    i = torch.tensor([3, 1])

    def fn(x, i, v):
        y = x.clone()
        y[i] = v
        return y

    check(fn, x, i, make((2, 5), dtype, 1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_index_add(dtype, dim):
    x = make((4, 5), dtype)
    n = x.shape[dim]
    i = torch.tensor([0, n - 1, 0])
    src_shape = list(x.shape)
    src_shape[dim] = 3
    src = make(tuple(src_shape), dtype, 1)
    check(lambda x, i, s: torch.index_add(x, dim, i, s), x, i, src)
    check(lambda x, i, s: torch.index_add(x, dim, i, s, alpha=2), x, i, src)


def test_index_add_grad():
    check(lambda x, i, s: torch.index_add(x, 1, i, s), make((3, 4)), torch.tensor([2, 0, 2]),
          make((3, 3), seed=1), grad=(0, 2))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
@pytest.mark.parametrize("dim", [0, -1])
def test_index_copy_fill(dtype, dim):
    x = make((4, 5), dtype)
    n = x.shape[dim]
    i = torch.tensor([n - 1, 0])
    src_shape = list(x.shape)
    src_shape[dim] = 2
    check(lambda x, i, s: torch.index_copy(x, dim, i, s), x, i, make(tuple(src_shape), dtype, 1))
    value = True if dtype == torch.bool else 2
    check(lambda x, i: torch.index_fill(x, dim, i, value), x, torch.tensor([1, -1]))
    check(lambda x, i, v: torch.index_fill(x, dim, i, v), x, torch.tensor(2), torch.tensor(value).to(dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_take_put(dtype):
    x = make((3, 4), dtype)
    check(lambda x, i: torch.take(x, i), x, torch.tensor([[0, 11], [-1, 5]]))
    check(lambda x, i, s: x.put(i, s), x, torch.tensor([0, 11, -2]), make((3,), dtype, 1))
    check(lambda x, i, s: x.put(i, s, accumulate=True), x, torch.tensor([0, 11, 0]), make((3,), dtype, 1))


def test_take_index_fill_grads():
    check(lambda x, i: torch.take(x, i), make((3, 4)), torch.tensor([0, 5, 5]), grad=(0,))
    check(lambda x, i: torch.index_fill(x, 1, i, 0.5), make((3, 4)), torch.tensor([0, 2]), grad=(0,))


# ---- cat / stack


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cat(dtype, dim):
    a, b = make((2, 3, 4), dtype), make((2, 3, 4), dtype, 1)
    check(lambda a, b: torch.cat([a, b], dim), a, b)
    check(lambda a: torch.cat([a], dim), a)


def test_cat_unequal_and_empty():
    a, b = make((2, 3)), make((5, 3), seed=1)
    check(lambda a, b: torch.cat([a, b, a]), a, b)
    check(lambda a, b, e: torch.cat([a, e, b]), a, b, torch.zeros(0, 3))
    # 1-D empty tensors are skipped whatever the others' shapes
    check(lambda a, e: torch.cat([e, a, e], 1), a, torch.zeros(0))
    check(lambda a: torch.cat([a[:0], a[:0]]), a)
    check(lambda a: torch.cat([a[0, :0], a[0, :0]]), a)


def test_cat_promotion():
    check(lambda a, b: torch.cat([a, b]), make((2, 3), torch.int32), make((1, 3), torch.float16))
    check(lambda a, b: torch.cat([a, b]), make((2, 3), torch.bool), make((1, 3), torch.int64))
    check(lambda a, b: torch.cat([a, b]), make((2, 3), torch.bfloat16), make((1, 3), torch.float16))
    check(lambda a, b: torch.cat([a, b]), make((2, 3), torch.int64), torch.zeros(0, dtype=torch.float64))


@pytest.mark.parametrize("dtype", FLOATS)
def test_cat_stack_grad(dtype):
    check(lambda ts: torch.cat(ts, 1), [make((2, 3), dtype), make((2, 1), dtype, 1)], grad=(0,))
    check(lambda ts: torch.stack(ts, 1), [make((2, 3), dtype), make((2, 3), dtype, 1)], grad=(0,))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dim", [0, 1, 2, -1, -3])
def test_stack(dtype, dim):
    a, b = make((2, 3), dtype), make((2, 3), dtype, 1)
    check(lambda a, b: torch.stack([a, b, a], dim), a, b)


def test_stack_scalars_and_mixed():
    check(lambda a, b: torch.stack([a, b]), torch.tensor(1.0), torch.tensor(2.0))
    check(lambda a, b: torch.stack([a, b]), make((3,), torch.int32), make((3,), torch.float32))
    check(lambda a: torch.stack([a, a]), make((0, 2)))


def test_cat_stack_errors():
    raises_like(lambda a: torch.cat([a]), torch.tensor(1.0))
    raises_like(lambda a, b: torch.cat([a, b]), make((2, 3)), make((2, 4)))
    raises_like(lambda a, b: torch.cat([a, b]), make((2, 3)), make((3,)))
    raises_like(lambda a, b: torch.stack([a, b]), make((2, 3)), make((3,)))


# ---- pad / repeat / flip / roll / tril / triu


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pad", [(1, 2), (0, 0, 2, 1), (-1, 1), (1, 1, -1, -1), (2, 0, 0, 1, 1, 0), ()])
def test_constant_pad(dtype, pad):
    value = True if dtype == torch.bool else 3
    check(lambda x: F.pad(x, pad, value=value), make((2, 3, 4), dtype))


@pytest.mark.parametrize("dtype", FLOATS)
def test_constant_pad_grad(dtype):
    check(lambda x: F.pad(x, (1, 2, -1, 0), value=0.5), make((3, 4), dtype), grad=(0,))


def test_constant_pad_errors():
    raises_like(lambda x: torch.ops.aten.constant_pad_nd(x, [1, 2, 3]), make((2, 3)))
    raises_like(lambda x: torch.ops.aten.constant_pad_nd(x, [1, 2, 3, 4, 5, 6]), make((2, 3)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,reps", [((3,), (2,)), ((2, 3), (2, 1)), ((2, 3), (1, 2, 3)), ((), (4,)),
                                        ((2, 3), (0, 2)), ((0, 2), (2, 2))])
def test_repeat(dtype, shape, reps):
    check(lambda x: x.repeat(*reps), make(shape, dtype))


def test_repeat_grad_and_error():
    check(lambda x: x.repeat(2, 1, 3), make((2, 3)), grad=(0,))
    raises_like(lambda x: x.repeat(2), make((2, 3)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dims", [(0,), (1,), (-1, 0), (0, 1, 2)])
def test_flip(dtype, dims):
    check(lambda x: torch.flip(x, dims), make((2, 3, 4), dtype))


def test_flip_scalar_grad_error():
    check(lambda x: torch.flip(x, ()), make((2, 3)))
    check(lambda x: torch.flip(x, (0,)), torch.tensor(2.0))
    check(lambda x: torch.flip(x, (1,)), make((2, 3)), grad=(0,))
    raises_like(lambda x: torch.flip(x, (0, 0)), make((2, 3)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shifts,dims", [(1, 0), (-1, 1), (7, -1), ((1, 2), (0, 1)), (5, None), (0, 0),
                                         ((-3, 3), (1, 1))])
def test_roll(dtype, shifts, dims):
    check(lambda x: torch.roll(x, shifts, dims), make((3, 4), dtype))


def test_roll_grad_empty_error():
    check(lambda x: torch.roll(x, 2, 1), make((3, 4)), grad=(0,))
    check(lambda x: torch.roll(x, 2, 0), make((0, 4)))
    raises_like(lambda x: torch.roll(x, (1, 2), (0,)), make((3, 4)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("fn", [torch.tril, torch.triu])
@pytest.mark.parametrize("shape", [(3, 4), (4, 3), (2, 3, 3), (0, 3)])
@pytest.mark.parametrize("diagonal", [0, 1, -2, 5])
def test_tril_triu(dtype, fn, shape, diagonal):
    check(lambda x: fn(x, diagonal), make(shape, dtype))


def test_tril_triu_grad_error():
    check(lambda x: torch.tril(x, -1), make((3, 4)), grad=(0,))
    check(lambda x: torch.triu(x, 1), make((3, 4)), grad=(0,))
    raises_like(torch.tril, make((3,)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
@pytest.mark.parametrize("dim,start,length", [(0, 1, 2), (1, -3, 2), (1, 4, 0), (-1, 0, 4)])
def test_narrow_copy(dtype, dim, start, length):
    check(lambda x: x.narrow_copy(dim, start, length), make((3, 4), dtype))


def test_narrow_copy_errors():
    raises_like(lambda x: x.narrow_copy(1, 3, 2), make((3, 4)))
    raises_like(lambda x: x.narrow_copy(1, 5, 0), make((3, 4)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize("offset,dim1,dim2", [(0, 0, 1), (1, 0, 1), (-2, 1, 0), (1, 2, 0), (0, -1, -2), (9, 0, 1)])
def test_diagonal_copy_and_backward(dtype, offset, dim1, dim2):
    x = make((3, 4, 5), dtype)
    check(lambda x: torch.ops.aten.diagonal_copy(x, offset, dim1, dim2), x)
    d = torch.diagonal(x, offset, dim1, dim2)
    check(lambda g: torch.ops.aten.diagonal_backward(g, [3, 4, 5], offset, dim1, dim2), d.contiguous())


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
@pytest.mark.parametrize("offset,dim1,dim2", [(0, -2, -1), (1, 0, 2), (-1, 2, 0), (2, 1, 2)])
def test_diag_embed(dtype, offset, dim1, dim2):
    check(lambda x: torch.diag_embed(x, offset, dim1, dim2), make((2, 3), dtype))


def test_diagonal_grads_and_errors():
    check(lambda x: torch.diagonal(x, 1).sum(-1), make((3, 4)), grad=(0,))
    check(lambda x: torch.diag_embed(x), make((2, 3)), grad=(0,))
    raises_like(lambda x: torch.ops.aten.diagonal_copy(x, 0, 1, 1), make((3, 4)))
    raises_like(lambda x: torch.diag_embed(x, 0, 1, -2), make((2, 3)))


@pytest.mark.parametrize("index_dtype", [torch.uint8, torch.int16, torch.int32, torch.int64])
def test_gather_scatter_empty_index(index_dtype):
    # The CPU returns at once for an empty index, whatever its dtype or shape.
    x = make((3, 4))
    for shape in [(0,), (3, 0), (0, 4), (5, 0)]:
        i = torch.zeros(shape, dtype=index_dtype)
        src = x if len(shape) == 2 else x[0]
        c = torch.gather(src, -1, i)
        d = torch.gather(src.to(DEV), -1, i.to(DEV))
        assert d.shape == c.shape and d.dtype == c.dtype
    i = torch.zeros(3, 0, dtype=index_dtype)
    for fn in [lambda t, j: torch.scatter(t, 1, j, torch.ones(3, 0, device=t.device)),
               lambda t, j: torch.scatter_add(t, 1, j, torch.ones(3, 0, device=t.device)),
               lambda t, j: torch.scatter(t, 1, j, 2.0)]:
        torch.testing.assert_close(fn(x.to(DEV), i.to(DEV)).cpu(), fn(x, i))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.uint8])
@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce(dtype, reduce, include_self):
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(5, 4, generator=g) * 4).to(dtype)
    src = (torch.randn(7, 4, generator=g) * 4).to(dtype)
    index = torch.randint(0, 5, (7,), generator=g)
    for dim, s, ix in [(0, src, index), (1, src.T.contiguous()[:, :5].T.contiguous().T, index[:5] % 4)]:
        s = s if dim == 0 else torch.randn(5, 5, generator=g).to(dtype)
        c = x.index_reduce(dim, ix, s, reduce, include_self=include_self)
        d = x.to(DEV).index_reduce(dim, ix.to(DEV), s.to(DEV), reduce, include_self=include_self)
        tol = dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else {}
        torch.testing.assert_close(d.cpu(), c, **tol)
    y = x.to(DEV)
    y.index_reduce_(0, index.to(DEV), src.to(DEV), reduce, include_self=include_self)
    torch.testing.assert_close(y.cpu(), x.clone().index_reduce_(0, index, src, reduce, include_self=include_self),
                               **(dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else {}))
    with pytest.raises(RuntimeError, match="reduce to be one of"):
        x.to(DEV).index_reduce(0, index.to(DEV), src.to(DEV), "sum")


# ---- host index tensors

@pytest.mark.parametrize("index", [[0, 2], [1], [], 3], ids=str)
def test_index_fill_takes_a_cpu_index(index):
    """PyTorch's device-generic tests fill at CPU indices on every device but
    CUDA; index_fill accepts them, as the CPU does."""
    idx = torch.tensor(index, dtype=torch.long)
    x = torch.arange(20.0).view(4, 5)
    want = x.index_fill(0, idx, -1.0)
    got = x.to(DEV).index_fill(0, idx, -1.0)
    torch.testing.assert_close(got.cpu(), want)
    y = x.to(DEV)
    y.index_fill_(1, idx, torch.tensor(7.0))
    torch.testing.assert_close(y.cpu(), x.clone().index_fill_(1, idx, torch.tensor(7.0)))


@pytest.mark.parametrize("op", [
    lambda x, i: x.index_select(0, i), lambda x, i: x.gather(0, i.view(-1, 1).expand(-1, 5)),
    lambda x, i: torch.nn.functional.embedding(i, x),
])
def test_other_index_ops_refuse_a_cpu_index_as_cuda_does(op):
    x, idx = torch.arange(20.0).view(4, 5).to(DEV), torch.tensor([0, 2])
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device.*tpu:0 and cpu"):
        op(x, idx)


def test_nll_loss_with_a_target_or_weight_on_another_device_raises():
    logp = torch.randn(3, 4).log_softmax(1).to(DEV)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.nn.NLLLoss()(logp, torch.tensor([0, 1, 3]))
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.nn.NLLLoss(weight=torch.ones(4))(logp, torch.tensor([0, 1, 3], device=DEV))
