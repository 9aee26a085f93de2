// Elementwise math functions of one tensor: erf, erfc and erfinv,
// exponentials and logarithms, trigonometric and hyperbolic functions (with
// their complex forms), rounding, abs, neg, sign and sgn, angle, conj, and
// the float predicates (isinf, isnan, signbit, nan_to_num). Types follow
// PyTorch's promotion; integer and NaN edge cases follow PyTorch's CPU
// kernels, which are the reference. Arithmetic is in arithmetic.cpp,
// comparisons and bitwise ops in compare_logical_bitwise.cpp.
#include <cmath>
#include <string>

#include "lowering/common.h"
#include "lowering/elementwise_internal.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

using namespace elementwise;

namespace {

// ---- small helpers

// c[0] + c[1] x + c[2] x^2 + ...
Value horner(Builder& b, Value x, const double* c, int n) {
  Value p = splat(b, c[n - 1], x);
  for (int i = n - 2; i >= 0; --i) p = b.add(b.mul(p, x), splat(b, c[i], x));
  return p;
}

// An odd function's value from r = f(|x|): -r below 0, and x itself at ±0 so
// that f(-0) is -0, as the CPU computes it.
Value odd(Builder& b, Value x, Value r) {
  Value signed_r = b.select(is_negative(b, x), b.neg(r), r);
  return b.select(b.compare(x, splat(b, 0, x), Compare::EQ), x, signed_r);
}

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

// Past |x| = 3.92, the sign of x times `one`; else r clamped to [-one, one].
Value erf_saturated(Builder& b, Value x, Value r, Value one) {
  r = b.clamp(b.neg(one), r, one);
  Value saturated = b.select(is_negative(b, x), b.neg(one), one);
  return b.select(b.compare(b.abs(x), splat(b, 3.92, x), Compare::GE), saturated, r);
}

// x clamped to [-4, 4], and P and Q of its square.
struct ErfTerms {
  Value c, p, q;
};
ErfTerms erf_terms(Builder& b, Value x) {
  Value c = b.clamp(splat(b, -4, x), x, splat(b, 4, x));
  Value s = b.mul(c, c);
  return {c, horner(b, s, kErfP, 7), horner(b, s, kErfQ, 5)};
}

Value erf_rational(Builder& b, Value x) {
  ErfTerms t = erf_terms(b, x);
  return erf_saturated(b, x, b.mul(t.c, b.div(t.p, t.q)), splat(b, 1, x));
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

ErfFraction erf_fraction(Builder& b, Value x) {
  TPU_CHECK(x.dtype() == E::F32, ErrorKind::Runtime, "erf_fraction takes f32, got ", hlo::short_name(x.dtype()));
  ErfTerms t = erf_terms(b, x);
  return {erf_saturated(b, x, b.mul(t.c, t.p), t.q), t.q};
}

namespace {

// ---- unary ops

template <Value (Builder::*M)(Value)>
Value method(Builder& b, Value x) {
  return (b.*M)(x);
}

Value exp2_(Builder& b, Value x) { return b.pow(splat(b, 2, x), x); }
Value log2_impl(Builder& b, Value x) { return b.div(b.log(x), splat(b, M_LN2, x)); }
Value log10_impl(Builder& b, Value x) { return b.div(b.log(x), splat(b, M_LN10, x)); }
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

}  // namespace

// Sorted by op name.
TPU_LOWERING("aten::abs", lower_abs);
TPU_LOWERING("aten::acos", float_unary<acos_>);
TPU_LOWERING("aten::acosh", float_unary<acosh_>);
TPU_LOWERING("aten::angle", lower_angle);
TPU_LOWERING("aten::asin", float_unary<asin_>);
TPU_LOWERING("aten::asinh", float_unary<asinh_>);
TPU_LOWERING("aten::atan", float_unary<atan_>);
TPU_LOWERING("aten::atanh", float_unary<atanh_>);
TPU_LOWERING("aten::ceil", rounding_unary<method<&Builder::ceil>, kCeil>);
TPU_LOWERING("aten::_conj_physical", lower_conj_physical);
// The CompositeImplicit conj_physical keeps its decomposition (and autograd
// formula, op_kernel.cpp skips it); this entry routes conj_physical_ and
// conj_physical.out, which have CPU kernels of their own.
TPU_LOWERING("aten::conj_physical", lower_conj_physical);
TPU_LOWERING("aten::cos", float_unary<method<&Builder::cosine>>);
TPU_LOWERING("aten::cosh", float_unary<cosh_>);
TPU_LOWERING("aten::erf", float_unary<erf_>);
TPU_LOWERING("aten::erfc", float_unary<erfc_>);
TPU_LOWERING("aten::erfinv", float_unary<erfinv_>);
TPU_LOWERING("aten::exp", float_unary<method<&Builder::exp>>);
TPU_LOWERING("aten::exp2", float_unary<exp2_>);
TPU_LOWERING("aten::expm1", float_unary<method<&Builder::expm1>>);
TPU_LOWERING("aten::floor", rounding_unary<method<&Builder::floor>, kFloor>);
TPU_LOWERING("aten::frac", lower_frac);
TPU_LOWERING("aten::isinf", float_predicate<is_inf>);
TPU_LOWERING("aten::isnan", float_predicate<is_nan>);
TPU_LOWERING("aten::isneginf", float_predicate<isneginf_>);
TPU_LOWERING("aten::isposinf", float_predicate<isposinf_>);
TPU_LOWERING("aten::log", float_unary<method<&Builder::log>>);
TPU_LOWERING("aten::log10", float_unary<log10_>);
TPU_LOWERING("aten::log1p", float_unary<method<&Builder::log1p>>);
TPU_LOWERING("aten::log2", float_unary<log2_>);
TPU_LOWERING("aten::nan_to_num", lower_nan_to_num);
TPU_LOWERING("aten::neg", lower_neg);
TPU_LOWERING("aten::reciprocal", float_unary<reciprocal_>);
TPU_LOWERING("aten::round", rounding_unary<method<&Builder::round_nearest_even>, kRound>);
TPU_LOWERING("aten::round.decimals", lower_round_decimals);
TPU_LOWERING("aten::rsqrt", float_unary<rsqrt_>);
TPU_LOWERING("aten::sgn", lower_sgn);
TPU_LOWERING("aten::sigmoid", float_unary<method<&Builder::logistic>>);
TPU_LOWERING("aten::sign", lower_sign);
TPU_LOWERING("aten::signbit", lower_signbit);
TPU_LOWERING("aten::sin", float_unary<method<&Builder::sine>>);
TPU_LOWERING("aten::sinh", float_unary<sinh_>);
TPU_LOWERING("aten::sqrt", float_unary<method<&Builder::sqrt>>);
TPU_LOWERING("aten::tan", float_unary<method<&Builder::tan>>);
TPU_LOWERING("aten::tanh", float_unary<method<&Builder::tanh>>);
TPU_LOWERING("aten::trunc", rounding_unary<trunc_, kTrunc>);

}  // namespace torch_tpu::lowering
