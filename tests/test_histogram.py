"""torch.histc on tpu against the CPU: explicit and data-derived ranges,
edge values, NaN and infinities, half types, integer ids (counted as CUDA does;
the CPU refuses them, so its float result is the reference), and the CPU's
argument errors."""
import pytest
import torch

NAN, INF = float("nan"), float("inf")

CASES = [
    ("specials", torch.tensor([1.0, 2, 1, NAN, 4, 5, INF, -INF]), dict(bins=4, min=0, max=5)),
    ("data_range", torch.tensor([1.0, 2, 3]), dict(bins=3)),
    ("one_value_widened", torch.tensor([2.0, 2]), dict(bins=3)),
    ("bin_edges", torch.tensor([0.3, 0.6, 0.9, 0.0]), dict(bins=3, min=0, max=0.9)),
    ("empty", torch.tensor([]), dict(bins=3)),
    ("normal", torch.randn(1000, generator=torch.Generator().manual_seed(0)), dict(bins=7)),
    ("float64_2d", torch.randn(50, 20, generator=torch.Generator().manual_seed(1)).double(),
     dict(bins=13, min=-1, max=1.5)),
    ("experts", torch.randint(0, 8, (4096,), generator=torch.Generator().manual_seed(2)).float(),
     dict(bins=8, min=0, max=7)),
    ("half", torch.tensor([1.0, 2, 3, 2.5]).half(), dict(bins=3, min=0, max=3)),
    ("bfloat16_data_range", torch.tensor([1.0, 2, 3, -7]).bfloat16(), dict(bins=5)),
]


@pytest.mark.parametrize("name,x,kw", CASES, ids=[c[0] for c in CASES])
def test_histc_matches_cpu(name, x, kw, tpu):
    want = torch.histc(x, **kw)
    got = torch.histc(x.to(tpu), **kw)
    assert got.dtype == want.dtype and got.device == tpu
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)


def test_histc_counts_tokens_per_expert_as_a_moe_router_does(tpu):
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(64, 6, generator=g)
    top = logits.topk(2, dim=-1).indices
    want = torch.histc(top.float(), bins=6, min=0, max=5)
    got = torch.histc(top.to(tpu).float(), bins=6, min=0, max=5)
    torch.testing.assert_close(got.cpu(), want)
    assert int(got.sum().item()) == 128


def test_histc_out_variant(tpu):
    x = torch.tensor([0.5, 1.5, 1.7])
    out = torch.empty(2, device=tpu)
    torch.histc(x.to(tpu), bins=2, min=0, max=2, out=out)
    torch.testing.assert_close(out.cpu(), torch.histc(x, bins=2, min=0, max=2))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8])
@pytest.mark.parametrize("kw", [dict(bins=8, min=0, max=7), dict(bins=5), dict(bins=3, min=2, max=4)])
def test_histc_of_integer_ids_counts_like_float_ids(dtype, kw, tpu):
    x = torch.randint(0, 9, (500,), generator=torch.Generator().manual_seed(4)).to(dtype)
    got = torch.histc(x.to(tpu), **kw)
    assert got.dtype == dtype
    torch.testing.assert_close(got.cpu(), torch.histc(x.float(), **kw).to(dtype))


def test_histc_refuses_bool_and_complex(tpu):
    for x in (torch.tensor([True]), torch.tensor([1j])):
        with pytest.raises(NotImplementedError, match="histc"):
            torch.histc(x.to(tpu), bins=2)


def test_histc_non_finite_data_range_is_nan_not_plausible(tpu):
    # The CPU raises; the device cannot, so every count is NaN.
    with pytest.raises(RuntimeError, match="not finite"):
        torch.histc(torch.tensor([1.0, NAN]), bins=3)
    assert torch.histc(torch.tensor([1.0, NAN]).to(tpu), bins=3).isnan().all()
    assert torch.histc(torch.tensor([1.0, INF]).to(tpu), bins=3).isnan().all()


@pytest.mark.parametrize("x,kw,err,match", [
    (torch.tensor([1.0]), dict(bins=0), RuntimeError, "bins must be > 0"),
    (torch.tensor([1.0]), dict(bins=2, min=3, max=1), RuntimeError, "max must be larger than min"),
    (torch.tensor([1.0]), dict(bins=2, min=NAN, max=1), RuntimeError, "is not finite"),
])
def test_histc_argument_errors_as_on_cpu(x, kw, err, match, tpu):
    with pytest.raises(err, match=match):
        torch.histc(x, **kw)
    with pytest.raises(err, match=match):
        torch.histc(x.to(tpu), **kw)
