// Elementwise arithmetic, math functions, comparisons, logical and bitwise
// ops. Types follow PyTorch's promotion (result_type); integer and NaN edge
// cases follow PyTorch's CPU kernels, which are the reference.
#include <cmath>
#include <initializer_list>
#include <string>

#include "lowering/common.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

using hlo::Builder;
using hlo::Compare;
using E = ElementType;
using Values = std::vector<Value>;

// ---- small helpers


// How PyTorch prints a dtype in messages that stream the TypeMeta.
const char* type_meta_name(E t) {
  switch (t) {
    case E::F32: return "float";
    case E::F64: return "double";
    case E::F16: return "c10::Half";
    case E::BF16: return "c10::BFloat16";
    case E::I64: return "long int";
    case E::I32: return "int";
    case E::Bool: return "bool";
    default: return hlo::short_name(t);
  }
}

// c[0] + c[1] x + c[2] x^2 + ...
Value horner(Builder& b, Value x, const double* c, int n) {
  Value p = splat(b, c[n - 1], x);
  for (int i = n - 2; i >= 0; --i) p = b.add(b.mul(p, x), splat(b, c[i], x));
  return p;
}

Value is_zero(Builder& b, Value v) { return b.compare(v, splat(b, 0, v), Compare::EQ); }
Value is_negative(Builder& b, Value v) { return b.compare(v, splat(b, 0, v), Compare::LT); }
// An odd function's value from r = f(|x|): -r below 0, and x itself at ±0 so
// that f(-0) is -0, as the CPU computes it.
Value odd(Builder& b, Value x, Value r) {
  Value signed_r = b.select(is_negative(b, x), b.neg(r), r);
  return b.select(b.compare(x, splat(b, 0, x), Compare::EQ), x, signed_r);
}

// Tensor/Number args converted to t and broadcast to their common shape.
Values promoted(Context& ctx, std::initializer_list<const Arg*> args, E t) {
  Values vs;
  Shape shape;
  for (const Arg* a : args) {
    vs.push_back(operand(ctx, *a, t));
    shape = broadcast_shapes(shape, vs.back().shape());
  }
  for (Value& v : vs) v = broadcast_to(ctx.b, v, shape);
  return vs;
}

const Value& self_of(const Args& args) { return args.at(0).as_tensor(); }

bool is_int_or_bool(E t) { return hlo::is_integral(t) || t == E::Bool; }

// ---- erf family

// erf on |x| < 1 from its Maclaurin series:
//   erf(x) = 2/sqrt(pi) * sum_n (-1)^n x^(2n+1) / (n! (2n+1)),
// with as many terms as the type resolves.
Value erf_series(Builder& b, Value x) {
  int terms = x.dtype() == E::F64 ? 19 : 11;
  double c[19];
  double factorial = 1;
  for (int n = 0; n < terms; ++n) {
    if (n > 0) factorial *= n;
    c[n] = (n % 2 ? -1.0 : 1.0) * 2.0 / std::sqrt(M_PI) / (factorial * (2 * n + 1));
  }
  return b.mul(x, horner(b, b.mul(x, x), c, terms));
}

// erfc on x >= 1/2 as t * exp(-x^2 + P(t)) with t = 1 / (1 + x/2). P is our
// own least-squares fit of log(erfc(x) / t) + x^2 at Chebyshev nodes of t in
// (0, 4/5], done in 40-digit arithmetic; the maximum relative error of erfc
// is 2.2e-9 (degree 11) and 1.5e-13 (degree 17).
constexpr double kErfcP11[] = {
    -1.2655121207550106, 0.99999912206269892, 0.3750515444940159,  0.082133261245077749,
    -0.071504449514142754, -0.24542968634184992, 0.35506908507283097, -1.2231486300783523,
    2.331875938259754,   -2.0908836923807637, 0.90730124859710048, -0.15490984931673757};
constexpr double kErfcP17[] = {
    -1.2655121234846787, 1.0000000000293632,  0.374999995124357,    0.083333652865930086,
    -0.085948400478287071, -0.14352655801692818, -0.094795184906201591, 0.057395503116459579,
    -0.052074575791229885, 1.0226713485740502, -3.2762777268890133,  8.4688439969549592,
    -17.126735385012609, 23.44401577016626,   -20.812344616947744,  11.597516346460463,
    -3.7185428702931222, 0.52698314646674838};

Value erfc_tail(Builder& b, Value x) {
  bool f64 = x.dtype() == E::F64;
  // Past these erfc is below the smallest subnormal; capping keeps inf out of
  // the x^2 split below.
  x = b.min(x, splat(b, f64 ? 27.5 : 10.5, x));
  Value t = b.div(splat(b, 1, x), b.add(splat(b, 1, x), b.mul(x, splat(b, 0.5, x))));
  Value p = f64 ? horner(b, t, kErfcP17, 18) : horner(b, t, kErfcP11, 12);
  // exp(-x^2) loses x^2's rounding error times x^2; splitting x = hi + lo with
  // hi on a 1/16 grid makes hi^2 exact and leaves the small rest to P's exp.
  Value hi = b.div(b.floor(b.mul(x, splat(b, 16, x))), splat(b, 16, x));
  Value rest = b.mul(b.sub(x, hi), b.add(x, hi));
  Value e1 = b.exp(b.neg(b.mul(hi, hi)));
  Value e2 = b.exp(b.sub(p, rest));
  return b.mul(b.mul(t, e1), e2);
}

// erf in float32 as x P(x^2) / Q(x^2): one branch and no exp, a third of
// the series-plus-tail evaluation below (GELU pays it on every activation).
// The coefficients are our own fit of erf(x)/x over x^2 in [0, 16], weighted
// towards the minimax relative error (6.5e-8 in exact arithmetic; a float32
// evaluation stays within 4 ulps). Past |x| = 3.92 erf rounds to +-1 in
// float32, which is returned exactly so that 1 + erf(x) is exactly 0 there.
constexpr double kErfP[] = {1.1283790940372318,     0.20712455767236718,   0.051524789533835824,
                            0.003990544703692465,   0.00014728602028523375, -1.9423168921415734e-06,
                            1.911101570584597e-08};
constexpr double kErfQ[] = {1.0, 0.5168906082086666, 0.11797045920118605, 0.014958011285969209,
                            0.001021106639462374};

Value erf_rational(Builder& b, Value x) {
  Value one = splat(b, 1, x);
  Value c = b.clamp(splat(b, -4, x), x, splat(b, 4, x));
  Value s = b.mul(c, c);
  Value r = b.mul(c, b.div(horner(b, s, kErfP, 7), horner(b, s, kErfQ, 5)));
  r = b.clamp(b.neg(one), r, one);
  Value saturated = b.select(is_negative(b, x), b.neg(one), one);
  return b.select(b.compare(b.abs(x), splat(b, 3.92, x), Compare::GE), saturated, r);
}

Value erf_impl(Builder& b, Value x) {
  if (x.dtype() == E::F32) return erf_rational(b, x);
  Value ax = b.abs(x);
  Value small = b.compare(ax, splat(b, 1, x), Compare::LT);
  Value one = splat(b, 1, x);
  Value big = b.sub(one, erfc_tail(b, b.max(ax, one)));
  big = b.select(is_negative(b, x), b.neg(big), big);
  return b.select(small, erf_series(b, x), big);
}

Value erfc_impl(Builder& b, Value x) {
  Value half = splat(b, 0.5, x);
  Value ax = b.abs(x);
  Value tail = erfc_tail(b, b.max(ax, half));
  Value large = b.select(is_negative(b, x), b.sub(splat(b, 2, x), tail), tail);
  Value small = b.sub(splat(b, 1, x), erf_series(b, x));
  return b.select(b.compare(ax, half, Compare::LT), small, large);
}

// erfinv by Newton's method from Winitzki's closed-form estimate. Far from 0
// the residual is taken on erfc, where 1 - |y| is exact, so that the root
// keeps its precision as |y| -> 1.
Value erfinv_impl(Builder& b, Value y) {
  const double k = 0.147;
  Value a = b.abs(y);
  Value one = splat(b, 1, y);
  Value w = b.neg(b.log(b.mul(b.sub(one, a), b.add(one, a))));  // -log(1 - y^2)
  Value s = b.sub(splat(b, 2 / (M_PI * k), y), b.mul(w, splat(b, 0.5, y)));
  Value d = b.div(w, splat(b, k, y));
  // sqrt(s^2 + d) - s without the cancellation for small d.
  Value x = b.sqrt(b.div(d, b.add(b.sqrt(b.add(b.mul(s, s), d)), s)));
  Value near_zero = b.compare(a, splat(b, 0.5, y), Compare::LE);
  Value one_minus_a = b.sub(one, a);
  Value half_sqrt_pi = splat(b, std::sqrt(M_PI) / 2, y);
  int steps = y.dtype() == E::F64 ? 4 : 3;
  for (int i = 0; i < steps; ++i) {
    Value r = b.select(near_zero, b.sub(a, erf_impl(b, x)), b.sub(erfc_impl(b, x), one_minus_a));
    x = b.add(x, b.mul(b.mul(r, half_sqrt_pi), b.exp(b.mul(x, x))));
  }
  Value inf = splat(b, INFINITY, y);
  x = b.select(b.compare(a, one, Compare::EQ), inf, x);
  x = b.select(b.compare(a, one, Compare::GT), splat(b, NAN, y), x);
  return odd(b, y, x);
}

// Runs `f` in the op-math type of x and rounds the result back once.
template <Value (*F)(Builder&, Value)>
Value in_opmath(Builder& b, Value x) {
  E t = x.dtype();
  return cast(b, F(b, cast(b, x, opmath(t))), t);
}

}  // namespace

ElementType opmath(ElementType t) {
  return t == E::F16 || t == E::BF16 ? E::F32 : t;
}

Value splat(Builder& b, double v, const Value& like) {
  return b.full(v, like.dtype(), like.shape());
}

void check_dtype(bool ok, const char* kernel, ElementType t) {
  if (!ok) fail(ErrorKind::NotImplemented, "\"", kernel, "\" not implemented for '", scalar_type_name(t), "'");
}

Value erf(Builder& b, Value x) { return in_opmath<erf_impl>(b, x); }
Value erfc(Builder& b, Value x) { return in_opmath<erfc_impl>(b, x); }

namespace {

// ---- unary ops

template <Value (Builder::*M)(Value)>
Value method(Builder& b, Value x) {
  return (b.*M)(x);
}

Value exp2_(Builder& b, Value x) { return b.pow(splat(b, 2, x), x); }
Value log2_impl(Builder& b, Value x) { return b.div(b.log(x), splat(b, M_LN2, x)); }
Value log10_impl(Builder& b, Value x) { return b.div(b.log(x), splat(b, M_LN10, x)); }
Value reciprocal_(Builder& b, Value x) { return b.div(splat(b, 1, x), x); }
// 1 / sqrt(x), as PyTorch's CPU kernel computes it: two correctly rounded
// steps, where XLA's rsqrt may differ by an ulp (which half types round up).
Value rsqrt_(Builder& b, Value x) { return b.div(splat(b, 1, x), b.sqrt(x)); }
Value erf_(Builder& b, Value x) { return erf(b, x); }
Value erfc_(Builder& b, Value x) { return erfc(b, x); }
Value erfinv_(Builder& b, Value x) { return in_opmath<erfinv_impl>(b, x); }

// asin, acos, atan through atan2, which StableHLO has.
Value sqrt_one_minus_sq(Builder& b, Value x) {
  Value one = splat(b, 1, x);
  return b.sqrt(b.mul(b.sub(one, x), b.add(one, x)));
}
Value asin_impl(Builder& b, Value x) { return b.atan2(x, sqrt_one_minus_sq(b, x)); }
Value acos_impl(Builder& b, Value x) { return b.atan2(sqrt_one_minus_sq(b, x), x); }
Value atan_(Builder& b, Value x) { return b.atan2(x, splat(b, 1, x)); }
// sinh and cosh through s = e^|x| / 2 computed as (w / 2) * w with
// w = e^(|x|/2), which stays finite as long as the result does; below 1,
// sinh comes from expm1 instead, which keeps small arguments accurate:
// with e = expm1(|x|), sinh|x| = (e + e / (e + 1)) / 2.
Value half_exp(Builder& b, Value ax) {
  Value w = b.exp(b.mul(ax, splat(b, 0.5, ax)));
  return b.mul(b.mul(w, splat(b, 0.5, ax)), w);
}
Value sinh_impl(Builder& b, Value x) {
  Value ax = b.abs(x);
  Value one = splat(b, 1, x);
  Value small_x = b.min(ax, one);
  Value e = b.expm1(small_x);
  Value small = b.mul(b.add(e, b.div(e, b.add(e, one))), splat(b, 0.5, x));
  Value s = half_exp(b, ax);
  Value large = b.sub(s, b.div(splat(b, 0.25, x), s));
  Value r = b.select(b.compare(ax, one, Compare::LT), small, large);
  return odd(b, x, r);
}
Value cosh_impl(Builder& b, Value x) {
  Value s = half_exp(b, b.abs(x));
  return b.add(s, b.div(splat(b, 0.25, x), s));
}
// asinh(x) = sign(x) log1p(|x| + x^2 / (1 + sqrt(1 + x^2))); past 1e8 the
// square overflows soon, and log(2|x|) is exact to the type.
Value asinh_impl(Builder& b, Value x) {
  Value ax = b.abs(x);
  Value one = splat(b, 1, x);
  Value sq = b.mul(ax, ax);
  Value mid = b.log1p(b.add(ax, b.div(sq, b.add(one, b.sqrt(b.add(one, sq))))));
  Value big = b.add(b.log(ax), splat(b, M_LN2, x));
  Value r = b.select(b.compare(ax, splat(b, 1e8, x), Compare::GT), big, mid);
  return odd(b, x, r);
}
// acosh(x) = log1p(t + sqrt(t (t + 2))) with t = x - 1, exact near 1.
Value acosh_impl(Builder& b, Value x) {
  Value t = b.sub(x, splat(b, 1, x));
  Value mid = b.log1p(b.add(t, b.sqrt(b.mul(t, b.add(t, splat(b, 2, x))))));
  Value big = b.add(b.log(x), splat(b, M_LN2, x));
  return b.select(b.compare(x, splat(b, 1e8, x), Compare::GT), big, mid);
}
// atanh(x) = sign(x) log1p(2|x| / (1 - |x|)) / 2: on |x| the quotient is
// positive, so log1p does not cancel as x -> -1 (1 - |x| is exact there).
Value atanh_impl(Builder& b, Value x) {
  Value ax = b.abs(x);
  Value q = b.div(b.mul(ax, splat(b, 2, x)), b.sub(splat(b, 1, x), ax));
  Value r = b.mul(b.log1p(q), splat(b, 0.5, x));
  return odd(b, x, r);
}
// ---- complex versions (z = x + iy), from the real functions of the parts.
bool is_cplx(const Value& v) { return hlo::is_complex(v.dtype()); }
Value conj_impl(Builder& b, Value z) { return b.complex(b.real(z), b.neg(b.imag(z))); }
// sinh(x + iy) = sinh x cos y + i cosh x sin y; cosh(x + iy) = cosh x cos y + i sinh x sin y.
Value csinh(Builder& b, Value z) {
  Value x = b.real(z), y = b.imag(z);
  return b.complex(b.mul(sinh_impl(b, x), b.cosine(y)), b.mul(cosh_impl(b, x), b.sine(y)));
}
Value ccosh(Builder& b, Value z) {
  Value x = b.real(z), y = b.imag(z);
  return b.complex(b.mul(cosh_impl(b, x), b.cosine(y)), b.mul(sinh_impl(b, x), b.sine(y)));
}
// asinh is odd: computed on the half plane Re z >= 0, where z + sqrt(z^2 + 1)
// does not cancel, as log(z + sqrt(z^2 + 1)).
Value casinh(Builder& b, Value z) {
  Value neg = is_negative(b, b.real(z));
  Value w = b.select(neg, b.neg(z), z);
  Value r = b.log(b.add(w, b.sqrt(b.add(b.mul(w, w), splat(b, 1, w)))));
  return b.select(neg, b.neg(r), r);
}
// acosh z = log(z + sqrt(z + 1) sqrt(z - 1)) (the principal branch).
Value cacosh(Builder& b, Value z) {
  Value one = splat(b, 1, z);
  return b.log(b.add(z, b.mul(b.sqrt(b.add(z, one)), b.sqrt(b.sub(z, one)))));
}
// atanh z = (log1p(z) - log1p(-z)) / 2.
Value catanh(Builder& b, Value z) {
  return b.mul(b.sub(b.log1p(z), b.log1p(b.neg(z))), splat(b, 0.5, z));
}

// Composites round once, from op-math precision; complex values take the
// complex formula.
template <Value (*Real)(Builder&, Value), Value (*Complex)(Builder&, Value) = nullptr>
Value real_or_complex(Builder& b, Value x) {
  if (Complex != nullptr && is_cplx(x)) return Complex(b, x);
  return in_opmath<Real>(b, x);
}
Value log2_(Builder& b, Value x) { return in_opmath<log2_impl>(b, x); }
Value log10_(Builder& b, Value x) { return in_opmath<log10_impl>(b, x); }
Value asin_(Builder& b, Value x) { return in_opmath<asin_impl>(b, x); }
Value acos_(Builder& b, Value x) { return in_opmath<acos_impl>(b, x); }
Value sinh_(Builder& b, Value x) { return real_or_complex<sinh_impl, csinh>(b, x); }
Value cosh_(Builder& b, Value x) { return real_or_complex<cosh_impl, ccosh>(b, x); }
Value asinh_(Builder& b, Value x) { return real_or_complex<asinh_impl, casinh>(b, x); }
Value acosh_(Builder& b, Value x) { return real_or_complex<acosh_impl, cacosh>(b, x); }
Value atanh_(Builder& b, Value x) { return real_or_complex<atanh_impl, catanh>(b, x); }

constexpr char kCeil[] = "ceil";
constexpr char kFloor[] = "floor";
constexpr char kRound[] = "round";
constexpr char kTrunc[] = "trunc";

Value trunc_(Builder& b, Value x) {
  return b.select(is_negative(b, x), b.ceil(x), b.floor(x));
}

// Rounding keeps integers as they are; PyTorch has no kernel for bool.
template <Value (*F)(Builder&, Value), const char* Kernel>
Values rounding_unary(Context& ctx, const Args& args) {
  Value x = self_of(args);
  check_dtype(x.dtype() != E::Bool, Kernel, x.dtype());
  if (!hlo::is_float(x.dtype())) return {x};
  return {F(ctx.b, x)};
}

Values lower_abs(Context& ctx, const Args& args) {
  Value x = self_of(args);
  check_dtype(x.dtype() != E::Bool, "abs_cpu", x.dtype());
  if (hlo::is_unsigned(x.dtype())) return {x};
  return {ctx.b.abs(x)};
}

Values lower_frac(Context& ctx, const Args& args) {
  Value x = self_of(args);
  check_dtype(hlo::is_float(x.dtype()), "frac_cpu", x.dtype());
  return {ctx.b.sub(x, trunc_(ctx.b, x))};
}

Values lower_neg(Context& ctx, const Args& args) {
  Value x = self_of(args);
  TPU_CHECK(x.dtype() != E::Bool, ErrorKind::Runtime,
            "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
            "invert a mask, use the `~` or `logical_not()` operator instead.");
  return {ctx.b.neg(x)};
}

// round(x, decimals): PyTorch scales by 10^|decimals| in the tensor's type.
Values lower_round_decimals(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value x = self_of(args);
  check_dtype(hlo::is_float(x.dtype()), "round_cpu", x.dtype());
  int64_t d = args.at(1).as_int();
  if (d == 0) return {b.round_nearest_even(x)};
  // Half types compute in f32 and round once, as the CPU does.
  E t = x.dtype();
  Value w = cast(b, x, opmath(t));
  Value scale = splat(b, std::pow(10.0, static_cast<double>(d < 0 ? -d : d)), w);
  Value r = d > 0 ? b.div(b.round_nearest_even(b.mul(w, scale)), scale)
                  : b.mul(b.round_nearest_even(b.div(w, scale)), scale);
  return {cast(b, r, t)};
}

// conj_physical: the conjugate, materialized; real values are their own.
Values lower_conj_physical(Context& ctx, const Args& args) {
  Value x = self_of(args);
  if (!is_cplx(x)) return {x};
  return {conj_impl(ctx.b, x)};
}

// sgn of a complex number: z / |z|, and 0 at 0.
Values lower_sgn(Context& ctx, const Args& args);

// angle: arg(z) for complex numbers; for real ones pi below 0, else 0 (NaN
// stays NaN). Integers and bools compute in the default float type.
Values lower_angle(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value x = self_of(args);
  if (is_cplx(x)) return {b.atan2(b.imag(x), b.real(x))};
  E t = to_float(ctx, x.dtype());
  x = cast(b, x, t);
  Value r = b.select(is_negative(b, x), splat(b, M_PI, x), splat(b, 0, x));
  return {b.select(is_nan(b, x), x, r)};
}

// sign and sgn of real numbers: NaN has sign 0, as in PyTorch.
Values lower_sign(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value x = self_of(args);
  E t = x.dtype();
  if (t == E::Bool) return {x};
  Value zero = splat(b, 0, x);
  Value pos = b.convert(b.compare(x, zero, Compare::GT), t);
  if (hlo::is_unsigned(t)) return {pos};
  return {b.sub(pos, b.convert(b.compare(x, zero, Compare::LT), t))};
}

Values lower_sgn(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value z = self_of(args);
  if (!is_cplx(z)) return lower_sign(ctx, args);
  Value a = b.abs(z);
  Value zero = splat(b, 0, a);
  Value at_zero = b.compare(a, zero, Compare::EQ);
  Value safe = b.select(at_zero, splat(b, 1, a), a);
  Value r = b.div(z, b.complex(safe, zero));
  return {b.select(at_zero, splat(b, 0, z), r)};
}

// Float predicates; integers are never NaN or infinite.
template <Value (*F)(Builder&, Value)>
Values float_predicate(Context& ctx, const Args& args) {
  Value x = self_of(args);
  if (!hlo::is_float(x.dtype())) return {ctx.b.full(0, E::Bool, x.shape())};
  return {F(ctx.b, x)};
}
Value isposinf_(Builder& b, Value x) { return b.compare(x, splat(b, INFINITY, x), Compare::EQ); }
Value isneginf_(Builder& b, Value x) { return b.compare(x, splat(b, -INFINITY, x), Compare::EQ); }

// The sign bit itself, so that -0.0 and -nan count as negative.
Values lower_signbit(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value x = self_of(args);
  E t = x.dtype();
  if (hlo::is_signed_int(t)) return {is_negative(b, x)};
  if (!hlo::is_float(t)) return {b.full(0, E::Bool, x.shape())};
  E bits = t == E::F64 ? E::I64 : t == E::F32 ? E::I32 : E::I16;
  return {is_negative(b, b.bitcast_convert(x, {bits, x.shape()}))};
}

Values lower_nan_to_num(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value x = self_of(args);
  E t = x.dtype();
  if (!hlo::is_float(t)) return {x};
  double big = t == E::F64 ? 1.7976931348623157e308
               : t == E::F32 ? 3.4028234663852886e38
               : t == E::BF16 ? 3.3895313892515355e38
                              : 65504.0;
  auto value = [&](size_t i, double dflt) {
    const Arg& a = args.at(i);
    return splat(b, a.is_none() ? dflt : a.as_float(), x);
  };
  Value r = b.select(is_nan(b, x), value(1, 0), x);
  r = b.select(isposinf_(b, x), value(2, big), r);
  return {b.select(isneginf_(b, x), value(3, -big), r)};
}

// ---- arithmetic

void check_alpha(E t, const Arg& alpha) {
  if (alpha.kind != Arg::Kind::Number) return;
  Number::Kind k = alpha.number.kind;
  TPU_CHECK(k != Number::Kind::Bool || t == E::Bool, ErrorKind::Runtime,
            "Boolean alpha only supported for Boolean results.");
  TPU_CHECK(hlo::is_float(t) || hlo::is_complex(t) || k == Number::Kind::Int || k == Number::Kind::Bool,
            ErrorKind::Runtime,
            "For integral input tensors, argument alpha must not be a floating point number.");
  TPU_CHECK(hlo::is_complex(t) || k != Number::Kind::Complex, ErrorKind::Runtime,
            "For non-complex input tensors, argument alpha must not be a complex number.");
}

E arg_dtype(Context& ctx, const Arg& a) { return result_type(ctx, {&a}); }

void check_sub(Context& ctx, const Arg& x, const Arg& y) {
  bool bx = arg_dtype(ctx, x) == E::Bool, by = arg_dtype(ctx, y) == E::Bool;
  TPU_CHECK(!(bx && by), ErrorKind::Runtime,
            "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` "
            "or `logical_xor()` operator instead.");
  TPU_CHECK(!bx && !by, ErrorKind::Runtime,
            "Subtraction, the `-` operator, with a bool tensor is not supported. If you are "
            "trying to invert a mask, use the `~` or `logical_not()` operator instead.");
}

// x + alpha * y, or x - alpha * y.
Value add_scaled(Context& ctx, const Arg& x_arg, const Arg& y_arg, const Arg& alpha, bool subtract) {
  Builder& b = ctx.b;
  if (subtract) check_sub(ctx, x_arg, y_arg);
  E t = result_type(ctx, {&x_arg, &y_arg});
  check_alpha(t, alpha);
  // Half types compute in f32 and round once, as PyTorch's CPU kernels do;
  // unlike mul and div, add rounds a Python scalar and alpha to the half
  // type first.
  E c = opmath(t);
  Values v = promoted(ctx, {&x_arg, &y_arg}, t);
  for (Value& x : v) x = cast(b, x, c);
  Value a = broadcast_to(b, cast(b, operand(ctx, alpha, t), c), v[1].shape());
  if (t == E::Bool) return b.or_(v[0], b.and_(v[1], a));
  Value y = b.mul(v[1], a);
  return cast(b, subtract ? b.sub(v[0], y) : b.add(v[0], y), t);
}

Values lower_add(Context& ctx, const Args& args) {
  return {add_scaled(ctx, args.at(0), args.at(1), args.at(2), false)};
}
Values lower_sub(Context& ctx, const Args& args) {
  return {add_scaled(ctx, args.at(0), args.at(1), args.at(2), true)};
}
Values lower_rsub(Context& ctx, const Args& args) {
  return {add_scaled(ctx, args.at(1), args.at(0), args.at(2), true)};
}

Values lower_mul(Context& ctx, const Args& args) {
  E t = result_type(ctx, {&args.at(0), &args.at(1)});
  if (t == E::Bool) {
    Values v = promoted(ctx, {&args.at(0), &args.at(1)}, t);
    return {ctx.b.and_(v[0], v[1])};
  }
  // In op-math precision: a Python scalar times a half tensor is not rounded
  // to the half type first (PyTorch's CPU kernel keeps it in f32).
  Values v = promoted(ctx, {&args.at(0), &args.at(1)}, opmath(t));
  return {cast(ctx.b, ctx.b.mul(v[0], v[1]), t)};
}

Value true_div(Context& ctx, const Arg& x, const Arg& y) {
  E t = to_float(ctx, result_type(ctx, {&x, &y}));
  Values v = promoted(ctx, {&x, &y}, opmath(t));
  return cast(ctx.b, ctx.b.div(v[0], v[1]), t);
}

// Python's floor division. Integers: the truncated quotient, one less when
// the remainder is nonzero and the signs differ. Floats: PyTorch's
// div_floor_floating, which goes through fmod so that the quotient is exact
// even where x / y rounds to an integer it should not reach.
Value floor_div(Builder& b, Value x, Value y) {
  E t = x.dtype();
  if (hlo::is_unsigned(t)) return b.div(x, y);
  Value r = b.rem(x, y);
  Value zero = splat(b, 0, x);
  Value signs_differ =
      b.compare(is_negative(b, r), is_negative(b, y), Compare::NE);
  Value adjust = b.and_(b.compare(r, zero, Compare::NE), signs_differ);
  if (!hlo::is_float(t)) return b.sub(b.div(x, y), b.convert(adjust, t));
  Value one = splat(b, 1, x);
  Value quotient = b.div(b.sub(x, r), y);
  quotient = b.select(adjust, b.sub(quotient, one), quotient);
  Value fl = b.floor(quotient);
  fl = b.select(b.compare(b.sub(quotient, fl), splat(b, 0.5, x), Compare::GT), b.add(fl, one), fl);
  Value plain = b.div(x, y);
  // A zero quotient takes the sign of x / y; x / y is finite here.
  Value result = b.select(b.compare(quotient, zero, Compare::NE), fl, b.mul(plain, zero));
  return b.select(b.compare(y, zero, Compare::EQ), plain, result);
}

Value rounded_div(Context& ctx, const Arg& x, const Arg& y, bool floor) {
  E t = result_type(ctx, {&x, &y});
  check_dtype(t != E::Bool, floor ? "div_floor_cpu" : "div_trunc_cpu", t);
  Values v = promoted(ctx, {&x, &y}, t);
  Builder& b = ctx.b;
  if (floor) return floor_div(b, v[0], v[1]);
  Value q = b.div(v[0], v[1]);
  return hlo::is_float(t) ? trunc_(b, q) : q;
}

Values lower_div(Context& ctx, const Args& args) { return {true_div(ctx, args.at(0), args.at(1))}; }

Values lower_div_mode(Context& ctx, const Args& args) {
  const Arg& mode = args.at(2);
  if (mode.is_none()) return lower_div(ctx, args);
  TPU_CHECK(mode.s == "trunc" || mode.s == "floor", ErrorKind::Runtime,
            "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '",
            mode.s, "'");
  return {rounded_div(ctx, args.at(0), args.at(1), mode.s == "floor")};
}

Values lower_floor_divide(Context& ctx, const Args& args) {
  return {rounded_div(ctx, args.at(0), args.at(1), true)};
}

// Python's modulo: the result has the sign of the divisor.
Values lower_remainder(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  E t = result_type(ctx, {&args.at(0), &args.at(1)});
  check_dtype(t != E::Bool, "remainder_cpu", t);
  Values v = promoted(ctx, {&args.at(0), &args.at(1)}, t);
  Value r = b.rem(v[0], v[1]);
  if (hlo::is_unsigned(t)) return {r};
  Value fix = b.and_(b.compare(r, splat(b, 0, r), Compare::NE),
                     b.compare(is_negative(b, r), is_negative(b, v[1]), Compare::NE));
  return {b.select(fix, b.add(r, v[1]), r)};
}

Values lower_fmod(Context& ctx, const Args& args) {
  E t = result_type(ctx, {&args.at(0), &args.at(1)});
  check_dtype(t != E::Bool, "fmod_cpu", t);
  Values v = promoted(ctx, {&args.at(0), &args.at(1)}, t);
  return {ctx.b.rem(v[0], v[1])};
}

Values lower_pow(Context& ctx, const Args& args) {
  E t = result_type(ctx, {&args.at(0), &args.at(1)});
  check_dtype(t != E::Bool, "pow", t);
  Values v = promoted(ctx, {&args.at(0), &args.at(1)}, opmath(t));
  return {cast(ctx.b, ctx.b.pow(v[0], v[1]), t)};
}

// pow(Tensor, Scalar) sees the exponent (static numbers): PyTorch rejects
// negative integer powers of integers and computes the common exponents with
// multiplications and roots instead of pow.
Values lower_pow_scalar(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  const Arg& e = args.at(1);
  E t = result_type(ctx, {&args.at(0), &e});
  bool complex_exp = e.number.kind == Number::Kind::Complex;
  double p = e.number.as_double();
  Value x = cast(b, self_of(args), t);
  // Powers 0 and 1 come before the type checks in PyTorch too (bool works).
  if (!complex_exp && p == 0) return {splat(b, 1, x)};
  if (!complex_exp && p == 1) return {x};
  check_dtype(t != E::Bool, "pow", t);
  bool int_exp = e.number.kind == Number::Kind::Int || e.number.kind == Number::Kind::Bool;
  TPU_CHECK(!(hlo::is_integral(t) && int_exp && e.number.i < 0), ErrorKind::Runtime,
            "Integers to negative integer powers are not allowed.");
  if (!complex_exp) {
    // Half types multiply in f32 and round once.
    if (p == 2 || p == 3) {
      Value xc = cast(b, x, opmath(t));
      Value sq = b.mul(xc, xc);
      return {cast(b, p == 2 ? sq : b.mul(sq, xc), t)};
    }
    if (hlo::is_float(t)) {
      if (p == 0.5) return {b.sqrt(x)};
      if (p == -0.5) return {b.rsqrt(x)};
      if (p == -1) return {reciprocal_(b, x)};
      if (p == -2) return {reciprocal_(b, b.mul(x, x))};
    }
  }
  E c = opmath(t);
  Value xc = cast(b, x, c);
  return {cast(b, b.pow(xc, broadcast_to(b, operand(ctx, e, c), x.shape())), t)};
}

Values lower_maximum(Context& ctx, const Args& args) {
  E t = result_type(ctx, {&args.at(0), &args.at(1)});
  TPU_CHECK(!hlo::is_complex(t), ErrorKind::Runtime, "maximum not implemented for complex tensors.");
  Values v = promoted(ctx, {&args.at(0), &args.at(1)}, t);
  return {nan_max(ctx.b, v[0], v[1])};
}

Values lower_minimum(Context& ctx, const Args& args) {
  E t = result_type(ctx, {&args.at(0), &args.at(1)});
  TPU_CHECK(!hlo::is_complex(t), ErrorKind::Runtime, "minimum not implemented for complex tensors.");
  Values v = promoted(ctx, {&args.at(0), &args.at(1)}, t);
  return {nan_min(ctx.b, v[0], v[1])};
}

// clamp with optional bounds (Number or Tensor); a NaN input or bound gives
// NaN, as on the CPU.
Value clamp_impl(Context& ctx, const Arg& x_arg, const Arg* lo, const Arg* hi) {
  if (lo && lo->is_none()) lo = nullptr;
  if (hi && hi->is_none()) hi = nullptr;
  TPU_CHECK(lo || hi, ErrorKind::Runtime,
            "torch.clamp: At least one of 'min' or 'max' must not be None");
  std::vector<const Arg*> all{&x_arg};
  if (lo) all.push_back(lo);
  if (hi) all.push_back(hi);
  E t = result_type(ctx, all);
  TPU_CHECK(!hlo::is_complex(t), ErrorKind::Runtime, "clamp is not supported for complex types");
  Values v = lo && hi ? promoted(ctx, {&x_arg, lo, hi}, t)
                      : promoted(ctx, {&x_arg, lo ? lo : hi}, t);
  Value r = v[0];
  if (lo) r = nan_max(ctx.b, r, v[1]);
  if (hi) r = nan_min(ctx.b, r, v.back());
  return r;
}

Values lower_clamp(Context& ctx, const Args& args) {
  return {clamp_impl(ctx, args.at(0), &args.at(1), &args.at(2))};
}
Values lower_clamp_min(Context& ctx, const Args& args) {
  return {clamp_impl(ctx, args.at(0), &args.at(1), nullptr)};
}
Values lower_clamp_max(Context& ctx, const Args& args) {
  return {clamp_impl(ctx, args.at(0), nullptr, &args.at(1))};
}

// lerp with PyTorch's two-sided formula, which is exact at both ends.
Values lower_lerp(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value self = self_of(args);
  E t = self.dtype();
  const Arg& end = args.at(1);
  const Arg& weight = args.at(2);
  TPU_CHECK(end.as_tensor().dtype() == t, ErrorKind::Runtime, "expected dtype ",
            type_meta_name(t), " for `end` but got dtype ", type_meta_name(end.tensor.dtype()));
  if (weight.kind == Arg::Kind::Tensor)
    TPU_CHECK(weight.tensor.dtype() == t, ErrorKind::Runtime, "expected dtype ", type_meta_name(t),
              " for `weight` but got dtype ", type_meta_name(weight.tensor.dtype()));
  check_dtype(hlo::is_float(t) || hlo::is_complex(t), "lerp_kernel_scalar", t);
  Values v = promoted(ctx, {&args.at(0), &end, &weight}, opmath(t));
  Value s = v[0], e = v[1], w = v[2];
  Value diff = b.sub(e, s);
  Value aw = b.abs(w);  // real for complex weights
  Value small = b.compare(aw, splat(b, 0.5, aw), Compare::LT);
  Value from_start = b.add(s, b.mul(w, diff));
  Value from_end = b.sub(e, b.mul(diff, b.sub(splat(b, 1, w), w)));
  return {cast(b, b.select(small, from_start, from_end), t)};
}

Values lower_addcmul(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  E t = result_type(ctx, {&args.at(0), &args.at(1), &args.at(2)});
  E c = opmath(t);
  Values v = promoted(ctx, {&args.at(0), &args.at(1), &args.at(2)}, c);
  Value value = broadcast_to(b, operand(ctx, args.at(3), c), v[0].shape());
  if (c == E::Bool) return {b.or_(v[0], b.and_(b.and_(value, v[1]), v[2]))};
  return {cast(b, b.add(v[0], b.mul(b.mul(value, v[1]), v[2])), t)};
}

Values lower_addcdiv(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  TPU_CHECK(!(is_int_or_bool(arg_dtype(ctx, args.at(1))) && is_int_or_bool(arg_dtype(ctx, args.at(2)))),
            ErrorKind::Runtime,
            "Integer division with addcdiv is no longer supported, and in a future  release "
            "addcdiv will perform a true division of tensor1 and tensor2. The historic addcdiv "
            "behavior can be implemented as (input + value * torch.trunc(tensor1 / "
            "tensor2)).to(input.dtype) for integer inputs and as (input + value * tensor1 / "
            "tensor2) for float inputs. The future addcdiv behavior is just the latter "
            "implementation: (input + value * tensor1 / tensor2), for all dtypes.");
  E t = result_type(ctx, {&args.at(0), &args.at(1), &args.at(2)});
  E c = opmath(t);
  Values v = promoted(ctx, {&args.at(0), &args.at(1), &args.at(2)}, c);
  Value value = broadcast_to(b, operand(ctx, args.at(3), c), v[0].shape());
  return {cast(b, b.add(v[0], b.div(b.mul(value, v[1]), v[2])), t)};
}

Values lower_where(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value cond = args.at(0).as_tensor();
  // uint8 masks are deprecated in PyTorch but still accepted.
  if (cond.dtype() == E::U8) cond = b.compare(cond, splat(b, 0, cond), Compare::NE);
  TPU_CHECK(cond.dtype() == E::Bool, ErrorKind::Runtime,
            "where expected condition to be a boolean tensor, but got a tensor with dtype ",
            scalar_type_name(cond.dtype()));
  E t = result_type(ctx, {&args.at(1), &args.at(2)});
  Values v = promoted(ctx, {&args.at(1), &args.at(2)}, t);
  Shape shape = broadcast_shapes(cond.shape(), v[0].shape());
  return {b.select(broadcast_to(b, cond, shape), broadcast_to(b, v[0], shape),
                   broadcast_to(b, v[1], shape))};
}

// atan2, hypot, copysign, xlogy, logaddexp: float results, integer inputs in
// the default float type.
Values float_operands(Context& ctx, const Args& args) {
  E t = to_float(ctx, result_type(ctx, {&args.at(0), &args.at(1)}));
  return promoted(ctx, {&args.at(0), &args.at(1)}, t);
}

// Ops PyTorch only has float kernels for, computed in op-math precision.
Values float_only_operands(Context& ctx, const Args& args, const char* kernel) {
  E t = result_type(ctx, {&args.at(0), &args.at(1)});
  check_dtype(hlo::is_float(t), kernel, t);
  return promoted(ctx, {&args.at(0), &args.at(1)}, opmath(t));
}

Values lower_atan2(Context& ctx, const Args& args) {
  Values v = float_operands(ctx, args);
  E t = v[0].dtype();
  return {cast(ctx.b, ctx.b.atan2(cast(ctx.b, v[0], opmath(t)), cast(ctx.b, v[1], opmath(t))), t)};
}

// hypot scaled by the larger magnitude so that squares neither overflow nor
// underflow; an infinite side wins over NaN as in C's hypot.
Values lower_hypot(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Values v = float_only_operands(ctx, args, "hypot_cpu");
  E t = result_type(ctx, {&args.at(0), &args.at(1)});
  Value ax = b.abs(v[0]), ay = b.abs(v[1]);
  Value hi = nan_max(b, ax, ay), lo = nan_min(b, ax, ay);
  Value zero = splat(b, 0, hi);
  Value safe_hi = b.select(b.compare(hi, zero, Compare::EQ), splat(b, 1, hi), hi);
  Value r = b.div(lo, safe_hi);
  Value h = b.mul(hi, b.sqrt(b.add(splat(b, 1, hi), b.mul(r, r))));
  h = b.select(b.compare(hi, zero, Compare::EQ), zero, h);
  Value inf = splat(b, INFINITY, hi);
  Value any_inf = b.or_(b.compare(ax, inf, Compare::EQ), b.compare(ay, inf, Compare::EQ));
  return {cast(b, b.select(any_inf, inf, h), t)};
}

Values lower_copysign(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Values v = float_operands(ctx, args);
  E t = v[1].dtype();
  E bits = t == E::F64 ? E::I64 : t == E::F32 ? E::I32 : E::I16;
  Value negative = is_negative(b, b.bitcast_convert(v[1], {bits, v[1].shape()}));
  Value mag = b.abs(v[0]);
  return {b.select(negative, b.neg(mag), mag)};
}

// xlogy(x, y) = x * log(y), 0 where x == 0 unless y is NaN.
Values lower_xlogy(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Values v = float_operands(ctx, args);
  E t = v[0].dtype();
  Value x = cast(b, v[0], opmath(t)), y = cast(b, v[1], opmath(t));
  Value r = b.mul(x, b.log(y));
  Value zero_x = b.and_(is_zero(b, x), b.compare(y, y, Compare::EQ));
  return {cast(b, b.select(zero_x, splat(b, 0, r), r), t)};
}

// log(exp(x) + exp(y)) for real parts +inf, with C's complex rules (the
// CPU's std::exp and std::log): exp(inf + iy) is inf (cos y + i sin y), and
// exactly inf + 0i at y = 0; log of an infinite value is +inf + i arg.
Value log_sum_at_inf(Builder& b, Value x, Value y) {
  Value inf = splat(b, INFINITY, b.real(x)), zero = splat(b, 0, b.real(x));
  auto part = [&](Value im, bool cosine) {
    Value at_zero = cosine ? inf : zero;
    Value v = b.mul(inf, cosine ? b.cosine(im) : b.sine(im));
    return b.select(b.compare(im, zero, Compare::EQ), at_zero, v);
  };
  Value re = b.add(part(b.imag(x), true), part(b.imag(y), true));
  Value im = b.add(part(b.imag(x), false), part(b.imag(y), false));
  return b.complex(inf, b.atan2(im, re));
}

// Complex operands as the CPU's kernel: ordered by real part, max +
// log1p(exp(min - max)); NaN in the smaller gives NaN; equal infinite real
// parts give the smaller (-inf) or log(exp(min) + exp(max)) (+inf).
Value complex_logaddexp(Builder& b, Value x, Value y) {
  Value x_first = b.compare(b.real(x), b.real(y), Compare::LT);
  Value lo = b.select(x_first, x, y), hi = b.select(x_first, y, x);
  Value lo_re = b.real(lo), hi_re = b.real(hi);
  Value r = b.add(b.log1p(b.exp(b.sub(lo, hi))), hi);
  Value both_inf = b.and_(is_inf(b, lo_re), b.compare(lo_re, hi_re, Compare::EQ));
  Value at_inf = b.select(b.compare(lo_re, splat(b, 0, lo_re), Compare::LT), lo, log_sum_at_inf(b, lo, hi));
  r = b.select(both_inf, at_inf, r);
  Value nan = splat(b, NAN, lo_re);
  return b.select(b.or_(is_nan(b, lo_re), is_nan(b, b.imag(lo))), b.complex(nan, nan), r);
}

// log(exp(x) + exp(y)) = max + log1p(exp(-|x - y|)); equal infinities would
// make x - y NaN and are their own answer.
Values lower_logaddexp(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  E t = result_type(ctx, {&args.at(0), &args.at(1)});
  if (hlo::is_complex(t)) {
    Values c = promoted(ctx, {&args.at(0), &args.at(1)}, t);
    return {complex_logaddexp(b, c[0], c[1])};
  }
  Values v = float_only_operands(ctx, args, "logaddexp_cpu");
  Value hi = b.max(v[0], v[1]);
  Value r = b.add(hi, b.log1p(b.exp(b.neg(b.abs(b.sub(v[0], v[1]))))));
  Value same_inf = b.and_(b.compare(v[0], v[1], Compare::EQ), is_inf(b, v[0]));
  return {cast(b, b.select(same_inf, v[0], r), t)};
}

// ---- comparisons, logical and bitwise ops

template <Compare D>
Values lower_compare(Context& ctx, const Args& args) {
  E t = result_type(ctx, {&args.at(0), &args.at(1)});
  Values v = promoted(ctx, {&args.at(0), &args.at(1)}, t);
  return {ctx.b.compare(v[0], v[1], D)};
}

Value truth(Builder& b, Value v) {
  return v.dtype() == E::Bool ? v : b.compare(v, splat(b, 0, v), Compare::NE);
}

template <Value (Builder::*M)(Value, Value)>
Values lower_logical(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value x = truth(b, args.at(0).as_tensor()), y = truth(b, args.at(1).as_tensor());
  Shape shape = broadcast_shapes(x.shape(), y.shape());
  return {(b.*M)(broadcast_to(b, x, shape), broadcast_to(b, y, shape))};
}

Values lower_logical_not(Context& ctx, const Args& args) {
  return {ctx.b.not_(truth(ctx.b, self_of(args)))};
}

template <Value (Builder::*M)(Value, Value), const char* Kernel>
Values lower_bitwise(Context& ctx, const Args& args) {
  E t = result_type(ctx, {&args.at(0), &args.at(1)});
  check_dtype(is_int_or_bool(t), Kernel, t);
  Values v = promoted(ctx, {&args.at(0), &args.at(1)}, t);
  return {(ctx.b.*M)(v[0], v[1])};
}
constexpr char kBitwiseAnd[] = "bitwise_and_cpu";
constexpr char kBitwiseOr[] = "bitwise_or_cpu";
constexpr char kBitwiseXor[] = "bitwise_xor_cpu";

Values lower_bitwise_not(Context& ctx, const Args& args) {
  Value x = self_of(args);
  check_dtype(is_int_or_bool(x.dtype()), "bitwise_not_cpu", x.dtype());
  return {ctx.b.not_(x)};
}

// Shifts by PyTorch's rules: a count past the width gives 0 (left, and right
// for unsigned) or the sign fill (right for signed).
template <bool Left>
Values lower_shift(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  E t = result_type(ctx, {&args.at(0), &args.at(1)});
  check_dtype(hlo::is_integral(t), Left ? "lshift_cpu" : "rshift_cpu", t);
  Values v = promoted(ctx, {&args.at(0), &args.at(1)}, t);
  Value x = v[0], n = v[1];
  double width = static_cast<double>(hlo::byte_size(t) * 8);
  Value too_far = b.or_(b.compare(n, splat(b, width, n), Compare::GE),
                        hlo::is_unsigned(t) ? b.full(0, E::Bool, n.shape()) : is_negative(b, n));
  if (Left) return {b.select(too_far, splat(b, 0, x), b.shift_left(x, n))};
  if (hlo::is_unsigned(t)) return {b.select(too_far, splat(b, 0, x), b.shift_right_logical(x, n))};
  Value capped = b.select(too_far, splat(b, width - 1, n), n);
  return {b.shift_right_arithmetic(x, capped)};
}

}  // namespace

// Sorted by op name.
TPU_LOWERING("aten::__lshift__.Scalar", lower_shift<true>);
TPU_LOWERING("aten::__lshift__.Tensor", lower_shift<true>);
TPU_LOWERING("aten::__rshift__.Scalar", lower_shift<false>);
TPU_LOWERING("aten::__rshift__.Tensor", lower_shift<false>);
TPU_LOWERING("aten::abs", lower_abs);
TPU_LOWERING("aten::acos", float_unary<acos_>);
TPU_LOWERING("aten::acosh", float_unary<acosh_>);
TPU_LOWERING("aten::add.Scalar", lower_add);
TPU_LOWERING("aten::add.Tensor", lower_add);
TPU_LOWERING("aten::addcdiv", lower_addcdiv);
TPU_LOWERING("aten::addcmul", lower_addcmul);
TPU_LOWERING("aten::angle", lower_angle);
TPU_LOWERING("aten::asin", float_unary<asin_>);
TPU_LOWERING("aten::asinh", float_unary<asinh_>);
TPU_LOWERING("aten::atan", float_unary<atan_>);
TPU_LOWERING("aten::atan2", lower_atan2);
TPU_LOWERING("aten::atanh", float_unary<atanh_>);
TPU_LOWERING("aten::bitwise_and.Scalar", lower_bitwise<&Builder::and_, kBitwiseAnd>);
TPU_LOWERING("aten::bitwise_and.Tensor", lower_bitwise<&Builder::and_, kBitwiseAnd>);
TPU_LOWERING("aten::bitwise_left_shift.Tensor", lower_shift<true>);
TPU_LOWERING("aten::bitwise_not", lower_bitwise_not);
TPU_LOWERING("aten::bitwise_or.Scalar", lower_bitwise<&Builder::or_, kBitwiseOr>);
TPU_LOWERING("aten::bitwise_or.Tensor", lower_bitwise<&Builder::or_, kBitwiseOr>);
TPU_LOWERING("aten::bitwise_right_shift.Tensor", lower_shift<false>);
TPU_LOWERING("aten::bitwise_xor.Scalar", lower_bitwise<&Builder::xor_, kBitwiseXor>);
TPU_LOWERING("aten::bitwise_xor.Tensor", lower_bitwise<&Builder::xor_, kBitwiseXor>);
TPU_LOWERING("aten::ceil", rounding_unary<method<&Builder::ceil>, kCeil>);
TPU_LOWERING("aten::clamp", lower_clamp);
TPU_LOWERING("aten::_conj_physical", lower_conj_physical);
TPU_LOWERING("aten::clamp.Tensor", lower_clamp);
TPU_LOWERING("aten::clamp_max", lower_clamp_max);
TPU_LOWERING("aten::clamp_max.Tensor", lower_clamp_max);
TPU_LOWERING("aten::clamp_min", lower_clamp_min);
TPU_LOWERING("aten::clamp_min.Tensor", lower_clamp_min);
// The CompositeImplicit conj_physical keeps its decomposition (and autograd
// formula, op_kernel.cpp skips it); this entry routes conj_physical_ and
// conj_physical.out, which have CPU kernels of their own.
TPU_LOWERING("aten::conj_physical", lower_conj_physical);
TPU_LOWERING("aten::copysign.Tensor", lower_copysign);
TPU_LOWERING("aten::cos", float_unary<method<&Builder::cosine>>);
TPU_LOWERING("aten::cosh", float_unary<cosh_>);
TPU_LOWERING("aten::div.Scalar", lower_div);
TPU_LOWERING("aten::div.Scalar_mode", lower_div_mode);
TPU_LOWERING("aten::div.Tensor", lower_div);
TPU_LOWERING("aten::div.Tensor_mode", lower_div_mode);
TPU_LOWERING("aten::eq.Scalar", lower_compare<Compare::EQ>);
TPU_LOWERING("aten::eq.Tensor", lower_compare<Compare::EQ>);
TPU_LOWERING("aten::erf", float_unary<erf_>);
TPU_LOWERING("aten::erfc", float_unary<erfc_>);
TPU_LOWERING("aten::erfinv", float_unary<erfinv_>);
TPU_LOWERING("aten::exp", float_unary<method<&Builder::exp>>);
TPU_LOWERING("aten::exp2", float_unary<exp2_>);
TPU_LOWERING("aten::expm1", float_unary<method<&Builder::expm1>>);
TPU_LOWERING("aten::floor", rounding_unary<method<&Builder::floor>, kFloor>);
TPU_LOWERING("aten::floor_divide", lower_floor_divide);
TPU_LOWERING("aten::floor_divide.Scalar", lower_floor_divide);
TPU_LOWERING("aten::fmod.Scalar", lower_fmod);
TPU_LOWERING("aten::fmod.Tensor", lower_fmod);
TPU_LOWERING("aten::frac", lower_frac);
TPU_LOWERING("aten::ge.Scalar", lower_compare<Compare::GE>);
TPU_LOWERING("aten::ge.Tensor", lower_compare<Compare::GE>);
TPU_LOWERING("aten::gt.Scalar", lower_compare<Compare::GT>);
TPU_LOWERING("aten::gt.Tensor", lower_compare<Compare::GT>);
TPU_LOWERING("aten::hypot", lower_hypot);
TPU_LOWERING("aten::isinf", float_predicate<is_inf>);
TPU_LOWERING("aten::isnan", float_predicate<is_nan>);
TPU_LOWERING("aten::isneginf", float_predicate<isneginf_>);
TPU_LOWERING("aten::isposinf", float_predicate<isposinf_>);
TPU_LOWERING("aten::le.Scalar", lower_compare<Compare::LE>);
TPU_LOWERING("aten::le.Tensor", lower_compare<Compare::LE>);
TPU_LOWERING("aten::lerp.Scalar", lower_lerp);
TPU_LOWERING("aten::lerp.Tensor", lower_lerp);
TPU_LOWERING("aten::log", float_unary<method<&Builder::log>>);
TPU_LOWERING("aten::log10", float_unary<log10_>);
TPU_LOWERING("aten::log1p", float_unary<method<&Builder::log1p>>);
TPU_LOWERING("aten::log2", float_unary<log2_>);
TPU_LOWERING("aten::logaddexp", lower_logaddexp);
TPU_LOWERING("aten::logical_and", lower_logical<&Builder::and_>);
TPU_LOWERING("aten::logical_not", lower_logical_not);
TPU_LOWERING("aten::logical_or", lower_logical<&Builder::or_>);
TPU_LOWERING("aten::logical_xor", lower_logical<&Builder::xor_>);
TPU_LOWERING("aten::lt.Scalar", lower_compare<Compare::LT>);
TPU_LOWERING("aten::lt.Tensor", lower_compare<Compare::LT>);
TPU_LOWERING("aten::maximum", lower_maximum);
TPU_LOWERING("aten::minimum", lower_minimum);
TPU_LOWERING("aten::mul.Scalar", lower_mul);
TPU_LOWERING("aten::mul.Tensor", lower_mul);
TPU_LOWERING("aten::nan_to_num", lower_nan_to_num);
TPU_LOWERING("aten::ne.Scalar", lower_compare<Compare::NE>);
TPU_LOWERING("aten::ne.Tensor", lower_compare<Compare::NE>);
TPU_LOWERING("aten::neg", lower_neg);
TPU_LOWERING("aten::pow.Scalar", lower_pow);
TPU_LOWERING("aten::pow.Tensor_Scalar", lower_pow_scalar, /*static_numbers=*/true);
TPU_LOWERING("aten::pow.Tensor_Tensor", lower_pow);
TPU_LOWERING("aten::reciprocal", float_unary<reciprocal_>);
TPU_LOWERING("aten::remainder.Scalar", lower_remainder);
TPU_LOWERING("aten::remainder.Scalar_Tensor", lower_remainder);
TPU_LOWERING("aten::remainder.Tensor", lower_remainder);
TPU_LOWERING("aten::round", rounding_unary<method<&Builder::round_nearest_even>, kRound>);
TPU_LOWERING("aten::round.decimals", lower_round_decimals);
TPU_LOWERING("aten::rsqrt", float_unary<rsqrt_>);
TPU_LOWERING("aten::rsub.Scalar", lower_rsub);
TPU_LOWERING("aten::rsub.Tensor", lower_rsub);
TPU_LOWERING("aten::sgn", lower_sgn);
TPU_LOWERING("aten::sigmoid", float_unary<method<&Builder::logistic>>);
TPU_LOWERING("aten::sign", lower_sign);
TPU_LOWERING("aten::signbit", lower_signbit);
TPU_LOWERING("aten::sin", float_unary<method<&Builder::sine>>);
TPU_LOWERING("aten::sinh", float_unary<sinh_>);
TPU_LOWERING("aten::sqrt", float_unary<method<&Builder::sqrt>>);
TPU_LOWERING("aten::sub.Scalar", lower_sub);
TPU_LOWERING("aten::sub.Tensor", lower_sub);
TPU_LOWERING("aten::tan", float_unary<method<&Builder::tan>>);
TPU_LOWERING("aten::tanh", float_unary<method<&Builder::tanh>>);
TPU_LOWERING("aten::trunc", rounding_unary<trunc_, kTrunc>);
TPU_LOWERING("aten::where.self", lower_where);
TPU_LOWERING("aten::xlogy.Tensor", lower_xlogy);

}  // namespace torch_tpu::lowering
