"""torch.histc and torch.histogram on tpu against the CPU: explicit and data-derived ranges,
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


def test_histogram_ranges_differing_in_small_digits_each_get_their_own_bins(tpu):
    # The range is baked into the program, so its key must tell apart ranges
    # that round to the same few decimals (0.0000001 and 0.0000002).
    x = torch.tensor([0.5e-7, 1.5e-7, 0.2e-7])
    for hi in (1e-7, 2e-7, 2e-7 + 1e-22):
        want = torch.histogram(x, bins=2, range=(0.0, hi))
        got = torch.histogram(x.to(tpu), bins=2, range=(0.0, hi))
        for g, w in zip(got, want):
            torch.testing.assert_close(g.cpu(), w, rtol=0, atol=0)


@pytest.mark.parametrize("data", [[1.0, NAN], [1.0, INF], [-INF, 2.0]], ids=["nan", "inf", "minus_inf"])
def test_histc_non_finite_data_range_raises_as_on_cpu(data, tpu):
    # The data's range is read back first (a host sync), as the CPU checks it.
    for d in ("cpu", tpu):
        with pytest.raises(RuntimeError, match=r"torch.histc: range of \[.*\] is not finite"):
            torch.histc(torch.tensor(data).to(d), bins=3)


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


# ---- torch.histogram: (hist, bin_edges)

G = torch.Generator().manual_seed(5)
HISTOGRAM = [
    ("data_range", torch.tensor([1.0, 2, 2, 3, 10]), dict(bins=4)),
    ("one_value_widened", torch.tensor([2.0, 2]), dict(bins=2)),
    ("empty", torch.tensor([]), dict(bins=3)),
    ("empty_density", torch.tensor([]), dict(bins=3, density=True)),
    ("range_edges_nan_inf", torch.tensor([0.0, 0.25, 0.5, 1.0, 1.5, -0.1, NAN, INF]), dict(bins=4, range=(0.0, 1.0))),
    ("weight_density", torch.randn(100, generator=G), dict(bins=9, weight=torch.rand(100, generator=G), density=True)),
    ("float64_2d", torch.randn(20, 30, generator=G).double(), dict(bins=17, range=(-1.0, 2.0))),
    ("edges", torch.tensor([0.0, 1, 1, 4, 5, 6, -1]), dict(bins=torch.tensor([0.0, 1, 5]))),
    ("edges_weight_density", torch.randn(50, generator=G),
     dict(bins=torch.tensor([-2.0, -0.5, 0, 0.1, 3]), weight=torch.rand(50, generator=G), density=True)),
    ("edges_decreasing", torch.tensor([0.0, 2, 4]), dict(bins=torch.tensor([5.0, 1, 0]))),
    ("edges_empty_input", torch.tensor([]), dict(bins=torch.tensor([0.0, 1, 5]), density=True)),
]


@pytest.mark.parametrize("name,x,kw", HISTOGRAM, ids=[c[0] for c in HISTOGRAM])
def test_histogram_matches_cpu(name, x, kw, tpu):
    want = torch.histogram(x, **kw)
    got = torch.histogram(x.to(tpu), **{k: v.to(tpu) if isinstance(v, torch.Tensor) else v for k, v in kw.items()})
    for g, w in zip(got, want):
        assert g.device == tpu and g.dtype == w.dtype
        torch.testing.assert_close(g.cpu(), w, equal_nan=True)


@pytest.mark.parametrize("data", [[1.0, NAN], [1.0, INF], [-INF, 2.0]], ids=["nan", "inf", "minus_inf"])
def test_histogram_non_finite_data_range_raises_as_on_cpu(data, tpu):
    with pytest.raises(RuntimeError) as want:
        torch.histogram(torch.tensor(data), bins=3)
    with pytest.raises(RuntimeError) as got:
        torch.histogram(torch.tensor(data).to(tpu), bins=3)
    assert str(got.value).splitlines()[0] == str(want.value).splitlines()[0]


@pytest.mark.parametrize("rng", [(0.0, INF), (NAN, 1.0), (-INF, 0.0), (INF, 1.0)])
def test_histogram_non_finite_range_raises_as_on_cpu(rng, tpu):
    with pytest.raises(RuntimeError) as want:
        torch.histogram(torch.tensor([0.5]), bins=3, range=rng)
    with pytest.raises(RuntimeError) as got:
        torch.histogram(torch.tensor([0.5]).to(tpu), bins=3, range=rng)
    assert str(got.value).splitlines()[0] == str(want.value).splitlines()[0]


@pytest.mark.parametrize("args,kw", [
    ((torch.tensor([1, 2]), 3), {}),
    ((torch.tensor([1.0, 2]).half(), 3), {}),
    ((torch.tensor([1.0, 2]), 0), {}),
    ((torch.tensor([1.0, 2]), 3), dict(range=(2.0, 1.0))),
    ((torch.tensor([1.0, 2]), 3), dict(range=(0.0, INF))),
    ((torch.tensor([1.0, 2]), 3), dict(weight=torch.ones(3))),
    ((torch.tensor([1.0, 2]), 3), dict(weight=torch.ones(2).double())),
    ((torch.tensor([1.0, 2]), torch.tensor([1.0])), {}),
    ((torch.tensor([1.0, 2]), torch.tensor([[0.0, 1]])), {}),
    ((torch.tensor([1.0, 2]), torch.tensor([0.0, 1]).double()), {}),
])
def test_histogram_argument_errors_as_on_cpu(args, kw, tpu):
    with pytest.raises(Exception) as cpu_err:
        torch.histogram(*args, **kw)
    with pytest.raises(type(cpu_err.value)) as dev_err:
        torch.histogram(*[a.to(tpu) if isinstance(a, torch.Tensor) else a for a in args],
                        **{k: v.to(tpu) if isinstance(v, torch.Tensor) else v for k, v in kw.items()})
    assert str(cpu_err.value).splitlines()[0] in str(dev_err.value)
