// Special functions (gamma family, Bessel I0/I1, logit, sinc, entr, erfcx,
// log_ndtr, ndtri) and the remaining float/integer binary ops (heaviside,
// fmin/fmax, logaddexp2, nextafter, gcd/lcm, xlog1py). The series and
// Chebyshev expansions are those of PyTorch's CPU kernels (Cephes), unrolled
// into straight-line code; half types compute in float as PyTorch does.
#include <cmath>
#include <initializer_list>
#include <limits>

#include "lowering/common.h"
#include "lowering/registry.h"
#include "lowering/series.h"

namespace torch_tpu::lowering {

namespace {

using hlo::Builder;
using hlo::Compare;
using E = ElementType;
using Values = std::vector<Value>;

Value trunc_(Builder& b, Value x) { return b.select(lt(b, x, 0), b.ceil(x), b.floor(x)); }

// ---- gamma family

Value digamma_impl(Builder& b, Value x) {
  Value neg = lt(b, x, 0);
  Value xr = b.select(neg, b.sub(splat(b, 1, x), x), x);
  // tan has period pi: reduced to the nearest integer (an exact subtraction),
  // pi * r stays accurate beside every pole, where tan's argument near pi
  // would lose digits (the CPU computes this term in double).
  Value r = b.sub(x, b.round_nearest_even(x));
  Value refl = b.div(splat(b, kPi, x), b.tan(b.mul(splat(b, kPi, x), r)));
  Value result = splat(b, 0, x), xx = xr;
  for (int i = 0; i < 10; ++i) {
    Value m = lt(b, xx, 10);
    result = b.select(m, b.sub(result, recip(b, xx)), result);
    xx = b.select(m, b.add(xx, splat(b, 1, x)), xx);
  }
  static const double A[] = {8.33333333333333333333E-2, -2.10927960927960927961E-2,
                             7.57575757575757575758E-3, -4.16666666666666666667E-3,
                             3.96825396825396825397E-3, -8.33333333333333333333E-3,
                             8.33333333333333333333E-2};
  Value z = recip(b, b.mul(xx, xx));
  Value y = b.select(lt(b, xx, 1e17), b.mul(z, polevl(b, z, A, 6)), splat(b, 0, x));
  Value asym = b.sub(b.sub(b.add(result, b.log(xx)), b.div(splat(b, 0.5, x), xx)), y);
  Value v = b.select(eq(b, xx, 10), b.add(result, splat(b, 2.25175258906672110764, x)), asym);
  v = b.select(neg, b.sub(v, refl), v);
  v = b.select(b.and_(neg, b.compare(x, trunc_(b, x), Compare::EQ)), splat(b, NAN, x), v);
  return b.select(eq(b, x, 0), b.neg(recip(b, x)), v);
}

Value trigamma_impl(Builder& b, Value x) {
  Value refl = lt(b, x, 0.5);
  // sin(pi x) as the CPU computes it: where pi x loses its digits (beside a
  // pole, or |x| past 2^23) the CPU's result follows that rounding.
  Value s = b.sine(b.mul(splat(b, kPi, x), x));
  Value result = b.select(refl, b.neg(b.div(splat(b, kPi * kPi, x), b.mul(s, s))), splat(b, 0, x));
  Value xx = b.select(refl, b.sub(splat(b, 1, x), x), x);
  for (int i = 0; i < 6; ++i) {
    result = b.add(result, recip(b, b.mul(xx, xx)));
    xx = b.add(xx, splat(b, 1, x));
  }
  Value ixx = recip(b, b.mul(xx, xx));
  // 1 + 1/(2x) + ixx (1/6 - ixx (1/30 - ixx / 42))
  Value inner = b.sub(splat(b, 1. / 30, x), b.mul(ixx, splat(b, 1. / 42, x)));
  inner = b.sub(splat(b, 1. / 6, x), b.mul(ixx, inner));
  Value poly = b.add(b.add(splat(b, 1, x), recip(b, b.mul(splat(b, 2, x), xx))), b.mul(ixx, inner));
  result = b.add(result, b.div(poly, xx));
  return b.select(refl, b.neg(result), result);
}

// x^-n for a static integer n >= 1 (exact for negative bases, unlike pow).
Value pow_neg_int(Builder& b, Value x, int64_t n) {
  Value r = splat(b, 1, x), p = x;
  for (int64_t k = n; k > 0; k >>= 1) {
    if (k & 1) r = b.mul(r, p);
    if (k > 1) p = b.mul(p, p);
  }
  return recip(b, r);
}

// Hurwitz zeta(s, q) for a static integer s >= 2 (Cephes, as PyTorch).
Value zeta_int(Builder& b, int64_t s_int, Value q) {
  const double MACHEP = 1.11022302462515654042E-16;
  double x = double(s_int);
  Value s = pow_neg_int(b, q, s_int);
  Value a = q, bb = splat(b, 0, q);
  Value early = b.full(0, E::Bool, q.shape());
  Value one = splat(b, 1, q);
  // while (i < 9 || a <= 9), leaving early once a term is negligible; the
  // loop runs past 9 steps only for q < 0.
  for (int i = 0; i < 40; ++i) {
    Value active = b.not_(early);
    if (i >= 9) active = b.and_(active, le(b, a, 9));
    Value na = b.add(a, one);
    Value nb = pow_neg_int(b, na, s_int);
    Value ns = b.add(s, nb);
    a = b.select(active, na, a);
    bb = b.select(active, nb, bb);
    s = b.select(active, ns, s);
    Value tiny = b.and_(b.compare(b.mul(splat(b, -MACHEP, s), s), bb, Compare::LT),
                        b.compare(bb, b.mul(splat(b, MACHEP, s), s), Compare::LT));
    early = b.or_(early, b.and_(active, tiny));
  }
  Value w = a;
  Value st = b.add(s, b.div(b.mul(bb, w), splat(b, x - 1, q)));
  st = b.sub(st, b.mul(splat(b, 0.5, q), bb));
  Value aa = splat(b, 1, q);
  double k = 0;
  Value stop = b.full(0, E::Bool, q.shape());
  for (int i = 0; i < 12; ++i) {
    aa = b.mul(aa, splat(b, x + k, q));
    bb = b.div(bb, w);
    Value t = b.div(b.mul(aa, bb), splat(b, kZetaEulerMaclaurin[i], q));
    Value ns = b.add(st, t);
    st = b.select(stop, st, ns);
    stop = b.or_(stop, lt(b, b.abs(b.div(t, st)), MACHEP));
    k += 1;
    aa = b.mul(aa, splat(b, x + k, q));
    bb = b.div(bb, w);
    k += 1;
  }
  Value r = b.select(early, s, st);
  // q <= 0: poles at the non-positive integers.
  Value pole = b.and_(le(b, q, 0), b.compare(q, b.floor(q), Compare::EQ));
  return b.select(pole, splat(b, INFINITY, q), r);
}

// ln Gamma by Lanczos (g = 7, 9 terms) for x >= 1/2, reflection below.
Value lgamma_impl(Builder& b, Value x) {
  static const double c[] = {676.520368121885098567009190444019, -1259.13921672240287047156078755283,
                             771.3234287776530788486528258894,   -176.61502916214059906584551354,
                             12.507343278686904814458936853,     -0.13857109526572011689554707,
                             9.984369578019570859563e-6,         1.50563273514931155834e-7};
  const double g = 7;
  Value one = splat(b, 1, x);
  Value refl = lt(b, x, 0.5);
  Value y = b.select(refl, b.sub(one, x), x);
  Value z = b.sub(y, one);
  Value a = splat(b, 0.99999999999980993227684700473478, x);
  for (int i = 0; i < 8; ++i) a = b.add(a, b.div(splat(b, c[i], x), b.add(z, splat(b, i + 1, x))));
  Value t = b.add(z, splat(b, g + 0.5, x));
  Value log_t = b.add(splat(b, std::log(g + 0.5), x), b.log1p(b.div(z, splat(b, g + 0.5, x))));
  Value lg = b.add(splat(b, 0.5 * std::log(2 * kPi), x),
                   b.add(b.sub(b.mul(b.add(z, splat(b, 0.5, x)), log_t), t), b.log(a)));
  // log|sin(pi x)| from the fractional part, folded into [0, 1/2].
  Value f = b.sub(x, b.floor(x));
  f = b.min(f, b.sub(one, f));
  Value ls = b.log(b.abs(b.sine(b.mul(splat(b, kPi, x), f))));
  Value reflected = b.sub(b.sub(splat(b, std::log(kPi), x), ls), lg);
  Value r = b.select(refl, reflected, lg);
  Value inf = splat(b, INFINITY, x);
  return b.select(b.compare(b.abs(x), inf, Compare::EQ), inf, r);
}

// d x / d alpha of a draw x from Gamma(alpha) (the reparameterized
// gradient of torch.distributions' rsample), by PyTorch's approximations: a
// Taylor series of the CDF for x < 0.8, Rice's saddle point expansion for
// alpha > 8, else a rational function fitted in (log(x / alpha),
// log(alpha)). The CPU computes in double; here the series is rearranged so
// that float32 needs neither x^alpha (it underflows) nor the difference of
// two terms of size 1/alpha^2 (they cancel for small alpha):
//   -cdf_alpha / pdf = -x e^x [(log x - psi(alpha + 1)) / alpha
//                              + sum_i n_i ((log x - psi(alpha)) / (alpha + i) - 1 / (alpha + i)^2)],
// with psi(alpha + 1) = psi(alpha) + 1 / alpha. It is 0 where the CPU's
// double pdf underflows (its 0/0 is NaN, which it returns as 0).
Value gamma_grad_impl(Builder& b, Value alpha, Value x) {
  auto k = [&](double v) { return splat(b, v, x); };
  Value one = k(1), log_x = b.log(x);
  Value lead = b.sub(log_x, digamma_impl(b, alpha));
  Value sum = b.div(b.sub(log_x, digamma_impl(b, b.add(alpha, one))), alpha);
  Value numer = one, denom = alpha;
  for (int i = 1; i <= 5; ++i) {
    numer = b.mul(numer, b.div(b.neg(x), k(i)));
    denom = b.add(denom, one);
    sum = b.add(sum, b.mul(numer, b.sub(b.div(lead, denom), b.div(one, b.mul(denom, denom)))));
  }
  Value small = b.neg(b.mul(b.mul(x, b.exp(x)), sum));
  Value log_pdf = b.sub(b.mul(b.sub(alpha, one), log_x), x);
  Value underflow = b.compare(log_pdf, k(std::log(std::numeric_limits<double>::denorm_min())), Compare::LT);
  small = b.select(b.or_(is_nan(b, small), underflow), k(0), small);

  Value a2 = b.mul(alpha, alpha);
  Value numer1 = b.add(one, b.mul(b.mul(k(24), alpha), b.add(one, b.mul(k(12), alpha))));
  Value numer2 = b.add(b.sub(b.add(b.mul(k(1440), a2), b.mul(b.mul(k(6), x), b.sub(k(53), b.mul(k(120), x)))),
                             b.div(b.mul(b.mul(k(65), x), x), alpha)),
                       b.mul(alpha, b.add(k(107), b.mul(k(3600), x))));
  Value near = b.div(b.mul(numer1, numer2), b.mul(k(1244160), b.mul(a2, a2)));
  Value root = b.sqrt(b.mul(k(8), alpha));
  Value log_ratio = b.log(b.div(x, alpha));
  Value term2 = b.div(root, b.sub(alpha, x));
  Value term3 = b.pow(b.sub(b.sub(x, alpha), b.mul(alpha, log_ratio)), k(-1.5));
  Value term23 = b.select(b.compare(x, alpha, Compare::LT), b.sub(term2, term3), b.add(term2, term3));
  Value gap = b.sub(alpha, x);
  Value term1 = b.sub(b.mul(log_ratio, term23),
                      b.div(b.mul(b.sqrt(b.div(k(2), alpha)), b.add(alpha, x)), b.mul(gap, gap)));
  Value twelfth = b.div(one, b.mul(k(12), alpha));
  Value stirling = b.add(one, b.mul(twelfth, b.add(one, b.div(one, b.mul(k(24), alpha)))));
  Value far = b.neg(b.div(b.mul(stirling, b.mul(x, term1)), root));
  Value in_band = b.and_(b.compare(b.mul(k(0.9), alpha), x, Compare::LE),
                         b.compare(x, b.mul(k(1.1), alpha), Compare::LE));
  Value large = b.select(in_band, near, far);

  static const double kUV[3][8] = {
      {0.16009398, -0.094634809, 0.025146376, -0.0030648343, 1, 0.32668115, 0.10406089, 0.0014179084},
      {0.53487893, 0.1298071, 0.065735949, -0.0015649758, 0.16639465, 0.020070113, -0.0035938915,
       -0.00058392623},
      {0.040121004, -0.0065914022, -0.0026286047, -0.0013441777, 0.017050642, -0.0021309326, 0.00085092367,
       -1.5247877e-07}};
  Value v = b.log(alpha);
  Value cv[8];
  for (int i = 0; i < 8; ++i) cv[i] = b.add(k(kUV[0][i]), b.mul(log_ratio, b.add(k(kUV[1][i]), b.mul(log_ratio, k(kUV[2][i])))));
  auto cubic = [&](int o) { return b.add(cv[o], b.mul(v, b.add(cv[o + 1], b.mul(v, b.add(cv[o + 2], b.mul(v, cv[o + 3])))))); };
  Value fitted = b.exp(b.div(cubic(0), cubic(4)));

  return b.select(b.compare(x, k(0.8), Compare::LT), small,
                  b.select(b.compare(alpha, k(8), Compare::GT), large, fitted));
}

// _standard_gamma_grad(self = alpha, output = the draw), broadcast.
Values lower_standard_gamma_grad(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value alpha = args.at(0).as_tensor(), x = args.at(1).as_tensor();
  E t = promote(alpha.dtype(), x.dtype());
  check_dtype(t == E::F32 || t == E::F64, "_standard_gamma_grad_cpu", t);
  Shape s = broadcast_shapes(alpha.shape(), x.shape());
  return {gamma_grad_impl(b, broadcast_to(b, cast(b, alpha, t), s), broadcast_to(b, cast(b, x, t), s))};
}

// ---- Bessel I0, I1 (Cephes Chebyshev expansions, as PyTorch)

const double kI0A[] = {
    -4.41534164647933937950E-18, 3.33079451882223809783E-17, -2.43127984654795469359E-16,
    1.71539128555513303061E-15,  -1.16853328779934516808E-14, 7.67618549860493561688E-14,
    -4.85644678311192946090E-13, 2.95505266312963983461E-12, -1.72682629144155570723E-11,
    9.67580903537323691224E-11,  -5.18979560163526290666E-10, 2.65982372468238665035E-9,
    -1.30002500998624804212E-8,  6.04699502254191894932E-8,  -2.67079385394061173391E-7,
    1.11738753912010371815E-6,   -4.41673835845875056359E-6, 1.64484480707288970893E-5,
    -5.75419501008210370398E-5,  1.88502885095841655729E-4, -5.76375574538582365885E-4,
    1.63947561694133579842E-3,   -4.32430999505057594430E-3, 1.05464603945949983183E-2,
    -2.37374148058994688156E-2,  4.93052842396707084878E-2, -9.49010970480476444210E-2,
    1.71620901522208775349E-1,   -3.04682672343198398683E-1, 6.76795274409476084995E-1};
const double kI0B[] = {
    -7.23318048787475395456E-18, -4.83050448594418207126E-18, 4.46562142029675999901E-17,
    3.46122286769746109310E-17,  -2.82762398051658348494E-16, -3.42548561967721913462E-16,
    1.77256013305652638360E-15,  3.81168066935262242075E-15,  -9.55484669882830764870E-15,
    -4.15056934728722208663E-14, 1.54008621752140982691E-14,  3.85277838274214270114E-13,
    7.18012445138366623367E-13,  -1.79417853150680611778E-12, -1.32158118404477131188E-11,
    -3.14991652796324136454E-11, 1.18891471078464383424E-11,  4.94060238822496958910E-10,
    3.39623202570838634515E-9,   2.26666899049817806459E-8,   2.04891858946906374183E-7,
    2.89137052083475648297E-6,   6.88975834691682398426E-5,   3.36911647825569408990E-3,
    8.04490411014108831608E-1};
const double kI1A[] = {
    2.77791411276104639959E-18, -2.11142121435816608115E-17, 1.55363195773620046921E-16,
    -1.10559694773538630805E-15, 7.60068429473540693410E-15, -5.04218550472791168711E-14,
    3.22379336594557470981E-13, -1.98397439776494371520E-12, 1.17361862988909016308E-11,
    -6.66348972350202774223E-11, 3.62559028155211703701E-10, -1.88724975172282928790E-9,
    9.38153738649577178388E-9,  -4.44505912879632808065E-8, 2.00329475355213526229E-7,
    -8.56872026469545474066E-7, 3.47025130813767847674E-6,  -1.32731636560394358279E-5,
    4.78156510755005422638E-5,  -1.61760815825896745588E-4, 5.12285956168575772895E-4,
    -1.51357245063125314899E-3, 4.15642294431288815669E-3,  -1.05640848946261981558E-2,
    2.47264490306265168283E-2,  -5.29459812080949914269E-2, 1.02643658689847095384E-1,
    -1.76416518357834055153E-1, 2.52587186443633654823E-1};
const double kI1B[] = {
    7.51729631084210481353E-18,  4.41434832307170791151E-18,  -4.65030536848935832153E-17,
    -3.20952592199342395980E-17, 2.96262899764595013876E-16,  3.30820231092092828324E-16,
    -1.88035477551078244854E-15, -3.81440307243700780478E-15, 1.04202769841288027642E-14,
    4.27244001671195135429E-14,  -2.10154184277266431302E-14, -4.08355111109219731823E-13,
    -7.19855177624590851209E-13, 2.03562854414708950722E-12,  1.41258074366137813316E-11,
    3.25260358301548823856E-11,  -1.89749581235054123450E-11, -5.58974346219658380687E-10,
    -3.83538038596423702205E-9,  -2.63146884688951950684E-8,  -2.51223623787020892529E-7,
    -3.88256480887769039346E-6,  -1.10588938762623716291E-4,  -9.76109749136146840777E-3,
    7.78576235018280120474E-1};

// exp(-|x|) I_k(|x|) (scaled) and, for k = 1, without the sign.
Value bessel_scaled(Builder& b, Value x, int k) {
  bool f64 = x.dtype() == E::F64;
  Value ax = b.abs(x);
  Value small_y = b.sub(b.div(ax, splat(b, 2, x)), splat(b, 2, x));
  Value big_y = b.sub(b.div(splat(b, 32, x), ax), splat(b, 2, x));
  Value small, big;
  if (k == 0) {
    small = chbevl(b, small_y, kI0A, 30);
    big = chbevl(b, big_y, kI0B, 25);
  } else {
    // PyTorch's float tables are the tails of the double ones.
    small = f64 ? chbevl(b, small_y, kI1A, 29) : chbevl(b, small_y, kI1A + 12, 17);
    big = f64 ? chbevl(b, big_y, kI1B, 25) : chbevl(b, big_y, kI1B + 18, 7);
    small = b.mul(small, ax);
  }
  big = b.div(big, b.sqrt(ax));
  return b.select(le(b, ax, 8), small, big);
}

Value signed_like(Builder& b, Value v, Value x) { return b.select(lt(b, x, 0), b.neg(v), v); }

Value i0_impl(Builder& b, Value x) { return b.mul(b.exp(b.abs(x)), bessel_scaled(b, x, 0)); }
Value i0e_impl(Builder& b, Value x) { return bessel_scaled(b, x, 0); }
Value i1_impl(Builder& b, Value x) {
  return signed_like(b, b.mul(b.exp(b.abs(x)), bessel_scaled(b, x, 1)), x);
}
Value i1e_impl(Builder& b, Value x) { return signed_like(b, bessel_scaled(b, x, 1), x); }

// ---- simple unary functions

Value sinc_impl(Builder& b, Value x) {
  Value p = b.mul(splat(b, kPi, x), x);
  return b.select(eq(b, x, 0), splat(b, 1, x), b.div(b.sine(p), p));
}

// Spherical Bessel j0 = sin(x) / x: for |x| < 0.5 its Taylor series through
// x^12, summed by Horner in PyTorch's order; 0 at +-inf.
Value spherical_j0_impl(Builder& b, Value x) {
  const double coef[] = {1.0 / 6227020800.0, -1.0 / 39916800.0, 1.0 / 362880.0,
                         -1.0 / 5040.0, 1.0 / 120.0, -1.0 / 6.0};  // (-1)^k / (2k+1)!, k = 6..1
  Value x2 = b.mul(x, x);
  Value s = splat(b, coef[0], x);
  for (int i = 1; i < 6; ++i) s = b.add(splat(b, coef[i], x), b.mul(x2, s));
  Value series = b.add(splat(b, 1, x), b.mul(x2, s));
  Value r = b.select(lt(b, b.abs(x), 0.5), series, b.div(b.sine(x), x));
  return b.select(eq(b, b.abs(x), INFINITY), splat(b, 0, x), r);
}

Value entr_impl(Builder& b, Value x) {
  Value r = b.neg(b.mul(x, b.log(x)));
  r = b.select(eq(b, x, 0), splat(b, 0, x), r);
  r = b.select(lt(b, x, 0), splat(b, -INFINITY, x), r);
  return b.select(is_nan(b, x), x, r);
}

// erfcx(x) = exp(x^2) erfc(x): erfc times exp(x^2) (split so that x^2 is
// exact) up to 8, the asymptotic series past it, and 2 exp(x^2) - erfcx(-x)
// for negative x.
Value exp_sq(Builder& b, Value x) {
  Value hi = b.div(b.floor(b.mul(x, splat(b, 16, x))), splat(b, 16, x));
  Value rest = b.mul(b.sub(x, hi), b.add(x, hi));
  return b.mul(b.exp(b.mul(hi, hi)), b.exp(rest));
}

Value erfcx_impl(Builder& b, Value x) {
  Value ax = b.abs(x);
  Value mid = b.mul(exp_sq(b, b.min(ax, splat(b, 8, x))), erfc(b, b.min(ax, splat(b, 8, x))));
  Value big_x = b.max(ax, splat(b, 8, x));
  Value inv2 = recip(b, b.mul(splat(b, 2, x), b.mul(big_x, big_x)));  // 1 / (2x^2)
  // 1 - 1/(2x^2) + 3/(2x^2)^2 - 15/(2x^2)^3 ...
  Value series = splat(b, 1, x), term = splat(b, 1, x);
  for (int k = 1; k <= 12; ++k) {
    term = b.mul(term, b.mul(inv2, splat(b, -(2.0 * k - 1), x)));
    series = b.add(series, term);
  }
  Value big = b.div(series, b.mul(big_x, splat(b, std::sqrt(kPi), x)));
  Value pos = b.select(gt(b, ax, 8), big, mid);
  Value negative = b.sub(b.mul(splat(b, 2, x), exp_sq(b, ax)), pos);
  Value r = b.select(lt(b, x, 0), negative, pos);
  r = b.select(b.compare(x, splat(b, INFINITY, x), Compare::EQ), splat(b, 0, x), r);
  return b.select(b.compare(x, splat(b, -INFINITY, x), Compare::EQ), splat(b, INFINITY, x), r);
}

Value log_ndtr_impl(Builder& b, Value x) {
  Value t = b.mul(x, splat(b, M_SQRT1_2, x));
  Value low = b.sub(b.log(b.div(erfcx_impl(b, b.neg(t)), splat(b, 2, x))), b.mul(t, t));
  Value high = b.log1p(b.neg(b.div(erfc(b, t), splat(b, 2, x))));
  return b.select(lt(b, x, -1), low, high);
}

Value ndtri_impl(Builder& b, Value y0) {
  static const double P0[] = {-5.99633501014107895267E1, 9.80010754185999661536E1,
                              -5.66762857469070293439E1, 1.39312609387279679503E1,
                              -1.23916583867381258016E0};
  static const double Q0[] = {1.00000000000000000000E0,  1.95448858338141759834E0,
                              4.67627912898881538453E0,  8.63602421390890590575E1,
                              -2.25462687854119370527E2, 2.00260212380060660359E2,
                              -8.20372256168333339912E1, 1.59056225126211695515E1,
                              -1.18331621121330003142E0};
  static const double P1[] = {4.05544892305962419923E0,   3.15251094599893866154E1,
                              5.71628192246421288162E1,   4.40805073893200834700E1,
                              1.46849561928858024014E1,   2.18663306850790267539E0,
                              -1.40256079171354495875E-1, -3.50424626827848203418E-2,
                              -8.57456785154685413611E-4};
  static const double Q1[] = {1.00000000000000000000E0,   1.57799883256466749731E1,
                              4.53907635128879210584E1,   4.13172038254672030440E1,
                              1.50425385692907503408E1,   2.50464946208309415979E0,
                              -1.42182922854787788574E-1, -3.80806407691578277194E-2,
                              -9.33259480895457427372E-4};
  static const double P2[] = {3.23774891776946035970E0,  6.91522889068984211695E0,
                              3.93881025292474443415E0,  1.33303460815807542389E0,
                              2.01485389549179081538E-1, 1.23716634817820021358E-2,
                              3.01581553508235416007E-4, 2.65806974686737550832E-6,
                              6.23974539184983293730E-9};
  static const double Q2[] = {1.00000000000000000000E0,  6.02427039364742014255E0,
                              3.67983563856160859403E0,  1.37702099489081330271E0,
                              2.16236993594496635890E-1, 1.34204006088543189037E-2,
                              3.28014464682127739104E-4, 2.89247864745380683936E-6,
                              6.79019408009981274425E-9};
  const double e2 = 0.13533528323661269189;
  Value one = splat(b, 1, y0);
  Value flip = gt(b, y0, 1 - e2);
  Value y = b.select(flip, b.sub(one, y0), y0);
  // Central region.
  Value yc = b.sub(y, splat(b, 0.5, y0));
  Value y2 = b.mul(yc, yc);
  Value xc = b.add(yc, b.mul(yc, b.div(b.mul(y2, polevl(b, y2, P0, 4)), polevl(b, y2, Q0, 8))));
  xc = b.mul(xc, splat(b, 2.50662827463100050242E0, y0));
  // Tails.
  Value ys = b.min(y, splat(b, e2, y0));  // keeps the unused branch finite
  Value x = b.sqrt(b.mul(splat(b, -2, y0), b.log(ys)));
  Value x0 = b.sub(x, b.div(b.log(x), x));
  Value z = recip(b, x);
  Value x1a = b.div(b.mul(z, polevl(b, z, P1, 8)), polevl(b, z, Q1, 8));
  Value x1b = b.div(b.mul(z, polevl(b, z, P2, 8)), polevl(b, z, Q2, 8));
  Value xt = b.sub(x0, b.select(lt(b, x, 8), x1a, x1b));
  xt = b.select(flip, xt, b.neg(xt));
  Value r = b.select(gt(b, y, e2), xc, xt);
  r = b.select(b.or_(lt(b, y0, 0), gt(b, y0, 1)), splat(b, NAN, y0), r);
  r = b.select(eq(b, y0, 0), splat(b, -INFINITY, y0), r);
  return b.select(eq(b, y0, 1), splat(b, INFINITY, y0), r);
}

// ---- drivers

// float_unary (lowering/common.h) for functions PyTorch has no complex kernel of.
template <Value (*F)(Builder&, Value)>
Values real_unary(Context& ctx, const Args& args) {
  check_dtype(!hlo::is_complex(args.at(0).as_tensor().dtype()), "special function",
              args.at(0).as_tensor().dtype());
  return float_unary<F>(ctx, args);
}

constexpr char kErfcx[] = "erfcx_cpu";
constexpr char kLogNdtr[] = "log_ndtr_cpu";
constexpr char kModifiedBesselI0[] = "modified_bessel_i0_cpu";
constexpr char kModifiedBesselI1[] = "modified_bessel_i1_cpu";
constexpr char kSphericalBesselJ0[] = "spherical_bessel_j0_cpu";
constexpr char kNdtri[] = "ndtri_cpu";

Values lower_polygamma(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  int64_t n = args.at(0).as_int();
  TPU_CHECK(n >= 0, ErrorKind::Runtime, "polygamma(n, x) does not support negative n.");
  Value x = args.at(1).as_tensor();
  E t = to_float(ctx, x.dtype());
  Value v = cast(b, x, opmath(t));
  Value r;
  if (n == 0) {
    r = digamma_impl(b, v);
  } else if (n == 1) {
    r = trigamma_impl(b, v);
  } else {
    double fact = std::exp(std::lgamma(double(n) + 1));
    if (opmath(t) == E::F32) fact = double(std::exp(std::lgamma(float(n) + 1.0f)));
    r = b.mul(splat(b, (n % 2 ? 1.0 : -1.0) * fact, v), zeta_int(b, n + 1, v));
  }
  return {cast(b, r, t)};
}

// logit(x, eps) = log(x / (1 - x)), x clamped to [eps, 1 - eps] when eps >= 0.
Values lower_logit(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value x0 = args.at(0).as_tensor();
  E t = to_float(ctx, x0.dtype());
  Value x = cast(b, x0, opmath(t));
  const Arg& eps = args.at(1);
  if (!eps.is_none() && eps.as_float() >= 0) {
    double e = eps.as_float();
    Value lo = splat(b, e, x), hi = splat(b, 1 - e, x);
    x = b.select(b.compare(x, lo, Compare::LT), lo, b.select(b.compare(x, hi, Compare::GT), hi, x));
  }
  // PyTorch rounds x / (1 - x) to the tensor's type before the log.
  Value xt = cast(b, x, t);
  Value q = cast(b, b.div(xt, b.sub(splat(b, 1, xt), xt)), opmath(t));
  Value r = b.log(q);
  r = b.select(eq(b, x, 1), splat(b, INFINITY, x), r);
  return {cast(b, r, t)};
}

Values lower_logit_backward(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value g0 = args.at(0).as_tensor(), x0 = args.at(1).as_tensor();
  E t = promote(g0.dtype(), x0.dtype());
  E c = opmath(t);
  Shape shape = broadcast_shapes(g0.shape(), x0.shape());
  Value g = broadcast_to(b, cast(b, g0, c), shape), x = broadcast_to(b, cast(b, x0, c), shape);
  Value d = b.div(g, b.mul(x, b.sub(splat(b, 1, x), x)));
  const Arg& eps = args.at(2);
  Value r;
  if (eps.is_none() || eps.as_float() < 0) {
    r = b.select(b.or_(lt(b, x, 0), gt(b, x, 1)), splat(b, NAN, x), d);
  } else {
    double e = eps.as_float();
    r = b.select(b.or_(lt(b, x, e), gt(b, x, 1 - e)), splat(b, 0, x), d);
  }
  return {cast(b, r, t)};
}

// Tensor/Number operands promoted to t and broadcast together.
Values operands(Context& ctx, const Args& args, E t) {
  Value x = operand(ctx, args.at(0), t), y = operand(ctx, args.at(1), t);
  Shape shape = broadcast_shapes(x.shape(), y.shape());
  return {broadcast_to(ctx.b, x, shape), broadcast_to(ctx.b, y, shape)};
}

Values lower_xlog1py(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  E t = to_float(ctx, result_type(ctx, {&args.at(0), &args.at(1)}));
  Values v = operands(ctx, args, opmath(t));
  Value r = b.mul(v[0], b.log1p(v[1]));
  r = b.select(b.and_(eq(b, v[0], 0), b.not_(is_nan(b, v[1]))), splat(b, 0, r), r);
  return {cast(b, r, t)};
}

Values lower_heaviside(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  E t = args.at(0).as_tensor().dtype();
  TPU_CHECK(t == args.at(1).as_tensor().dtype(), ErrorKind::Runtime,
            "heaviside is not yet implemented for tensors with different dtypes.");
  check_dtype(!hlo::is_complex(t), "heaviside_cpu", t);
  Values v = operands(ctx, args, t);
  if (t == E::Bool) return {b.select(b.not_(v[0]), v[1], v[0])};
  Value zero = splat(b, 0, v[0]);
  Value pos = b.convert(b.compare(v[0], zero, Compare::GT), t);
  return {b.select(b.compare(v[0], zero, Compare::EQ), v[1], pos)};
}

template <bool Max>
Values lower_fminmax(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  E t = result_type(ctx, {&args.at(0), &args.at(1)});
  check_dtype(!hlo::is_complex(t), Max ? "fmax_cpu" : "fmin_cpu", t);
  Values v = operands(ctx, args, t);
  if (t == E::Bool) return {Max ? b.or_(v[0], v[1]) : b.and_(v[0], v[1])};
  Value m = Max ? b.max(v[0], v[1]) : b.min(v[0], v[1]);
  if (!hlo::is_float(t)) return {m};
  m = b.select(is_nan(b, v[1]), v[0], m);
  return {b.select(is_nan(b, v[0]), v[1], m)};
}

Values lower_logaddexp2(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  E t = result_type(ctx, {&args.at(0), &args.at(1)});
  check_dtype(hlo::is_float(t), "logaddexp2_cpu", t);
  Values v = operands(ctx, args, opmath(t));
  Value hi = b.max(v[0], v[1]);
  Value d = b.neg(b.abs(b.sub(v[0], v[1])));
  Value r = b.add(hi, b.div(b.log1p(b.pow(splat(b, 2, d), d)), splat(b, M_LN2, d)));
  Value same_inf = b.and_(b.compare(v[0], v[1], Compare::EQ),
                          b.compare(b.abs(v[0]), splat(b, INFINITY, hi), Compare::EQ));
  return {cast(b, b.select(same_inf, v[0], r), t)};
}

Values lower_nextafter(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  E t = result_type(ctx, {&args.at(0), &args.at(1)});
  check_dtype(hlo::is_float(t), "nextafter_cpu", t);
  Values v = operands(ctx, args, t);
  Value x = v[0], y = v[1];
  E bits_t = t == E::F64 ? E::I64 : t == E::F32 ? E::I32 : E::I16;
  Value bits = b.bitcast_convert(x, {bits_t, x.shape()});
  Value one = b.full(1, bits_t, x.shape());
  Value up = b.compare(b.compare(x, y, Compare::LT), gt(b, x, 0), Compare::EQ);
  Value stepped = b.bitcast_convert(b.select(up, b.add(bits, one), b.sub(bits, one)), {t, x.shape()});
  // From zero: the smallest subnormal with y's sign.
  Value tiny = b.bitcast_convert(one, {t, x.shape()});
  Value from_zero = b.select(lt(b, y, 0), b.neg(tiny), tiny);
  Value r = b.select(eq(b, x, 0), from_zero, stepped);
  r = b.select(b.compare(x, y, Compare::EQ), y, r);
  return {b.select(b.or_(is_nan(b, x), is_nan(b, y)), splat(b, NAN, x), r)};
}

// frexp(self) -> (mantissa, exponent): x = mantissa * 2^exponent with |mantissa|
// in [0.5, 1), read from the bits alone (the plugin may flush subnormal floats
// to zero in float arithmetic): the exponent from the biased exponent field, or
// for a subnormal from its fraction's leading one; the mantissa is the
// (normalized) fraction under the exponent field of 0.5. Zero, infinities and
// NaN give (x, 0), as std::frexp does. Half types go through f32, where their
// values are exact, as on the CPU.
Values lower_frexp(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value x0 = args.at(0).as_tensor();
  E t = x0.dtype();
  TPU_CHECK(hlo::is_float(t), ErrorKind::Runtime, "torch.frexp() only supports floating-point dtypes");
  bool wide = t == E::F64;
  E f = wide ? E::F64 : E::F32, i = wide ? E::I64 : E::I32;
  int64_t width = wide ? 64 : 32, mant_bits = wide ? 52 : 23, bias = wide ? 1023 : 127, field = wide ? 0x7ff : 0xff;
  Value x = cast(b, x0, f);
  const Shape& s = x.shape();
  auto ints = [&](int64_t v) { return b.broadcast_in_dim(b.constant_int(v, i), s, {}); };
  auto is = [&](Value v, int64_t c) { return b.compare(v, ints(c), Compare::EQ); };
  Value bits = b.bitcast_convert(x, {i, s});
  Value frac_mask = ints((int64_t(1) << mant_bits) - 1);
  Value frac = b.and_(bits, frac_mask);
  Value biased = b.and_(b.shift_right_logical(bits, ints(mant_bits)), ints(field));
  Value subnormal = b.and_(is(biased, 0), b.not_(is(frac, 0)));
  Value plain = b.or_(b.and_(is(biased, 0), is(frac, 0)), is(biased, field));
  // A subnormal's leading one at bit p (below mant_bits): shift it up to the
  // implicit bit and drop it; its exponent is p - bias - mant_bits + 2.
  Value p = b.sub(ints(width - 1), b.clz(frac));
  Value norm_frac = b.and_(b.shift_left(frac, b.sub(ints(mant_bits), p)), frac_mask);
  Value e = b.select(subnormal, b.sub(p, ints(bias + mant_bits - 2)), b.sub(biased, ints(bias - 1)));
  frac = b.select(subnormal, norm_frac, frac);
  Value sign = b.and_(bits, b.broadcast_in_dim(b.constant_int(std::numeric_limits<int64_t>::min() >> (64 - width), i), s, {}));
  Value m = b.bitcast_convert(b.or_(b.or_(sign, ints((bias - 1) << mant_bits)), frac), {f, s});
  m = b.select(plain, x, m);
  e = b.select(plain, ints(0), e);
  return {cast(b, m, t), cast(b, e, E::I32)};
}

// Euclid's algorithm as a while loop, all elements in step (PyTorch's
// calc_gcd: while (a != 0) { c = a; a = b % a; b = c; } return b).
Value gcd_of(Builder& b, Value x, Value y) {
  bool uns = hlo::is_unsigned(x.dtype());
  Value a = uns ? x : b.abs(x), c = uns ? y : b.abs(y);
  Values out = while_loop(
      b, {a, c}, [](Builder& r, const Values& s) { return Values{any_nonzero(r, s[0])}; },
      [](Builder& r, const Values& s) {
        Value nz = r.compare(s[0], r.full(0, s[0].dtype(), s[0].shape()), Compare::NE);
        Value safe = r.select(nz, s[0], r.full(1, s[0].dtype(), s[0].shape()));
        return Values{r.select(nz, r.rem(s[1], safe), s[0]), r.select(nz, s[0], s[1])};
      });
  return out[1];
}

template <bool Lcm>
Values lower_gcd(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  E t = result_type(ctx, {&args.at(0), &args.at(1)});
  check_dtype(hlo::is_integral(t), Lcm ? "lcm_cpu" : "gcd_cpu", t);
  Values v = operands(ctx, args, t);
  Value g = gcd_of(b, v[0], v[1]);
  if (!Lcm) return {g};
  // C++ computes abs(a / g * b) in int for the narrow types.
  E w = hlo::byte_size(t) < 4 ? E::I32 : t;
  Value gw = cast(b, g, w), x = cast(b, v[0], w), y = cast(b, v[1], w);
  Value zero = splat(b, 0, gw);
  Value gz = b.compare(gw, zero, Compare::EQ);
  Value l = b.mul(b.div(x, b.select(gz, splat(b, 1, gw), gw)), y);
  if (!hlo::is_unsigned(w)) l = b.abs(l);
  return {cast(b, b.select(gz, zero, l), t)};
}

}  // namespace

Value bessel_i0e(Builder& b, Value x) { return i0e_impl(b, x); }
Value bessel_i1e(Builder& b, Value x) { return i1e_impl(b, x); }
Value log_gamma(Builder& b, Value x) { return lgamma_impl(b, x); }

TPU_LOWERING("aten::_standard_gamma_grad", lower_standard_gamma_grad);
TPU_LOWERING("aten::digamma", real_unary<digamma_impl>);
TPU_LOWERING("aten::fmax", lower_fminmax<true>);
TPU_LOWERING("aten::fmin", lower_fminmax<false>);
TPU_LOWERING("aten::frexp.Tensor", lower_frexp);
TPU_LOWERING("aten::gcd", lower_gcd<false>);
TPU_LOWERING("aten::heaviside", lower_heaviside);
TPU_LOWERING("aten::i0", real_unary<i0_impl>);
TPU_LOWERING("aten::lcm", lower_gcd<true>);
TPU_LOWERING("aten::lgamma", real_unary<lgamma_impl>);
TPU_LOWERING("aten::logaddexp2", lower_logaddexp2);
TPU_LOWERING("aten::logit", lower_logit);
TPU_LOWERING("aten::logit_backward", lower_logit_backward);
TPU_LOWERING("aten::nextafter", lower_nextafter);
TPU_LOWERING("aten::polygamma", lower_polygamma);
TPU_LOWERING("aten::sinc", float_unary<sinc_impl>);  // complex too, as the CPU
TPU_LOWERING("aten::special_entr", real_unary<entr_impl>);
TPU_LOWERING("aten::special_erfcx", float_double_unary<erfcx_impl, kErfcx>);
TPU_LOWERING("aten::special_i0e", real_unary<i0e_impl>);
TPU_LOWERING("aten::special_i1", real_unary<i1_impl>);
TPU_LOWERING("aten::special_i1e", real_unary<i1e_impl>);
TPU_LOWERING("aten::special_log_ndtr", float_double_unary<log_ndtr_impl, kLogNdtr>);
// I0 and I1 again (torch.special.modified_bessel_i0/i1), with kernels for float and double only.
TPU_LOWERING("aten::special_modified_bessel_i0", float_double_unary<i0_impl, kModifiedBesselI0>);
TPU_LOWERING("aten::special_modified_bessel_i1", float_double_unary<i1_impl, kModifiedBesselI1>);
TPU_LOWERING("aten::special_ndtri", float_double_unary<ndtri_impl, kNdtri>);
TPU_LOWERING("aten::special_spherical_bessel_j0", float_double_unary<spherical_j0_impl, kSphericalBesselJ0>);
TPU_LOWERING("aten::special_xlog1py", lower_xlog1py);
TPU_LOWERING("aten::special_xlog1py.other_scalar", lower_xlog1py);
TPU_LOWERING("aten::special_xlog1py.self_scalar", lower_xlog1py);

}  // namespace torch_tpu::lowering
