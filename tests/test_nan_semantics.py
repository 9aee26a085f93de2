"""NaN, ±inf and signed zero through elementwise and reduction ops, against the CPU.

Every pair of special values (NaN, ±inf, ±0, tiny, ordinary) goes through each
op on the CPU and on tpu; NaN positions, infinities, finite values and the sign
of zeros must agree. Plugins differ on whether stablehlo.maximum/minimum return
a NaN of either operand, so the lowerings propagate it explicitly (nan_max).
"""
import pytest
import torch
import torch.nn.functional as F

import torch_tpu

SPECIAL = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1.0, -1.0, 2.5, -0.5, 1e-30, 100.0]
X = torch.tensor(SPECIAL)
A, B = X.repeat_interleave(len(SPECIAL)), X.repeat(len(SPECIAL))
# Rows of special values, one with a NaN, one with none.
M = torch.stack([X, torch.where(X.isnan(), 1.0, X), torch.arange(1.0, 12.0)])

# The CPU itself answers ±0 ties of these either way (its vectorized and scalar
# loops pick different operands; float and double gelu(-0) differ), so only the
# zero's value is compared for them.
ZERO_SIGN_UNDEFINED = {"clamp_max_t", "clamp_min_t", "gelu", "maximum", "minimum"}
# The CPU's own float gelu(+inf) depends on its loop: the AVX512 one gives NaN,
# the scalar and double ones inf (the limit). The reference is the double loop's.
REFERENCE_IN_DOUBLE = {"gelu"}

UNARY = ["abs", "acos", "acosh", "angle", "asin", "asinh", "atan", "atanh", "ceil", "cos", "cosh",
         "deg2rad", "digamma", "erf", "erfc", "erfinv", "exp", "exp2", "expm1", "floor", "frac",
         "i0", "isfinite", "isinf", "isnan", "isneginf", "isposinf", "lgamma", "log", "log10",
         "log1p", "log2", "logit", "nan_to_num", "neg", "positive", "rad2deg", "reciprocal", "relu",
         "round", "rsqrt", "sgn", "sigmoid", "sign", "signbit", "sin", "sinc", "sinh", "sqrt",
         "square", "tan", "tanh", "trunc"]
FUNCTIONAL = ["celu", "elu", "gelu", "hardshrink", "hardsigmoid", "hardswish", "hardtanh",
              "leaky_relu", "logsigmoid", "mish", "relu6", "selu", "silu", "softplus", "softshrink",
              "softsign", "tanhshrink"]
BINARY = ["add", "atan2", "copysign", "div", "eq", "floor_divide", "fmax", "fmin", "fmod", "ge",
          "gt", "heaviside", "hypot", "ldexp", "le", "logaddexp", "logaddexp2", "lt", "maximum",
          "minimum", "mul", "ne", "nextafter", "pow", "remainder", "sub", "xlogy"]
REDUCTIONS = ["all", "amax", "amin", "any", "argmax", "argmin", "count_nonzero", "logsumexp", "max",
              "mean", "median", "min", "nanmean", "nanmedian", "nansum", "norm", "prod", "std", "sum",
              "var"]
SCANS = ["cummax", "cummin", "cumprod", "cumsum", "logcumsumexp"]

CASES = {}
for _n in UNARY:
    CASES[_n] = (getattr(torch, _n), (X,))
for _n in FUNCTIONAL:
    CASES[_n] = (getattr(F, _n), (X,))
for _n in BINARY:
    CASES[_n] = (getattr(torch, _n), (A, B))
CASES["clamp_min_t"] = (lambda a, b: torch.clamp(a, b, None), (A, B))
CASES["clamp_max_t"] = (lambda a, b: torch.clamp(a, None, b), (A, B))
CASES["clamp_nan_bound"] = (lambda a: torch.clamp(a, None, float("nan")), (X,))
CASES["clamp_nan_min"] = (lambda a: torch.clamp(a, float("nan")), (X,))
CASES["clamp_numbers"] = (lambda a: torch.clamp(a, -1, 1), (X,))
for _n in REDUCTIONS:
    if _n != "logsumexp":  # needs a dim
        CASES[_n + "_all"] = (getattr(torch, _n), (M,))
    CASES[_n + "_dim"] = ((lambda f: lambda t: f(t, 1))(getattr(torch, _n)), (M,))
for _n in SCANS:
    CASES[_n] = ((lambda f: lambda t: f(t, 1))(getattr(torch, _n)), (M,))
CASES["aminmax_dim"] = (lambda t: torch.aminmax(t, dim=1), (M,))
CASES["sort"] = (lambda t: torch.sort(t, 1), (M,))
CASES["sort_descending"] = (lambda t: torch.sort(t, 1, descending=True), (M,))
CASES["topk"] = (lambda t: torch.topk(t, 3, dim=1), (M,))
CASES["topk_smallest"] = (lambda t: torch.topk(t, 3, dim=1, largest=False), (M,))


def _first(r):
    return r[0] if isinstance(r, (tuple, list)) else r


def assert_same_special_values(name, got, want):
    assert got.dtype == want.dtype, name
    if not want.is_floating_point():
        assert torch.equal(got, want), f"{name}: {got.tolist()} vs {want.tolist()}"
        return
    nan = want.isnan()
    assert torch.equal(got.isnan(), nan), f"{name}: NaN at {got.isnan().tolist()} vs {nan.tolist()}"
    g, w = got[~nan], want[~nan]
    assert torch.equal(g.isinf() & (g > 0), w.isinf() & (w > 0)), f"{name}: +inf differs"
    assert torch.equal(g.isinf() & (g < 0), w.isinf() & (w < 0)), f"{name}: -inf differs"
    fin = w.isfinite()
    torch.testing.assert_close(g[fin], w[fin], rtol=1e-4, atol=1e-5, msg=name)
    if name not in ZERO_SIGN_UNDEFINED:
        zero = fin & (w == 0)
        assert torch.equal(torch.signbit(g[zero]), torch.signbit(w[zero])), f"{name}: sign of zero"


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_special_values_match_cpu(name, mode):
    fn, args = CASES[name]
    try:
        want = fn(*args) if name not in REFERENCE_IN_DOUBLE else fn(*[a.double() for a in args]).float()
    except (RuntimeError, NotImplementedError) as e:
        with pytest.raises(type(e)):
            with torch_tpu.eager_mode(mode):
                fn(*[a.to("tpu") for a in args])
        return
    with torch_tpu.eager_mode(mode):
        got = fn(*[a.to("tpu") for a in args])
    if isinstance(want, (tuple, list)):
        for i, (g, w) in enumerate(zip(got, want)):
            if name.startswith("sort") or name.startswith("topk") or i == 0:
                assert_same_special_values(f"{name}[{i}]", g.cpu(), w)
            else:  # indices of max/min/median ties may differ; check their values instead
                assert g.dtype == w.dtype
    else:
        assert_same_special_values(name, got.cpu(), want)


def test_maximum_propagates_nan_from_either_side():
    # The plugin's maximum keeps only the first operand's NaN; torch's keeps both.
    nan = float("nan")
    x = torch.tensor([nan, 1.0, nan]).to("tpu")
    y = torch.tensor([1.0, nan, nan]).to("tpu")
    assert torch.maximum(x, y).isnan().all()
    assert torch.minimum(x, y).isnan().all()
    assert torch.clamp(torch.tensor([1.0, 2.0], device="tpu"), None, nan).isnan().all()


@pytest.fixture
def cpu_flushes_subnormals():
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU cannot flush subnormals (no SSE3 / FTZ-DAZ), so it has no reference for tpu's")
    yield
    torch.set_flush_denormal(False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_subnormals_are_zero_as_on_the_cpu_flushing_them(dtype, cpu_flushes_subnormals):
    # XLA's CPU runtime (like a TPU) flushes float32/64 subnormals to zero,
    # read and written: tpu answers as the CPU does under
    # torch.set_flush_denormal(True). IBert's integer-only softmax divides a
    # 1.7e-30 scale by 2**30 (1.6e-39, a float32 subnormal) and multiplies
    # inf by its reciprocal's mantissa: 0 on tpu, so NaN where the default CPU
    # gives inf; under the flush the CPU gives the same NaNs (in all 2,912
    # elements of an IBertModel's output with transformers' test values and
    # quant_mode=True, whose uncalibrated ranges give the CPU +-1e-5 everywhere).
    tiny = torch.finfo(dtype).tiny
    x = torch.tensor([tiny, tiny / 4, -tiny / 1024, 1e-30, 1.0], dtype=torch.float64).to(dtype)
    scale = torch.tensor([2.0 ** 30], dtype=dtype)
    got = [f(x.to("tpu"), scale.to("tpu")).cpu() for f in (torch.mul, torch.div, torch.add)]
    want = [f(x, scale) for f in (torch.mul, torch.div, torch.add)]
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=0, atol=0)
    ftz = (x.to("tpu") / scale.to("tpu") * float("inf")).cpu()
    assert torch.equal(ftz.isnan(), (x / scale * float("inf")).isnan())


def test_float16_keeps_its_subnormals():
    # Half-precision arithmetic runs in float32, where float16's subnormals are normal numbers.
    x = torch.tensor([2.4e-7, 1e-6, 6e-5], dtype=torch.float16)
    torch.testing.assert_close((x.to("tpu") * 0.5).cpu(), x * 0.5, rtol=0, atol=0)
    assert (x.to("tpu") * 0.5).cpu().ne(0).all()
