"""Views and aliasing: reads through views, writes through views seen by every
alias (checked against the same sequence on the CPU), out=, resize_, set_."""
import pytest
import torch


def _base():
    return torch.arange(48.0).reshape(6, 8)


VIEWS = {
    "slice": lambda x: x[1:4],
    "slice_steps": lambda x: x[1:6:2, ::3],
    "neg_end_slice": lambda x: x[-3:, 2:-1],
    "transpose": lambda x: x.t(),
    "permute": lambda x: x.view(2, 3, 8).permute(2, 0, 1),
    "select_row": lambda x: x[2],
    "select_col": lambda x: x[:, 5],
    "select_scalar": lambda x: x[3, 4],
    "diagonal": lambda x: x.diagonal(),
    "diagonal_offset": lambda x: x.diagonal(2),
    "diagonal_neg": lambda x: x.diagonal(-1),
    "expand": lambda x: x[:, 1:2].expand(6, 5),
    "expand_new_dim": lambda x: x[0].expand(3, 8),
    "unsqueeze": lambda x: x.unsqueeze(1),
    "squeeze": lambda x: x[:, 2:3].squeeze(1),
    "view": lambda x: x.view(4, 12),
    "view_flat_slice": lambda x: x.view(-1)[5:40:7],
    "reshape_view": lambda x: x.reshape(3, 16),
    "reshape_copy": lambda x: x.t().reshape(48),
    "as_strided": lambda x: x.as_strided((3, 4), (9, 2), 3),
    "as_strided_overlap": lambda x: x.as_strided((4, 4), (1, 1), 0),
    "as_strided_uneven": lambda x: x.as_strided((3, 3), (7, 5), 1),
    "unfold": lambda x: x.view(-1).unfold(0, 5, 4),
    "unfold_overlap": lambda x: x[1].unfold(0, 3, 1),
    "narrow": lambda x: x.narrow(1, 2, 4),
    "view_chain": lambda x: x[1:5].t()[2:6:2].unsqueeze(0),
}


@pytest.mark.parametrize("name", list(VIEWS))
def test_read_view(name, tpu):
    make = VIEWS[name]
    x = _base()
    v = make(x)
    tv = make(x.to(tpu))
    assert tv.shape == v.shape and tv.stride() == v.stride()
    assert tv.storage_offset() == v.storage_offset()
    assert torch.equal(tv.cpu(), v)



DTYPE_VIEWS = [
    (torch.float32, torch.int32),
    (torch.float32, torch.uint8),
    (torch.float32, torch.int16),
    (torch.float32, torch.float64),
    (torch.float64, torch.float32),
    (torch.float32, torch.bfloat16),
    (torch.int64, torch.complex64),
    (torch.complex64, torch.float32),
    (torch.bool, torch.uint8),
    (torch.uint8, torch.bool),
    (torch.int16, torch.float16),
]


@pytest.mark.parametrize("src,dst", DTYPE_VIEWS, ids=str)
def test_view_dtype_read(src, dst, tpu):
    if src.is_complex:
        x = torch.tensor([1 + 2j, 3 - 4j, -0.5j, 7], dtype=src)
    elif src == torch.bool:
        x = torch.tensor([True, False, True, True, False, False, True, False])
    elif src == torch.uint8:
        x = torch.tensor([0, 1, 1, 0, 1, 0, 0, 1], dtype=torch.uint8)
    else:
        x = (torch.arange(16.0) * 1.7 - 9).to(src)
    v = x.view(dst)
    tv = x.to(tpu).view(dst)
    assert tv.shape == v.shape and tv.dtype == dst
    assert torch.equal(tv.cpu().view(torch.uint8), v.view(torch.uint8))  # bitwise


def test_view_dtype_of_slice(tpu):
    x = torch.arange(8.0)
    assert torch.equal(x.to(tpu)[2:6].view(torch.float64).cpu(), x[2:6].view(torch.float64))
    y = torch.arange(6, dtype=torch.float64)
    assert torch.equal(y.to(tpu)[1:4].view(torch.float32).cpu(), y[1:4].view(torch.float32))
    assert torch.equal(x.to(tpu)[1:3].view(torch.uint8).cpu(), x[1:3].view(torch.uint8))


def _check_write(write, views=("slice", "transpose", "diagonal", "select_col", "view_flat_slice", "as_strided_uneven")):
    """Runs `write(base, device_fn)` on a CPU base and on a tpu base, and
    compares the bases and a set of aliases created BEFORE the write."""
    x = _base()
    t = x.to("tpu")
    cpu_aliases = {n: VIEWS[n](x) for n in views}
    tpu_aliases = {n: VIEWS[n](t) for n in views}
    write(x, lambda a: a)
    write(t, lambda a: a.to("tpu"))
    assert torch.equal(t.cpu(), x)
    for n in views:
        assert torch.equal(tpu_aliases[n].cpu(), cpu_aliases[n]), n


WRITES = {
    "setitem_rows": lambda b, D: b.__setitem__(slice(1, 3), D(torch.full((2, 8), -1.0))),
    "setitem_step": lambda b, D: b.__setitem__((slice(None, None, 2), slice(1, None, 3)), D(-torch.arange(9.0).reshape(3, 3))),
    "setitem_broadcast": lambda b, D: b.__setitem__((slice(None), 3), D(torch.tensor(-7.0))),
    "copy_into_transpose": lambda b, D: b.t()[1:3].copy_(D(-torch.arange(12.0).reshape(2, 6))),
    "copy_into_select": lambda b, D: b[4].copy_(D(torch.ones(8) * -3)),
    "copy_into_diagonal": lambda b, D: b.diagonal(1).copy_(D(-torch.arange(1.0, 7.0))),
    "copy_into_permute": lambda b, D: b.view(2, 3, 8).permute(2, 0, 1)[1:4].copy_(D(-torch.arange(18.0).reshape(3, 2, 3))),
    "copy_into_unsqueeze": lambda b, D: b.unsqueeze(0)[0, 5].copy_(D(torch.full((8,), 0.5))),
    "copy_into_as_strided": lambda b, D: b.as_strided((3, 3), (7, 5), 1).copy_(D(-torch.arange(9.0).reshape(3, 3))),
    "copy_into_view_chain": lambda b, D: b[1:5].t()[2:6:2].copy_(D(torch.full((2, 4), -2.0))),
    "copy_into_int32_view": lambda b, D: b.view(torch.int32)[2, 1:4].copy_(D(torch.tensor([1, 2, 3], dtype=torch.int32))),
    "copy_into_uint8_view": lambda b, D: b.view(torch.uint8)[0, 3:9].copy_(D(torch.arange(200, 206, dtype=torch.uint8))),
    "copy_into_int16_view": lambda b, D: b.view(torch.int16)[3, ::2].copy_(D(torch.arange(8, dtype=torch.int16) * 1000)),
    "copy_into_float64_view": lambda b, D: b.view(torch.float64)[1, 1:3].copy_(D(torch.tensor([1e300, -2.5], dtype=torch.float64))),
    "copy_from_host": lambda b, D: b[:, 1::2].copy_(torch.full((6, 4), 11.0)),
    "copy_from_alias": lambda b, D: b[0].copy_(b[5]),
    "successive": lambda b, D: (b[1].copy_(D(torch.zeros(8))), b[:, 1].copy_(D(torch.ones(6))), b.t()[2, 2:4].copy_(D(torch.tensor([5.0, 6.0])))),
}


@pytest.mark.parametrize("name", list(WRITES))
def test_write_through_view(name):
    _check_write(WRITES[name])


def test_inplace_op_through_transpose(require_ops):
    require_ops("aten::add.Tensor", "aten::mul.Scalar")
    _check_write(lambda b, D: b.t().add_(D(torch.arange(6.0))))
    _check_write(lambda b, D: b[::2, 1::2].mul_(10))
    _check_write(lambda b, D: b.diagonal().add_(100))


def test_fill_through_select(require_ops):
    require_ops("aten::fill.Scalar")
    _check_write(lambda b, D: b[:, 0].fill_(-4.0))
    _check_write(lambda b, D: b.__setitem__(slice(1, 3), 5.0))


def test_write_visible_through_storage_sharing_views(tpu):
    x = torch.zeros(4, 4)
    t = x.to(tpu)
    a = t[1]
    b = t[:, 2]
    c = t.view(16)
    a.copy_(torch.arange(4.0).to(tpu))
    x[1].copy_(torch.arange(4.0))
    assert torch.equal(b.cpu(), x[:, 2])
    assert torch.equal(c.cpu(), x.view(16))
    b.copy_(torch.full((4,), -1.0).to(tpu))
    x[:, 2].copy_(torch.full((4,), -1.0))
    assert torch.equal(a.cpu(), x[1])
    assert torch.equal(t.cpu(), x)
    assert t.untyped_storage().data_ptr() == a.untyped_storage().data_ptr()


@pytest.mark.parametrize("op", ["copy_", "add_"])
def test_write_into_expanded_raises_like_cpu(op, tpu, require_ops):
    if op == "add_":
        require_ops("aten::add.Tensor")

    def go(e, src):
        return e.copy_(src) if op == "copy_" else e.add_(src)

    cpu_e = torch.arange(3.0).expand(4, 3)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        go(cpu_e, torch.ones(4, 3))
    t = torch.arange(3.0).to(tpu)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        go(t.expand(4, 3), torch.ones(4, 3).to(tpu))
    assert torch.equal(t.cpu(), torch.arange(3.0))  # untouched


def test_partial_overlap_raises_like_cpu(tpu):
    a = torch.arange(6.0)
    with pytest.raises(RuntimeError, match="single memory location"):
        a[1:].copy_(a[:-1])
    t = torch.arange(6.0).to(tpu)
    with pytest.raises(RuntimeError, match="single memory location"):
        t[1:].copy_(t[:-1])


def test_copy_to_self_is_noop(tpu):
    t = torch.arange(6.0).to(tpu)
    t.copy_(t)
    assert torch.equal(t.cpu(), torch.arange(6.0))


def test_out_argument(tpu, require_ops):
    require_ops("aten::add.Tensor")
    a, b = torch.arange(6.0).reshape(2, 3), torch.ones(2, 3) * 2
    o = torch.zeros(2, 3).to(tpu)
    r = torch.add(a.to(tpu), b.to(tpu), out=o)
    assert r is o
    assert torch.equal(o.cpu(), a + b)
    # out= a non-contiguous view of a bigger tensor: only the view changes
    big_cpu = torch.zeros(2, 6)
    torch.add(a, b, out=big_cpu[:, ::2])
    big = torch.zeros(2, 6).to(tpu)
    torch.add(a.to(tpu), b.to(tpu), out=big[:, ::2])
    assert torch.equal(big.cpu(), big_cpu)
    # out= that must be resized (empty out, as ATen recommends)
    e = torch.empty(0).to(tpu)
    torch.add(a.to(tpu), b.to(tpu), out=e)
    assert e.shape == (2, 3) and torch.equal(e.cpu(), a + b)
    # dtype: upcast allowed, narrowing refused like the CPU
    o64 = torch.zeros(2, 3, dtype=torch.float64).to(tpu)
    torch.add(a.to(tpu), b.to(tpu), out=o64)
    assert torch.equal(o64.cpu(), (a + b).double())
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.add(a, b, out=torch.zeros(2, 3, dtype=torch.int64))
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.add(a.to(tpu), b.to(tpu), out=torch.zeros(2, 3, dtype=torch.int64).to(tpu))


def test_resize_grow_keeps_contents(tpu):
    t = torch.arange(4.0).to(tpu)
    t.resize_(2, 5)
    assert t.shape == (2, 5) and t.is_contiguous()
    assert t.untyped_storage().nbytes() >= 40
    assert torch.equal(t.view(-1)[:4].cpu(), torch.arange(4.0))  # new part is uninitialised
    t[1].copy_(torch.full((5,), 7.0).to(tpu))
    assert torch.equal(t[1].cpu(), torch.full((5,), 7.0))
    assert torch.equal(t.view(-1)[:4].cpu(), torch.arange(4.0))


def test_resize_grow_keeps_the_contents_of_a_result_not_computed_yet(tpu):
    # In defer_and_fuse (and strict behind a compile) the product is still
    # pending when the storage grows: its values must come along, not zeros.
    t = torch.arange(4.0).to(tpu) * 2
    t.resize_(2, 5)
    assert torch.equal(t.view(-1)[:4].cpu(), torch.arange(4.0) * 2)
    x = torch.arange(6.0).to(tpu) + 1
    x.untyped_storage().resize_(48)
    assert torch.equal(x.cpu(), torch.arange(6.0) + 1)


def test_zeros_take_no_program_until_used_and_read_as_zeros(tpu):
    # A fresh storage is zero bytes that nothing has made yet: zero_ on it
    # is already done, and its first read stages the zeros from the host.
    import torch_tpu

    torch.tpu.synchronize()
    launches = torch_tpu._C._counters().get("launches", 0)
    z = torch.zeros(3, 5, device=tpu, dtype=torch.bfloat16)
    like = torch.zeros_like(torch.empty(2, 7, device=tpu, dtype=torch.int32))
    assert torch.equal(z.cpu(), torch.zeros(3, 5, dtype=torch.bfloat16))
    assert torch.equal(like.cpu(), torch.zeros(2, 7, dtype=torch.int32))
    assert torch_tpu._C._counters().get("launches", 0) == launches  # no program made them
    like.add_(4)  # an in-place write into the staged zeros
    assert torch.equal(like.cpu(), torch.full((2, 7), 4, dtype=torch.int32))


def test_zero_of_written_or_partly_covered_storage_still_writes_zeros(tpu):
    # Only a whole never-written storage skips zero_; every other zero_ runs.
    x = torch.arange(1.0, 7.0).to(tpu)
    x[1:4].zero_()
    assert torch.equal(x.cpu(), torch.tensor([1.0, 0, 0, 0, 5, 6]))
    filled = torch.empty(4, device=tpu).fill_(2.0)  # pending in defer_and_fuse
    filled.zero_()
    assert torch.equal(filled.cpu(), torch.zeros(4))
    fresh = torch.empty(6, device=tpu)
    fresh[2:4].zero_()
    fresh[:2] = 5.0
    assert torch.equal(fresh.cpu(), torch.tensor([5.0, 5, 0, 0, 0, 0]))
    t = torch.empty(2, 3, device=tpu).t()  # all of a fresh storage, but not contiguous: zero_ runs
    t.zero_()
    t += torch.arange(6.0).reshape(3, 2).to(tpu)
    assert torch.equal(t.cpu(), torch.arange(6.0).reshape(3, 2))


def test_resize_shrink_and_zero(tpu):
    t = torch.arange(10.0).to(tpu)
    t.resize_(2, 2)
    assert torch.equal(t.cpu(), torch.arange(4.0).reshape(2, 2))
    t.resize_(0)
    assert t.numel() == 0 and t.cpu().shape == (0,)
    t.resize_(3)
    assert torch.equal(t.cpu(), torch.arange(3.0))


def test_set_storage_offset_strides(tpu):
    c_src = torch.arange(6.0)
    c = torch.zeros(1).set_(c_src.untyped_storage(), 2, (2, 2), (1, 2))
    src = torch.arange(6.0).to(tpu)
    t = torch.zeros(1).to(tpu).set_(src.untyped_storage(), 2, (2, 2), (1, 2))
    assert t.shape == c.shape and t.stride() == c.stride() and t.storage_offset() == 2
    assert torch.equal(t.cpu(), c)
    # writes through either are seen by the other
    src[3:5].copy_(torch.tensor([-1.0, -2.0]).to(tpu))
    c_src[3:5].copy_(torch.tensor([-1.0, -2.0]))
    assert torch.equal(t.cpu(), c)
    t[1].copy_(torch.tensor([9.0, 8.0]).to(tpu))
    c[1].copy_(torch.tensor([9.0, 8.0]))
    assert torch.equal(src.cpu(), c_src)


def test_set_tensor_and_empty(tpu):
    a = torch.arange(5.0).to(tpu)
    b = torch.zeros(2).to(tpu)
    b.set_(a)
    assert b.shape == a.shape and torch.equal(b.cpu(), torch.arange(5.0))
    a[0:1].copy_(torch.tensor([100.0]).to(tpu))
    assert b[0].item() == 100.0
    b.set_()
    assert b.numel() == 0
    assert torch.equal(a.cpu(), torch.tensor([100.0, 1, 2, 3, 4]))


def test_set_rejects_cpu_storage(tpu):
    t = torch.zeros(2).to(tpu)
    with pytest.raises(RuntimeError):
        t.set_(torch.arange(4.0).untyped_storage())


def test_empty_then_partial_writes(tpu):
    e = torch.empty(4, 6, device=tpu)
    assert e.shape == (4, 6) and e.device == tpu
    e[1].copy_(torch.arange(6.0).to(tpu))
    e[:, 4].copy_(torch.tensor([-1.0, -2.0, -3.0, -4.0]))
    assert torch.equal(e[1, :4].cpu(), torch.arange(4.0))
    assert torch.equal(e[:, 4].cpu(), torch.tensor([-1.0, -2.0, -3.0, -4.0]))
    assert e[1, 5].item() == 5.0


@pytest.mark.parametrize(
    "dtype",
    [
        torch.float32, torch.int64, torch.bool, torch.float16, torch.int8,
        torch.complex64,
    ],
    ids=str,
)
def test_empty_partial_write_each_dtype(dtype, tpu):
    e = torch.empty(6, dtype=dtype, device=tpu)
    src = torch.tensor([1, 0, 3], dtype=dtype) if not dtype.is_complex else torch.tensor([1 + 1j, 2 - 2j, 3j])
    e[2:5].copy_(src.to(tpu))
    assert torch.equal(e[2:5].cpu(), src)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool, torch.bfloat16], ids=str)
def test_empty_strided_and_empty_like(dtype, tpu):
    e = torch.empty_strided((3, 4), (1, 3), dtype=dtype, device=tpu)
    assert e.stride() == (1, 3) and e.dtype == dtype
    src = torch.arange(12).reshape(3, 4).to(dtype)
    e.copy_(src.to(tpu))
    assert torch.equal(e.cpu(), src)
    f = torch.empty_like(e)
    assert f.shape == e.shape and f.device == tpu and f.dtype == dtype


def test_clone_and_contiguous_are_independent(tpu):
    x = torch.arange(12.0).reshape(3, 4)
    t = x.to(tpu)
    c = t.t().contiguous()
    assert c.is_contiguous() and torch.equal(c.cpu(), x.t())
    k = t.clone()
    t[0].copy_(torch.zeros(4).to(tpu))
    assert torch.equal(k.cpu(), x)
    assert torch.equal(c.cpu(), x.t())
