"""Elementwise ops and activations on tpu against the CPU: values, dtypes, shapes,
type promotion, broadcasting, Python scalars, special values, gradients, errors."""
import math
import warnings

import pytest
import torch
import torch.nn.functional as F
import torch_tpu  # noqa: F401

DEV = "tpu"
FLOATS = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
INTS = [torch.int64, torch.int32]
ALL = FLOATS + INTS + [torch.bool]
SPECIALS = [0.0, -0.0, math.inf, -math.inf, math.nan]


def make(shape, dtype, lo=-3.0, hi=3.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo).to(dtype)
    lo_i, hi_i = math.floor(lo), math.ceil(hi)
    if dtype == torch.uint8:
        lo_i = max(lo_i, 0)
    return torch.randint(lo_i, max(hi_i, lo_i + 1) + 1, shape, generator=g).to(dtype)


def with_specials(x):
    if not x.dtype.is_floating_point:
        return x
    return torch.cat([x.flatten(), torch.tensor(SPECIALS, dtype=x.dtype)])


def dev(x):
    return x.to(DEV) if isinstance(x, torch.Tensor) else x


def check(fn, *inputs, grad=False, **tol):
    """fn on CPU inputs and on tpu copies: same dtype, shape, values (NaN equal),
    and with grad=True the same gradients of every float tensor input. When the
    CPU raises, tpu must raise the same exception type."""
    needs = [grad and isinstance(x, torch.Tensor) and x.is_floating_point() for x in inputs]
    cpu = [x.detach().clone().requires_grad_(n) if isinstance(x, torch.Tensor) else x
           for x, n in zip(inputs, needs)]
    tpu = [dev(x).detach().requires_grad_(n) if isinstance(x, torch.Tensor) else x
           for x, n in zip(inputs, needs)]
    try:
        expected = fn(*cpu)
    except Exception as e:  # noqa: BLE001 - the type is what we compare
        with pytest.raises(type(e)):
            fn(*tpu)
        return
    got = fn(*tpu)
    exp_list = expected if isinstance(expected, (tuple, list)) else [expected]
    got_list = got if isinstance(got, (tuple, list)) else [got]
    assert len(exp_list) == len(got_list)
    for e, d in zip(exp_list, got_list):
        assert d.device.type == DEV
        assert d.dtype == e.dtype, (d.dtype, e.dtype)
        assert d.shape == e.shape, (d.shape, e.shape)
        torch.testing.assert_close(d.cpu(), e.detach(), equal_nan=True, **tol)
    if grad:
        outs = [(e, d) for e, d in zip(exp_list, got_list) if e.requires_grad]
        upstream = [make(e.shape, e.dtype, seed=7) for e, _ in outs]
        torch.autograd.backward([e for e, _ in outs], upstream)
        torch.autograd.backward([d for _, d in outs], [dev(u) for u in upstream])
        for c, t, n in zip(cpu, tpu, needs):
            if n:
                assert t.grad is not None
                torch.testing.assert_close(t.grad.cpu(), c.grad, equal_nan=True, **tol)


# ---------------------------------------------------------------- unary math

# op -> (function, input range, whether the range is safe for gradients)
UNARY = {
    "exp": (torch.exp, (-5, 5)),
    "exp2": (torch.exp2, (-5, 5)),
    "expm1": (torch.expm1, (-3, 3)),
    "log": (torch.log, (0.1, 10)),
    "log2": (torch.log2, (0.1, 10)),
    "log10": (torch.log10, (0.1, 10)),
    "log1p": (torch.log1p, (-0.9, 5)),
    "sqrt": (torch.sqrt, (0.1, 10)),
    "rsqrt": (torch.rsqrt, (0.1, 10)),
    "reciprocal": (torch.reciprocal, (0.5, 5)),
    "sin": (torch.sin, (-6, 6)),
    "cos": (torch.cos, (-6, 6)),
    "tan": (torch.tan, (-1.4, 1.4)),
    "tanh": (torch.tanh, (-4, 4)),
    "sigmoid": (torch.sigmoid, (-8, 8)),
    "erf": (torch.erf, (-4, 4)),
    "erfc": (torch.erfc, (-4, 4)),
    "erfinv": (torch.erfinv, (-0.99, 0.99)),
    "asin": (torch.asin, (-0.99, 0.99)),
    "acos": (torch.acos, (-0.99, 0.99)),
    "atan": (torch.atan, (-5, 5)),
    "sinh": (torch.sinh, (-5, 5)),
    "cosh": (torch.cosh, (-5, 5)),
    "asinh": (torch.asinh, (-5, 5)),
    "acosh": (torch.acosh, (1.01, 10)),
    "atanh": (torch.atanh, (-0.99, 0.99)),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_unary_float_functions(name, dtype):
    fn, (lo, hi) = UNARY[name]
    x = with_specials(make((4, 5), dtype, lo, hi))
    check(fn, x)
    check(fn, make((), dtype, lo, hi))


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_unary_float_gradients(name, dtype):
    fn, (lo, hi) = UNARY[name]
    check(fn, make((3, 4), dtype, lo, hi), grad=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_erf_family_accuracy(dtype):
    # A dense grid against a float64 (or mpmath-grade) reference: a few ulps.
    x = torch.linspace(-10, 10, 100001, dtype=dtype)
    eps = torch.finfo(dtype).eps
    for fn in (torch.erf, torch.erfc):
        ref = fn(x.double())
        got = fn(dev(x)).cpu().double()
        mask = ref.abs() > (1e-30 if dtype == torch.float32 else 1e-300)
        rel = ((got - ref).abs() / ref.abs())[mask]
        assert rel.max().item() < (8 * eps if dtype == torch.float32 else 1e-12)
    y = torch.linspace(-0.999999, 0.999999, 100001, dtype=dtype)
    ref = torch.erfinv(y.double())
    got = torch.erfinv(dev(y)).cpu().double()
    mask = ref != 0
    assert (((got - ref).abs() / ref.abs())[mask]).max().item() < (8 * eps if dtype == torch.float32 else 1e-12)
    ends = torch.tensor([-1.0, 1.0, 1.5, -2.0, 0.0], dtype=dtype)
    torch.testing.assert_close(torch.erfinv(dev(ends)).cpu(), torch.erfinv(ends), equal_nan=True)


def test_erf_saturates_exactly_and_gelu_tail_is_zero_as_on_cpu():
    # float32 erf rounds to +-1 from |x| ~ 3.92 on; 1 + erf must then be exactly
    # 0, or GELU's far negative tail (x (1 + erf) / 2) would grow with |x|.
    t = torch.tensor([4.0, 10.0, -5.0, -1e4, math.inf, -math.inf])
    assert torch.equal(torch.erf(dev(t)).cpu(), torch.erf(t))
    x = torch.tensor([-1e4, -100.0, -30.0], requires_grad=True)
    xd = x.detach().to(DEV).requires_grad_()
    y, yd = F.gelu(x), F.gelu(xd)
    assert torch.equal(yd.cpu(), y) and (y == 0).all()
    y.sum().backward()
    yd.sum().backward()
    assert torch.equal(xd.grad.cpu(), x.grad)


@pytest.mark.parametrize("name", ["floor", "ceil", "round", "trunc", "frac"])
@pytest.mark.parametrize("dtype", ALL, ids=str)
def test_rounding(name, dtype):
    fn = getattr(torch, name)
    x = with_specials(make((5, 6), dtype, -10, 10))
    if dtype.is_floating_point:
        x = torch.cat([x, torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 1e20], dtype=dtype)])
    check(fn, x)
    if dtype.is_floating_point:
        check(fn, make((3, 4), dtype, -10, 10) if dtype != torch.float16 else make((3, 4), torch.float32), grad=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("decimals", [-2, -1, 0, 1, 3])
def test_round_decimals(dtype, decimals):
    check(lambda t: torch.round(t, decimals=decimals), make((20,), dtype, -500, 500))


def test_round_decimals_rejects_integers():
    check(lambda t: torch.round(t, decimals=1), make((3,), torch.int64))


@pytest.mark.parametrize("dtype", ALL + [torch.uint8, torch.int8], ids=str)
@pytest.mark.parametrize("name", ["neg", "abs", "sign", "sgn", "signbit", "isnan", "isinf", "isposinf",
                                  "isneginf", "isfinite", "logical_not", "bitwise_not", "nan_to_num"])
def test_unary_any_type(name, dtype):
    check(getattr(torch, name), with_specials(make((4, 5), dtype, -5, 5)))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_nan_to_num_arguments(dtype):
    x = with_specials(make((6,), dtype))
    check(lambda t: torch.nan_to_num(t, nan=1.5), x)
    check(lambda t: torch.nan_to_num(t, nan=0.0, posinf=100.0, neginf=-7.0), x)
    check(lambda t: torch.nan_to_num(t, posinf=1e300), x)


@pytest.mark.parametrize("name", ["neg", "abs", "sign", "sgn"])
def test_sign_and_abs_gradients(name):
    check(getattr(torch, name), make((3, 4), torch.float32), grad=True)


# --------------------------------------------------------------- binary ops

TYPE_PAIRS = [
    (torch.float32, torch.float32),
    (torch.bfloat16, torch.bfloat16),
    (torch.float16, torch.float16),
    (torch.float64, torch.float32),
    (torch.float16, torch.bfloat16),
    (torch.int64, torch.int64),
    (torch.int32, torch.int64),
    (torch.int32, torch.float32),
    (torch.uint8, torch.int8),
    (torch.bool, torch.bool),
    (torch.bool, torch.int32),
    (torch.bfloat16, torch.int64),
]
SHAPE_PAIRS = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 3), (4, 1)), ((3, 4), ()), ((), ()), ((0, 3), (1, 3))]

ARITH = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "remainder": torch.remainder,
    "fmod": torch.fmod,
    "floor_divide": torch.floor_divide,
    "pow": torch.pow,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "atan2": torch.atan2,
    "hypot": torch.hypot,
    "copysign": torch.copysign,
    "xlogy": torch.xlogy,
    "logaddexp": torch.logaddexp,
    "eq": torch.eq,
    "ne": torch.ne,
    "lt": torch.lt,
    "le": torch.le,
    "gt": torch.gt,
    "ge": torch.ge,
    "logical_and": torch.logical_and,
    "logical_or": torch.logical_or,
    "logical_xor": torch.logical_xor,
    "bitwise_and": torch.bitwise_and,
    "bitwise_or": torch.bitwise_or,
    "bitwise_xor": torch.bitwise_xor,
}
INT_DIVISORS = {"div", "remainder", "fmod", "floor_divide"}


def binary_inputs(name, da, db, sa, sb):
    a = make(sa, da, -6, 6, seed=1)
    b = make(sb, db, -6, 6, seed=2)
    if name == "pow" and not db.is_floating_point and db != torch.bool:
        b = b.abs()  # negative integer powers of integers raise on the CPU
    if name == "pow" and da.is_floating_point:
        a = a.abs() + 0.5
    if name in INT_DIVISORS and not db.is_floating_point and db != torch.bool:
        b = torch.where(b == 0, torch.ones_like(b), b)
    return a, b


@pytest.mark.parametrize("name", sorted(ARITH))
@pytest.mark.parametrize("da,db", TYPE_PAIRS, ids=lambda t: str(t).replace("torch.", ""))
def test_binary_types(name, da, db):
    a, b = binary_inputs(name, da, db, (3, 4), (4,))
    check(ARITH[name], a, b)


@pytest.mark.parametrize("name", sorted(ARITH))
@pytest.mark.parametrize("sa,sb", SHAPE_PAIRS, ids=str)
def test_binary_broadcasting(name, sa, sb):
    a, b = binary_inputs(name, torch.float32, torch.float32, sa, sb)
    check(ARITH[name], a, b)
    check(ARITH[name], b, a)


@pytest.mark.parametrize("name", sorted(ARITH))
@pytest.mark.parametrize("scalar", [2, -3, 2.5, True], ids=repr)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool], ids=str)
def test_binary_python_scalars(name, scalar, dtype):
    x = make((3, 4), dtype, -6, 6)
    if name == "pow" and dtype.is_floating_point:
        x = x.abs() + 0.5
    if name in INT_DIVISORS and not dtype.is_floating_point:
        x = torch.where(x == 0, torch.ones_like(x), x).to(dtype)
    check(lambda t: ARITH[name](t, scalar), x)
    # A Python scalar on the left (torch.add(2, t) is not an op; the operator is).
    zero_dim = torch.tensor(scalar)
    check(lambda t, z: ARITH[name](z, t), x, zero_dim)


# Ops whose derivative formulas use masked_fill (lowered with indexing).
MASKED_FILL_GRADS = {"maximum", "minimum", "atan2", "xlogy", "copysign"}


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "atan2",
                                  "hypot", "xlogy", "logaddexp", "remainder", "fmod", "copysign"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_binary_gradients(name, dtype, require_ops):
    if name in MASKED_FILL_GRADS:
        require_ops("aten::masked_fill.Scalar")
    a = make((3, 4), dtype, 0.5, 3, seed=3)
    b = make((4,), dtype, 0.5, 3, seed=4)
    check(ARITH[name], a, b, grad=True)


def test_operators_and_reverse_scalars():
    x = make((3, 4), torch.float32)
    i = make((3, 4), torch.int64, 1, 6)
    for fn in [lambda t: 2 - t, lambda t: 2.5 / t, lambda t: 3 ** t, lambda t: -t, lambda t: 1 + t * 2,
               lambda t: t % 2.5, lambda t: 7 % t, lambda t: t // 2, lambda t: 7 // t, lambda t: t ** 2,
               lambda t: t ** 0.5, lambda t: t ** -1, lambda t: t ** 3, lambda t: t ** 0]:
        check(fn, x.abs() + 0.5)
        check(fn, i)
    b = make((3, 4), torch.bool)
    check(lambda t: ~t, b)
    check(lambda t: t & True, b)
    check(lambda t, u: t << u, i, make((3, 4), torch.int64, 0, 8))
    check(lambda t, u: t >> u, i * -3, make((3, 4), torch.int64, 0, 70))
    check(lambda t: t << 3, make((5,), torch.int32, -5, 5))
    check(lambda t: t >> 1, make((5,), torch.uint8, 0, 200))


@pytest.mark.parametrize("alpha", [1, 2, -1, 0.5])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32], ids=str)
def test_add_sub_rsub_alpha(alpha, dtype):
    a = make((3, 4), dtype)
    b = make((4,), dtype, seed=5)
    check(lambda x, y: torch.add(x, y, alpha=alpha), a, b)
    check(lambda x, y: torch.sub(x, y, alpha=alpha), a, b)
    check(lambda x, y: torch.rsub(x, y, alpha=alpha), a, b)
    check(lambda x: torch.add(x, 3, alpha=alpha), a)
    check(lambda x: torch.rsub(x, 3, alpha=alpha), a)


def test_add_sub_bool_rules():
    a, b = make((4,), torch.bool), make((4,), torch.bool, seed=3)
    check(torch.add, a, b)
    check(lambda x, y: torch.add(x, y, alpha=True), a, b)
    check(torch.sub, a, b)  # RuntimeError: two bool tensors
    check(lambda x: x - 1, a)  # RuntimeError: a bool tensor
    check(lambda x: torch.add(x, 1, alpha=0.5), make((3,), torch.int64))  # float alpha, int tensor
    check(lambda x: torch.add(x, x, alpha=True), make((3,), torch.float32))  # bool alpha


@pytest.mark.parametrize("mode", [None, "trunc", "floor"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64,
                                   torch.int32, torch.int8, torch.uint8], ids=str)
def test_div_rounding_modes(mode, dtype):
    a = make((40,), dtype, -20, 20, seed=1)
    b = make((40,), dtype, -6, 6, seed=2)
    if not dtype.is_floating_point:
        b = torch.where(b == 0, torch.full_like(b, 3), b)
    check(lambda x, y: torch.div(x, y, rounding_mode=mode), a, b)
    check(lambda x: torch.div(x, 3, rounding_mode=mode), a)
    check(lambda x: torch.div(x, -2.5, rounding_mode=mode), a)


def test_div_family_special_values():
    a = torch.tensor([5.0, -5, 5, -5, 0, -0.0, 7.5, -7.5, math.inf, math.nan, 1e-30, 3, -3, 1e30, -0.0])
    b = torch.tensor([2.0, 2, -2, -2, 3, -3, 0, 0, 2, 1, 3, math.inf, -math.inf, 7, 0])
    for dtype in [torch.float32, torch.float64, torch.bfloat16]:
        x, y = a.to(dtype), b.to(dtype)
        for fn in [torch.remainder, torch.fmod, torch.floor_divide, torch.true_divide,
                   lambda p, q: torch.div(p, q, rounding_mode="trunc"),
                   lambda p, q: torch.div(p, q, rounding_mode="floor")]:
            check(fn, x, y)
    # Python semantics for integers: the sign of the divisor, floor towards -inf.
    i = torch.tensor([7, -7, 7, -7, 0, 6, -6])
    j = torch.tensor([3, 3, -3, -3, 5, -4, 4])
    for dtype in [torch.int64, torch.int32, torch.int16]:
        for fn in [torch.remainder, torch.fmod, torch.floor_divide,
                   lambda p, q: torch.div(p, q, rounding_mode="trunc")]:
            check(fn, i.to(dtype), j.to(dtype))
    check(lambda q: torch.remainder(3, q), j)
    check(lambda q: torch.remainder(-2.5, q), j)


def test_div_bad_rounding_mode():
    check(lambda x: torch.div(x, 2, rounding_mode="ceil"), make((3,), torch.float32))


@pytest.mark.parametrize("exponent", [0, 1, 2, 3, -1, -2, 0.5, -0.5, 2.5, -3, 1.0, 3.0, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64,
                                   torch.int32, torch.bool], ids=str)
def test_pow_scalar_exponent(exponent, dtype):
    x = make((12,), dtype, 0.2, 4) if dtype.is_floating_point else make((12,), dtype, -4, 4)
    check(lambda t: torch.pow(t, exponent), x)
    if dtype.is_floating_point and dtype != torch.float16:
        check(lambda t: torch.pow(t, exponent), make((3, 4), dtype, 0.3, 3), grad=dtype != torch.bfloat16)


def test_pow_variants():
    i = torch.tensor([-1, 1, 2, -1, 0, 3, -2])
    e = torch.tensor([-3, -2, -2, -2, 2, 0, 3])
    check(torch.pow, i, e)
    check(lambda t: torch.pow(2, t), make((5,), torch.int64, 0, 6))
    check(lambda t: torch.pow(2.5, t), make((5,), torch.int64, 0, 6))
    check(lambda t: torch.pow(-2, t), make((5,), torch.float32, -3, 3))
    check(lambda t: torch.pow(t, 2), torch.tensor([-2.0, -3.0, math.nan, math.inf]))
    check(lambda t: torch.pow(t, 0), torch.tensor([math.nan, 0.0, -math.inf]))
    check(lambda t, u: torch.pow(t, u), make((3, 4), torch.float32, 0.5, 2), make((4,), torch.float32), grad=True)
    check(lambda t: torch.pow(3.0, t), make((3, 4), torch.float32), grad=True)
    check(torch.pow, make((3,), torch.bool), make((3,), torch.bool))  # no bool kernel


# ------------------------------------------------------ ternary and friends

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.bool], ids=str)
def test_where(dtype):
    cond = make((3, 4), torch.bool, seed=9)
    a, b = make((3, 4), dtype, seed=1), make((4,), dtype, seed=2)
    check(torch.where, cond, a, b)
    check(torch.where, cond[:, :1], a, b)
    check(lambda c, x: torch.where(c, x, 0), cond, a)
    check(lambda c, x: torch.where(c, 1.5, x), cond, a)
    check(lambda c: torch.where(c, 1, 2.5), cond)
    check(torch.where, cond, a, make((3, 4), torch.float64))


def test_where_gradient_and_condition_types():
    cond = make((3, 4), torch.bool, seed=9)
    check(torch.where, cond, make((3, 4), torch.float32), make((4,), torch.float32, seed=5), grad=True)
    check(torch.where, make((3, 4), torch.float32), make((3, 4), torch.float32), make((3, 4), torch.float32))
    # uint8 conditions are deprecated: the CPU warns once per process
    # (TORCH_WARN_ONCE), so only the first eager mode would see a warning.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        check(torch.where, cond.to(torch.uint8), make((3, 4), torch.float32), make((3, 4), torch.float32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32], ids=str)
def test_clamp(dtype):
    x = make((4, 5), dtype, -6, 6)
    check(lambda t: torch.clamp(t, -1, 2), x)
    check(lambda t: torch.clamp(t, min=0.5), x)
    check(lambda t: torch.clamp(t, max=-0.5), x)
    check(lambda t: torch.clamp(t, 3, 1), x)  # min > max: everything is max
    check(lambda t: torch.clamp_min(t, 1), x)
    check(lambda t: torch.clamp_max(t, 1), x)
    lo, hi = make((5,), dtype, -4, 0, seed=3), make((4, 1), dtype, 0, 4, seed=4)
    check(lambda t, a, b: torch.clamp(t, a, b), x, lo, hi)
    check(lambda t, a: torch.clamp(t, min=a), x, lo)
    check(lambda t, b: torch.clamp(t, max=b), x, hi)
    check(torch.clamp_min, x, lo)
    check(torch.clamp_max, x, hi)
    check(lambda t: torch.clamp(t, min=torch.tensor(0.5)), x)


def test_clamp_special_cases():
    x = torch.tensor([math.nan, 1.0, -math.inf, math.inf, 0.0])
    check(lambda t: torch.clamp(t, 0, 0.5), x)
    check(lambda t: torch.clamp(t), x)  # RuntimeError: at least one bound
    check(lambda t: torch.clamp(t, -1, 1), make((3, 4), torch.float32), grad=True)
    check(lambda t, a: torch.clamp(t, min=a), make((3, 4), torch.float32), make((4,), torch.float32), grad=True)
    check(lambda t: torch.clamp(t, 0, 1), make((4,), torch.bool))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64], ids=str)
def test_lerp(dtype):
    s, e = make((3, 4), dtype, seed=1), make((4,), dtype, seed=2)
    w = make((3, 1), dtype, -0.5, 1.5, seed=3)
    for weight in [0.0, 0.3, 0.5, 0.7, 1.0, 2.0, -1.0]:
        check(lambda a, b: torch.lerp(a, b, weight), s, e)
    check(torch.lerp, s, e, w)
    if dtype in (torch.float32, torch.float64):
        check(torch.lerp, s, e, w, grad=True)
        check(lambda a, b: torch.lerp(a, b, 0.25), s, e, grad=True)


def test_lerp_type_errors():
    check(lambda a, b: torch.lerp(a, b, 0.5), make((3,), torch.float32), make((3,), torch.float64))
    check(lambda a, b: torch.lerp(a, b, 0.5), make((3,), torch.int64), make((3,), torch.int64))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64], ids=str)
@pytest.mark.parametrize("value", [1, 0.5, -2])
def test_addcmul_addcdiv(dtype, value):
    s, a = make((3, 4), dtype, seed=1), make((4,), dtype, seed=2)
    b = make((3, 1), dtype, 1, 3, seed=3)
    if dtype.is_floating_point or isinstance(value, int):
        check(lambda x, y, z: torch.addcmul(x, y, z, value=value), s, a, b)
    check(lambda x, y, z: torch.addcdiv(x, y, z, value=value), s, a, b)  # integers raise
    if dtype in (torch.float32, torch.float64):
        check(lambda x, y, z: torch.addcmul(x, y, z, value=value), s, a, b, grad=True)
        check(lambda x, y, z: torch.addcdiv(x, y, z, value=value), s, a, b, grad=True)


# ---------------------------------------------------- in-place and out= forms

def test_in_place_and_out_variants():
    base = make((3, 4), torch.float32)
    other = make((4,), torch.float32, seed=2)
    cases = [
        lambda t, u: t.add_(u, alpha=2),
        lambda t, u: t.sub_(1.5),
        lambda t, u: t.mul_(u),
        lambda t, u: t.div_(u.abs() + 1),
        lambda t, u: t.div_(3, rounding_mode="floor"),
        lambda t, u: t.pow_(2),
        lambda t, u: t.clamp_(-0.5, 0.5),
        lambda t, u: t.clamp_min_(0),
        lambda t, u: t.exp_(),
        lambda t, u: t.erf_(),
        lambda t, u: t.sigmoid_(),
        lambda t, u: t.neg_(),
        lambda t, u: t.lerp_(u, 0.25),
        lambda t, u: t.addcmul_(u, u, value=0.5),
        lambda t, u: t.nan_to_num_(),
        lambda t, u: t.floor_(),
        lambda t, u: t.relu_(),
        lambda t, u: F.leaky_relu_(t, 0.1),
        lambda t, u: F.hardtanh_(t),
        lambda t, u: F.elu_(t),
        lambda t, u: t.copysign_(u),
    ]
    for fn in cases:
        def run(t, u, fn=fn):
            t = t.clone()
            r = fn(t, u)
            assert r is t
            return t
        check(run, base, other)
    # In-place into a view writes through to the base.
    check(lambda t: (t[:, 1:3].mul_(10), t)[1], base)
    check(lambda t: (t.t().add_(1), t)[1], base)
    # Integer results into float tensors and the promotion rules of in-place ops.
    check(lambda t, u: t.clone().add_(u), base, make((4,), torch.int64))
    check(lambda t: t.clone().add_(1.5), make((3,), torch.int64))  # RuntimeError: can't cast
    # out=
    for fn in [torch.add, torch.mul, torch.maximum, torch.atan2, torch.eq, torch.remainder]:
        def run_out(t, u, fn=fn):
            ref = fn(t, u)
            out = torch.empty(ref.shape, dtype=ref.dtype, device=t.device)
            r = fn(t, u, out=out)
            assert r is out
            return out
        check(run_out, base, other)
    check(lambda t: torch.exp(t, out=torch.empty(3, 4, dtype=torch.float64, device=t.device)), base)
    check(lambda t: torch.gt(t, 0, out=torch.empty(3, 4, dtype=torch.float32, device=t.device)), base)


# ---------------------------------------------------------------- errors

def test_errors_match_cpu():
    f = make((3,), torch.float32)
    b = make((3,), torch.bool)
    i = make((3,), torch.int64)
    cases = [
        (lambda: -dev(b), RuntimeError, "Negation"),
        (lambda: dev(b) - dev(b), RuntimeError, "two bool tensors"),
        (lambda: torch.abs(dev(b)), NotImplementedError, "abs"),
        (lambda: torch.bitwise_and(dev(f), dev(f)), NotImplementedError, "bitwise_and"),
        (lambda: torch.where(dev(f), dev(f), dev(f)), RuntimeError, "boolean"),
        (lambda: torch.clamp(dev(f)), RuntimeError, "At least one of 'min' or 'max'"),
        (lambda: torch.pow(dev(i), -1), RuntimeError, "negative integer powers"),
        (lambda: torch.add(dev(i), dev(i), alpha=0.5), RuntimeError, "alpha must not be a floating"),
        (lambda: torch.addcdiv(dev(i), dev(i), dev(i)), RuntimeError, "Integer division with addcdiv"),
        (lambda: torch.frac(dev(i)), NotImplementedError, "frac"),
        (lambda: dev(f) + dev(make((4,), torch.float32)), RuntimeError, "must match the size"),
        (lambda: F.gelu(dev(f), approximate="cubic"), RuntimeError, "approximate"),
        (lambda: torch.relu(dev(b)), RuntimeError, "Boolean inputs not supported for relu"),
        (lambda: F.silu(dev(i)), NotImplementedError, "silu"),
    ]
    for fn, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            fn()


# ---------------------------------------------------------------- activations

ACTIVATIONS = {
    "relu": F.relu,
    "relu6": F.relu6,
    "leaky_relu": lambda t: F.leaky_relu(t, 0.2),
    "gelu": F.gelu,
    "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
    "silu": F.silu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
    "threshold": lambda t: F.threshold(t, 0.5, -2.0),
    "hardtanh": lambda t: F.hardtanh(t, -1.5, 2.0),
    "elu": lambda t: F.elu(t, alpha=1.3),
    "celu": lambda t: F.celu(t, alpha=0.7),
    "selu": F.selu,
    "softplus": lambda t: F.softplus(t, beta=2.0, threshold=10.0),
    "mish": F.mish,
    "hardsigmoid": F.hardsigmoid,
    "hardswish": F.hardswish,
    "logsigmoid": F.logsigmoid,
    "hardshrink": lambda t: F.hardshrink(t, 0.5),
    "softshrink": lambda t: F.softshrink(t, 0.5),
    "tanhshrink": F.tanhshrink,
}


def activation_input(dtype, seed=0):
    x = make((200,), dtype, -8, 8, seed=seed)
    if dtype.is_floating_point:
        # the kinks of the piecewise functions
        x = torch.cat([x, torch.tensor([-3.0, 3.0, 0.0, -0.5, 0.5, -1.5, 2.0, 25.0, -25.0], dtype=dtype)])
    return x


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_activation_values(name, dtype):
    check(ACTIVATIONS[name], activation_input(dtype))
    check(ACTIVATIONS[name], make((), dtype))


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
def test_activation_gradients(name, dtype):
    # Away from the kinks, where the one-sided choice is a convention.
    x = make((6, 7), dtype, -5, 5, seed=4)
    for kink in (-3.0, -1.5, -0.5, 0.0, 0.5, 2.0, 3.0):
        x = torch.where((x - kink).abs() < 0.05, x + 0.1, x)
    if (name, dtype) == ("mish", torch.bfloat16):
        # mish_backward is CompositeImplicit: bfloat16 ops here, a float kernel
        # on the CPU. The float32 case checks the formula.
        return
    check(ACTIVATIONS[name], x, grad=True)


@pytest.mark.parametrize("dtype", INTS, ids=str)
def test_integer_activations(dtype):
    x = make((20,), dtype, -5, 5)
    for name in ["relu", "threshold", "hardtanh", "relu6"]:
        check(ACTIVATIONS[name], x)
    for name in ["gelu", "silu", "leaky_relu", "elu", "softplus", "mish", "hardswish"]:
        check(ACTIVATIONS[name], x)  # NotImplementedError like the CPU


def test_activation_backward_ops_directly():
    aten = torch.ops.aten
    x = activation_input(torch.float32)
    g = make(x.shape, torch.float32, seed=3)
    cases = [
        lambda g, x: aten.threshold_backward(g, x, 0.5),
        lambda g, x: aten.leaky_relu_backward(g, x, 0.2, False),
        lambda g, x: aten.gelu_backward(g, x),
        lambda g, x: aten.gelu_backward(g, x, approximate="tanh"),
        lambda g, x: aten.silu_backward(g, x),
        lambda g, x: aten.sigmoid_backward(g, torch.sigmoid(x)),
        lambda g, x: aten.tanh_backward(g, torch.tanh(x)),
        lambda g, x: aten.hardtanh_backward(g, x, -1.5, 2.0),
        lambda g, x: aten.elu_backward(g, 1.3, 1.1, 0.9, False, x),
        lambda g, x: aten.elu_backward(g, 1.3, 1.1, 0.9, True, aten.elu(x, 1.3, 1.1, 0.9)),
        lambda g, x: aten.softplus_backward(g, x, 2.0, 10.0),
        lambda g, x: aten.hardsigmoid_backward(g, x),
        lambda g, x: aten.hardswish_backward(g, x),
        lambda g, x: aten.hardshrink_backward(g, x, 0.5),
        lambda g, x: aten.softshrink_backward(g, x, 0.5),
        lambda g, x: aten.log_sigmoid_backward(g, x, aten.log_sigmoid_forward(x)[1]),
    ]
    for fn in cases:
        check(fn, g, x)
        check(fn, g.bfloat16(), x.bfloat16())


def test_activation_modules_train_step():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 16),
                                torch.nn.SiLU(), torch.nn.Linear(16, 4), torch.nn.Hardswish())
    x = torch.randn(5, 8)
    ref = model(x).square().sum()
    ref.backward()
    ref_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model.to(DEV)
    out = model(dev(x)).square().sum()
    out.backward()
    torch.testing.assert_close(out.cpu(), ref.detach())
    for p, r in zip(model.parameters(), ref_grads):
        torch.testing.assert_close(p.grad.cpu(), r)


# ---------------------------------------------------------------- complex values

def cmake(shape, seed=0, scale=2.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g, dtype=torch.complex64) * scale)


def check_complex(fn, *inputs, rtol=1e-5, atol=1e-5):
    """fn on complex CPU inputs and tpu copies: values, then the gradients of
    every input (PyTorch's conjugate-Wirtinger convention) for a random upstream."""
    cpu = [x.clone().requires_grad_() for x in inputs]
    tpu = [x.to(DEV).requires_grad_() for x in inputs]
    e, d = fn(*cpu), fn(*tpu)
    assert d.dtype == e.dtype and d.shape == e.shape
    torch.testing.assert_close(d.detach().cpu(), e.detach(), rtol=rtol, atol=atol, equal_nan=True)
    up = cmake(e.shape, seed=9) if e.is_complex() else make(e.shape, e.dtype, seed=9)
    e.backward(up)
    d.backward(up.to(DEV))
    for c, t in zip(cpu, tpu):
        torch.testing.assert_close(t.grad.cpu(), c.grad, rtol=rtol, atol=atol, equal_nan=True)


COMPLEX_UNARY = {
    "exp": torch.exp, "log": torch.log, "log2": torch.log2, "log10": torch.log10,
    "log1p": torch.log1p, "expm1": torch.expm1, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
    "reciprocal": torch.reciprocal, "sin": torch.sin, "cos": torch.cos, "tan": torch.tan,
    "tanh": torch.tanh, "sigmoid": torch.sigmoid, "sinh": torch.sinh, "cosh": torch.cosh,
    "asinh": torch.asinh, "acosh": torch.acosh, "atanh": torch.atanh, "asin": torch.asin,
    "acos": torch.acos, "atan": torch.atan, "square": torch.square, "sgn": torch.sgn,
    "abs": torch.abs, "angle": torch.angle, "conj_physical": torch.conj_physical,
    "tanhshrink": F.tanhshrink, "sinc": torch.sinc,
}


@pytest.mark.parametrize("name", sorted(COMPLEX_UNARY))
def test_complex_unary_values_and_gradients(name):
    # Away from the branch points, where both sides are well conditioned.
    x = cmake((4, 5), scale=0.6)
    check_complex(COMPLEX_UNARY[name], x, rtol=2e-5, atol=2e-5)


def test_complex_silu_and_sinc_at_zero():
    # The CPU's silu takes complex inputs (without autograd); sinc(0) is 1.
    x = cmake((4, 5), scale=0.6)
    torch.testing.assert_close(F.silu(x.to(DEV)).cpu(), F.silu(x), rtol=2e-5, atol=2e-5)
    z = torch.tensor([0j, 0.5 + 0.25j], dtype=torch.complex64)
    torch.testing.assert_close(torch.sinc(z.to(DEV)).cpu(), torch.sinc(z))


def test_complex_logaddexp_with_the_cpus_special_values():
    # Ordered by real part; equal infinite real parts follow C's complex exp
    # and log (inf + nan*1j, an angle, or exactly 0 imaginary part).
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([-inf + 1j, complex(inf, 2), complex(inf, 1), complex(inf, 0), complex(inf, 0.5),
                      complex(nan, 0), complex(1, nan), 2 + 1j, complex(-inf, 0)], dtype=torch.complex64)
    y = torch.tensor([-inf + 3j, complex(inf, 1), complex(inf, 1.2), complex(inf, 0), complex(inf, 0),
                      1 + 1j, 0j, complex(nan, 1), 1 + 1j], dtype=torch.complex64)
    for a, b in ((x, y), (y, x)):
        want = torch.view_as_real(torch.logaddexp(a, b))
        torch.testing.assert_close(torch.view_as_real(torch.logaddexp(a.to(DEV), b.to(DEV)).cpu()), want,
                                   equal_nan=True)
    check_complex(torch.logaddexp, cmake((4, 5), scale=2.0), cmake((4, 5), seed=3, scale=2.0))


def test_complex_sgn_at_zero_and_conj_physical_of_conj_view():
    x = torch.tensor([0j, 3 + 4j, -2j], dtype=torch.complex64)
    check(torch.sgn, x)
    check(torch.angle, x)
    check(lambda t: torch.conj_physical(t) * 2, x)


@pytest.mark.parametrize("op", ["mul", "div", "add", "sub", "rmul_scalar", "pow"])
def test_complex_binary_gradients(op):
    fn = {
        "mul": torch.mul, "div": torch.div, "add": torch.add, "sub": torch.sub,
        "rmul_scalar": lambda a, b: (2 - 3j) * a * b, "pow": lambda a, b: torch.pow(a, 2) * b,
    }[op]
    check_complex(fn, cmake((3, 4), seed=1), cmake((3, 4), seed=2))


def test_complex_lerp():
    a, b = cmake((3, 4), seed=1), cmake((3, 4), seed=2)
    check(torch.lerp, a, b, 0.3)
    check(torch.lerp, a, b, cmake((3, 4), seed=3) * 0.3)


def test_real_angle():
    x = torch.tensor([-2.0, -0.0, 0.0, 3.0, math.nan, -math.inf, math.inf])
    for dtype in [torch.float32, torch.float64, torch.float16]:
        check(torch.angle, x.to(dtype))
    check(torch.angle, torch.tensor([-3, 0, 4]))
    check(torch.angle, make((3, 4), torch.float32), grad=True)


# ---------------------------------------------------------------- half precision

@pytest.mark.parametrize("name", ["expm1", "log1p", "sigmoid", "exp", "tanh", "sin", "erf", "log"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_unary_rounds_once_from_f32(name, dtype):
    # PyTorch computes these in f32 and rounds once: tpu must give the same bits
    # (up to one ulp where f32 implementations themselves differ).
    fn, (lo, hi) = UNARY[name]
    x = make((4096,), dtype, lo, hi, seed=3)
    got, expected = fn(dev(x)).cpu(), fn(x)
    ulp = torch.finfo(dtype).eps * expected.abs().float().clamp_min(torch.finfo(dtype).tiny)
    assert ((got.float() - expected.float()).abs() <= ulp).all()
    assert (got == expected).float().mean() > 0.99


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_times_python_scalar_is_exact(dtype):
    # A Python scalar keeps its f32 value (PyTorch's CPU kernel): no rounding to
    # the half type before the product.
    x = make((4096,), dtype, -30, 30, seed=4)
    for s in [1.1283791670955126, 2.302585092994046, 0.7071067811865476]:
        torch.testing.assert_close(dev(x).mul(s).cpu(), x.mul(s), rtol=0, atol=0)
        torch.testing.assert_close((dev(x) / s).cpu(), x / s, rtol=0, atol=0)
        torch.testing.assert_close((dev(x) + s).cpu(), x + s, rtol=0, atol=0)


@pytest.mark.parametrize("name", ["acos", "asin", "asinh", "acosh", "erf", "erfc", "log10", "log2",
                                  "rsqrt", "sigmoid", "erfinv", "expm1"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_unary_gradients(name, dtype):
    fn, (lo, hi) = UNARY[name]
    check(fn, make((64, 16), dtype, lo, hi, seed=5), grad=True)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_mish_backward_in_f32(dtype):
    check(F.mish, make((64, 16), dtype, -6, 6, seed=6), grad=True)


def test_rsqrt_half_correctly_rounded():
    # 1 / sqrt(x) in f32, rounded once: the correctly rounded result.
    x = torch.arange(0, 2**16, dtype=torch.int32).to(torch.int16).view(torch.float16)
    x = x[x.isfinite() & (x > 1e-3)]
    got = torch.rsqrt(dev(x)).cpu()
    assert (got == (1 / x.double().sqrt()).half()).all()


def test_atanh_accuracy_near_minus_one():
    x = torch.linspace(-0.99999, 0.99999, 20001)
    got = torch.atanh(dev(x)).cpu().double()
    ref = torch.atanh(x.double())
    assert ((got - ref).abs() / ref.abs().clamp_min(1e-30)).max() < 4 * 2**-24
    check(torch.atanh, x)
