"""float8_e4m3fn and float8_e5m2 tensors on tpu (hlo/float8.h): held bit for bit, cast
from and to every float width and int64 as the CPU rounds (e4m3fn saturating at 448
as PyTorch does, where StableHLO's convert gives NaN; e5m2 overflowing to infinity),
constants, products in an f32 accumulator, the ops the CPU runs on float8, and
torch._scaled_mm against the CPU's kernel."""
import pytest
import torch

F8 = [torch.float8_e4m3fn, torch.float8_e5m2]
# Each format's edges: signed zeros, its subnormals, the ties around its largest
# normal (448 and 57344), past the range, infinities and NaN.
EDGES = torch.tensor([0.0, -0.0, 1.0, -2.5, 1e-3, 1e-5, 3e-5, 1e-9, 448.0, 460.0, 464.0, 470.0, 479.0, 480.0,
                      500.0, 57344.0, 61439.0, 61440.0, 70000.0, -1e6, float("inf"), -float("inf"), float("nan")],
                     dtype=torch.float64)


def same(got, want):
    """Equal bit for bit, except that any NaN equals any NaN (their payloads differ
    between XLA's convert and PyTorch's)."""
    got = got.cpu()
    assert got.dtype == want.dtype
    gn, wn = got.float().isnan(), want.float().isnan()
    assert torch.equal(gn, wn), (got, want)
    assert torch.equal(got.view(torch.uint8)[~gn], want.view(torch.uint8)[~wn]), (got, want)


@pytest.mark.parametrize("dtype", F8)
def test_held_bit_for_bit(dtype):
    every = torch.arange(256, dtype=torch.uint8).view(dtype)
    same(every.to("tpu"), every)
    same(every.to("tpu").view(torch.uint8).view(dtype), every)


@pytest.mark.parametrize("dtype", F8)
@pytest.mark.parametrize("source", [torch.float64, torch.float32, torch.bfloat16, torch.float16])
def test_casts_round_as_the_cpu(dtype, source):
    x = EDGES.to(source)
    same(x.to("tpu").to(dtype), x.to(dtype))
    every = torch.arange(256, dtype=torch.uint8).view(dtype)
    torch.testing.assert_close(every.to("tpu").to(source).cpu(), every.to(source), equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", F8)
def test_integers_and_constants(dtype):
    ints = torch.tensor([0, 3, -17, 300, 1000, -100000, 2 ** 40])
    same(ints.to("tpu").to(dtype), ints.to(dtype))
    top = 448.0 if dtype == torch.float8_e4m3fn else 57344.0
    for v in (1.0, -0.3, 1e-3, 300.0, 3e-5, top):
        same(torch.full((3,), v, dtype=dtype, device="tpu"), torch.full((3,), v, dtype=dtype))
    same(torch.zeros(4, dtype=dtype, device="tpu"), torch.zeros(4, dtype=dtype))


@pytest.mark.parametrize("dtype", F8)
def test_ops_the_cpu_runs_on_float8(dtype):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(8, 8, generator=g).to(dtype)
    y = torch.randn(8, 8, generator=g).to(dtype)
    tx, ty = x.to("tpu"), y.to("tpu")
    same(tx * ty, x * y)
    same(tx.abs(), x.abs())
    same(tx @ ty, x @ y)  # an f32 accumulator, one rounding
    same(torch.cat([tx, ty.t()]), torch.cat([x, y.t()]))
    same(tx[[0, 3, 5]], x[[0, 3, 5]])
    same(torch.where(tx == ty, tx, ty.abs()), torch.where(x == y, x, y.abs()))
    assert torch.equal((tx == ty).cpu(), x == y)
    same(tx.clone().t().contiguous(), x.t().contiguous())


def scaled_mm_inputs(a_dtype=torch.float8_e4m3fn, b_dtype=torch.float8_e4m3fn):
    g = torch.Generator().manual_seed(1)
    a = torch.randn(16, 32, generator=g).to(a_dtype)
    b = torch.randn(64, 32, generator=g).to(b_dtype).t()  # column-major, as the CPU's kernel takes it
    return a, b


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2])
@pytest.mark.parametrize("scales", ["tensor", "row"])
@pytest.mark.parametrize("bias", [False, True])
def test_scaled_mm_equals_the_cpu(out_dtype, scales, bias):
    a, b = scaled_mm_inputs()
    g = torch.Generator().manual_seed(2)
    if scales == "tensor":
        sa, sb = torch.tensor(0.5), torch.tensor(2.0)
    else:
        sa, sb = torch.rand(16, 1, generator=g) + 0.5, torch.rand(1, 64, generator=g) + 0.5
    kw = dict(out_dtype=out_dtype)
    if bias and out_dtype == torch.bfloat16:
        kw["bias"] = torch.randn(64, generator=g).bfloat16()
    if out_dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        kw["scale_result"] = torch.tensor(4.0)
    want = torch._scaled_mm(a, b, sa, sb, **kw)
    on = {k: v.to("tpu") if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
    got = torch._scaled_mm(a.to("tpu"), b.to("tpu"), sa.to("tpu"), sb.to("tpu"), **on).cpu()
    assert got.dtype == want.dtype
    # One f32 product summed in another order, then one rounding to out_dtype: at most
    # one step of the result's format apart.
    step = {torch.float32: 1e-5, torch.bfloat16: 2 ** -7, torch.float8_e4m3fn: 2 ** -3, torch.float8_e5m2: 2 ** -2}
    torch.testing.assert_close(got.float(), want.float(), rtol=step[out_dtype], atol=1e-4)


def test_scaled_mm_mixed_formats_and_default_dtype():
    a, b = scaled_mm_inputs(torch.float8_e5m2, torch.float8_e4m3fn)
    s = torch.tensor(1.0)
    want = torch._scaled_mm(a, b, s, s, out_dtype=torch.float32)
    got = torch._scaled_mm(a.to("tpu"), b.to("tpu"), s.to("tpu"), s.to("tpu"), out_dtype=torch.float32)
    torch.testing.assert_close(got.cpu(), want)
    assert torch._scaled_mm(a.to("tpu"), b.to("tpu"), s.to("tpu"), s.to("tpu")).dtype == a.dtype


def test_scaled_mm_bad_inputs_name_the_op():
    a, b = scaled_mm_inputs()
    ta, tb, s = a.to("tpu"), b.to("tpu"), torch.tensor(1.0, device="tpu")
    with pytest.raises(ValueError, match="_scaled_mm: Invalid scaling configuration"):
        torch._scaled_mm(ta, tb, torch.ones(2, device="tpu"), s, out_dtype=torch.float32).cpu()
    with pytest.raises(ValueError, match="_scaled_mm: Invalid scaling configuration"):
        torch._scaled_mm(ta, tb, torch.ones(16, 1, device="tpu"), s, out_dtype=torch.float32).cpu()
    with pytest.raises(ValueError, match="_scaled_mm: expected float8 self and mat2"):
        torch._scaled_mm(ta.float(), tb, s, s, out_dtype=torch.float32).cpu()
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        torch._scaled_mm(ta, ta, s, s, out_dtype=torch.float32).cpu()


def test_jax_op_takes_and_returns_float8():
    jnp = pytest.importorskip("jax.numpy")
    from torch_tpu.pallas import jax_op
    op = jax_op("test_float8::widen_and_back", lambda x: (x.astype(jnp.float32) * 2).astype(jnp.float8_e5m2))
    x = torch.randn(4, 4).to(torch.float8_e4m3fn)
    same(op(x.to("tpu")), (x.float() * 2).to(torch.float8_e5m2))
