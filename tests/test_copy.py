"""Copies between the host and tpu, and within tpu; printing and host reads."""
import warnings

import pytest
import torch

DTYPES = [
    torch.float32, torch.float64, torch.bfloat16, torch.float16,
    torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8,
    torch.bool, torch.complex64, torch.complex128,
]


def _sample(dtype, shape=(3, 5)):
    g = torch.Generator().manual_seed(0)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_complex:
        return torch.randn(shape, dtype=dtype, generator=g)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 100).to(dtype)
    info = torch.iinfo(dtype)
    x = torch.randint(info.min, info.max, shape, dtype=torch.int64, generator=g).to(dtype)
    x.view(-1)[0] = info.min
    x.view(-1)[1] = info.max
    return x


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_round_trip_every_dtype(dtype, tpu):
    x = _sample(dtype)
    t = x.to(tpu)
    assert t.device == tpu and t.dtype == dtype and t.shape == x.shape
    back = t.cpu()
    assert back.device.type == "cpu" and back.dtype == dtype
    assert torch.equal(back, x)


def test_round_trip_special_floats(tpu):
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 1e-40, 3.4e38])
    back = x.to(tpu).cpu()
    torch.testing.assert_close(back, x, equal_nan=True, rtol=0, atol=0)
    assert torch.signbit(back[3])  # -0.0 keeps its sign


def test_round_trip_wide_integers(tpu):
    x = torch.tensor([2**62 + 1, -(2**63), 2**63 - 1])
    assert x.to(tpu).cpu().tolist() == x.tolist()


@pytest.mark.parametrize("shape", [(), (0,), (0, 3), (1,), (2, 1, 3)], ids=str)
def test_round_trip_shapes(shape, tpu):
    x = torch.arange(int(torch.tensor(shape).prod().item()) if shape else 1, dtype=torch.float32)
    x = x.reshape(shape)
    back = x.to(tpu).cpu()
    assert back.shape == x.shape and torch.equal(back, x)


@pytest.mark.parametrize(
    "make",
    [
        lambda x: x.t(),
        lambda x: x[::2, 1::3],
        lambda x: x[1:, :-1],
        lambda x: x[:, 2],
        lambda x: x[0:1].expand(5, 6),
        lambda x: x.unsqueeze(0).expand(2, 4, 6).transpose(0, 2),
        lambda x: x.as_strided((3, 3), (7, 1), 2),
    ],
    ids=["transposed", "step_slices", "offset_slice", "column", "expanded", "expand_transpose", "as_strided"],
)
def test_non_contiguous_host_source(make, tpu):
    x = torch.arange(24.0).reshape(4, 6)
    src = make(x)
    t = src.to(tpu)
    assert t.shape == src.shape
    assert torch.equal(t.cpu(), src.contiguous())


def test_non_blocking(tpu):
    x = torch.randn(64, 8)
    t = x.to(tpu, non_blocking=True)
    back = t.to("cpu", non_blocking=True)
    torch.tpu.synchronize()
    assert torch.equal(back, x)


def test_copy_into_host_view(tpu):
    t = torch.arange(6.0).reshape(3, 2).to(tpu)
    c = torch.zeros(2, 3)
    c.t().copy_(t)
    assert torch.equal(c, torch.arange(6.0).reshape(3, 2).t())


def test_tpu_to_tpu_copy(tpu):
    a = torch.arange(8.0).to(tpu)
    b = torch.zeros(8).to(tpu)
    b.copy_(a)
    assert torch.equal(b.cpu(), torch.arange(8.0))
    # they are independent afterwards
    a[0:2] = torch.tensor([-1.0, -2.0]).to(tpu)
    assert torch.equal(b.cpu(), torch.arange(8.0))
    assert torch.equal(a.cpu()[:3], torch.tensor([-1.0, -2.0, 2.0]))


def test_tpu_copy_into_slice(tpu):
    ref = torch.zeros(3, 5)
    d = ref.to(tpu)
    src = torch.arange(6.0).reshape(2, 3)
    d[1:3, 1:4].copy_(src.to(tpu))
    ref[1:3, 1:4].copy_(src)
    assert torch.equal(d.cpu(), ref)
    d[:, ::2].copy_(torch.full((3, 3), 9.0).to(tpu))
    ref[:, ::2].copy_(torch.full((3, 3), 9.0))
    assert torch.equal(d.cpu(), ref)


def test_tpu_copy_with_dtype_change(tpu):
    src = torch.tensor([1.7, -2.2, 3.9, -0.5])
    d = torch.zeros(4, dtype=torch.int32).to(tpu)
    d.copy_(src.to(tpu))
    ref = torch.zeros(4, dtype=torch.int32).copy_(src)
    assert d.dtype == torch.int32 and torch.equal(d.cpu(), ref)
    # into a slice of a float64 tensor, from int64
    e = torch.zeros(6, dtype=torch.float64).to(tpu)
    e[2:5].copy_(torch.tensor([5, 6, 7]).to(tpu))
    assert torch.equal(e.cpu(), torch.tensor([0, 0, 5, 6, 7, 0], dtype=torch.float64))


def test_host_to_tpu_view_with_dtype_change(tpu):
    d = torch.zeros(2, 4).to(tpu)
    src = torch.tensor([[1.5, 2.5], [3.5, 4.5]], dtype=torch.float64)
    d[:, ::2].copy_(src)
    ref = torch.zeros(2, 4)
    ref[:, ::2].copy_(src)
    assert torch.equal(d.cpu(), ref)


@pytest.mark.parametrize("dst_dtype", [torch.float32, torch.int32, torch.float64])
def test_copy_broadcasting(dst_dtype, tpu):
    row = torch.tensor([1.25, -2.0, 3.0])
    ref = torch.zeros(2, 3, dtype=dst_dtype).copy_(row)
    d = torch.zeros(2, 3, dtype=dst_dtype).to(tpu)
    d.copy_(row.to(tpu))  # tpu -> tpu
    assert torch.equal(d.cpu(), ref)
    d2 = torch.zeros(2, 3, dtype=dst_dtype).to(tpu)
    d2.copy_(row)  # cpu -> tpu
    assert torch.equal(d2.cpu(), ref)
    col = torch.tensor([[4.0], [5.0]])
    d.copy_(col.to(tpu))
    assert torch.equal(d.cpu(), torch.zeros(2, 3, dtype=dst_dtype).copy_(col))


def test_copy_shape_mismatch_raises_like_cpu(tpu):
    with pytest.raises(RuntimeError):
        torch.zeros(3).copy_(torch.zeros(4))
    with pytest.raises(RuntimeError):
        torch.zeros(3).to(tpu).copy_(torch.zeros(4).to(tpu))
    with pytest.raises(RuntimeError):
        torch.zeros(3).to(tpu).copy_(torch.zeros(4))


@pytest.mark.parametrize(
    "src_dtype,dst_dtype",
    [
        (torch.float32, torch.int64),
        (torch.float32, torch.bfloat16),
        (torch.float32, torch.float16),
        (torch.float64, torch.float32),
        (torch.int32, torch.float32),
        (torch.float32, torch.bool),
        (torch.bool, torch.float32),
        (torch.int64, torch.int8),
        (torch.float32, torch.complex64),
    ],
    ids=str,
)
def test_to_dtype_on_tpu(src_dtype, dst_dtype, tpu):
    x = torch.tensor([0.0, 1.0078125, -2.75, 3.14159, 100.5, -0.0, 1e-6]).to(src_dtype)
    r = x.to(tpu).to(dst_dtype)
    assert r.device == tpu and r.dtype == dst_dtype
    assert torch.equal(r.cpu(), x.to(dst_dtype))


def test_complex_to_real_takes_real_part(tpu):
    x = torch.tensor([1 + 2j, -3.5 - 1j], dtype=torch.complex64)
    with warnings.catch_warnings():  # the CPU warns once per process
        warnings.simplefilter("ignore")
        ref = x.to(torch.float32)
    r = x.to(tpu).to(torch.float32)
    assert torch.equal(r.cpu(), ref)


@pytest.mark.parametrize(
    "x,expected",
    [
        (torch.tensor(3.0), "tensor(3., device='tpu:0')"),
        (torch.tensor([1.0, 2.5]), "tensor([1.0000, 2.5000], device='tpu:0')"),
        (torch.arange(3, dtype=torch.int32), "tensor([0, 1, 2], device='tpu:0', dtype=torch.int32)"),
        (torch.tensor([True, False]), "tensor([ True, False], device='tpu:0')"),
        (torch.tensor([1.5], dtype=torch.bfloat16), "tensor([1.5000], device='tpu:0', dtype=torch.bfloat16)"),
        (torch.tensor([1 + 2j]), "tensor([1.+2.j], device='tpu:0')"),
        (torch.zeros(0, 3), "tensor([], device='tpu:0', size=(0, 3))"),
        (torch.tensor([]), "tensor([], device='tpu:0')"),
    ],
    ids=["scalar", "float", "int32", "bool", "bf16", "complex", "empty2d", "empty"],
)
def test_repr_hand_written(x, expected, tpu):
    t = x.to(tpu)
    assert repr(t) == expected
    assert str(t) == expected


@pytest.mark.parametrize(
    "x",
    [
        torch.arange(2000.0),
        torch.randn(4, 5, 6),
        torch.tensor([[1e-8, 1e8], [float("nan"), -float("inf")]]),
        torch.arange(12).reshape(3, 4).t(),
    ],
    ids=["summarised", "3d", "sci_nan_inf", "transposed_int"],
)
def test_repr_matches_cpu(x, tpu, capsys):
    t = x.to(tpu)
    expected = repr(x)
    assert expected.endswith(")")
    # insert device where torch puts it: right after the values
    if "dtype=" in expected:
        i = expected.index(", dtype=")
    else:
        i = len(expected) - 1
    expected = expected[:i] + ", device='tpu:0'" + expected[i:]
    # torch may wrap the suffix onto its own line when the last line is long,
    # so compare token by token
    assert repr(t).split() == expected.split()
    print(t)
    assert capsys.readouterr().out == repr(t) + "\n"


def test_repr_requires_grad(tpu):
    x = torch.tensor([1.0, 2.0])
    t = x.to(tpu).requires_grad_()
    assert repr(t) == "tensor([1., 2.], device='tpu:0', requires_grad=True)"


def test_item(tpu):
    assert torch.tensor(3.5).to(tpu).item() == 3.5
    assert torch.tensor([7]).to(tpu).item() == 7
    assert torch.tensor(True).to(tpu).item() is True
    assert torch.tensor(1 + 2j).to(tpu).item() == 1 + 2j
    assert torch.tensor(1.5, dtype=torch.bfloat16).to(tpu).item() == 1.5
    assert torch.tensor(2**40).to(tpu).item() == 2**40
    # item of a view
    t = torch.arange(10.0).to(tpu)
    assert t[7].item() == 7.0
    assert t.reshape(2, 5)[1, 3].item() == 8.0


def test_item_many_elements_raises_like_cpu(tpu):
    with pytest.raises(RuntimeError) as cpu_err:
        torch.ones(2).item()
    with pytest.raises(RuntimeError) as tpu_err:
        torch.ones(2).to(tpu).item()
    assert str(tpu_err.value) == str(cpu_err.value)


def test_tolist(tpu):
    x = torch.arange(12).reshape(3, 4)
    assert x.to(tpu).tolist() == x.tolist()
    assert x.to(tpu).t().tolist() == x.t().tolist()
    y = torch.tensor([[1.5, -2.0]], dtype=torch.float64)
    assert y.to(tpu).tolist() == [[1.5, -2.0]]
    assert torch.tensor(True).to(tpu).tolist() is True


def test_numpy_raises_type_error(tpu):
    t = torch.arange(3.0).to(tpu)
    with pytest.raises(TypeError, match="can't convert tpu:0 device type tensor to numpy"):
        t.numpy()
    assert (t.cpu().numpy() == [0.0, 1.0, 2.0]).all()
