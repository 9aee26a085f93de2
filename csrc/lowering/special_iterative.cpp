// Special functions whose work depends on the data: the orthogonal
// polynomials of degree n (n a tensor) and the regularized incomplete gamma
// functions (series and continued fractions run to convergence). Each
// iteration is one stablehlo.while over all elements in step: an element
// steps while it is live (its own count not reached, not converged, not NaN),
// the others keep their state through select, and the loop ends when no
// element is live. The device so runs the number of steps the slowest element
// takes in PyTorch's CPU kernel (aten/src/ATen/native/Math.h), never more,
// and never asks the host for a count. The kernels' branches are all built
// and chosen per element by select, in the kernels' order of precedence.
//
// Huge degrees: where PyTorch has a closed form (cos(n acos x) and its
// relatives for |x| < 1 and n past 4, 6 or 8) an element never enters the
// loop, so n = 1e6 there costs nothing; Hermite stops at n = 128 (float) or
// 512 (double), past which the CPU returns NaN. Elsewhere the loop runs as
// long as the CPU's: a recurrence that overflows turns to NaN within a few
// steps and leaves the loop, as the CPU's does; Legendre and Laguerre inside
// their interval (and Chebyshev just past |x| = 1) run all n - 1 steps, as on
// the CPU. The incomplete gamma loops stop where the CPU's do: at
// convergence, or after its 2000 iterations (25 terms for the asymptotic
// expansion).
#include <cmath>
#include <functional>

#include "lowering/registry.h"
#include "lowering/series.h"

namespace torch_tpu::lowering {

namespace {

using hlo::Builder;
using hlo::Compare;
using E = ElementType;
using Values = std::vector<Value>;

// A rank-0 value (a loop counter) spread over the shape and type of `like`.
Value spread(Builder& b, Value v, const Value& like) {
  return b.broadcast_in_dim(cast(b, v, like.dtype()), like.shape(), {});
}


// ---- the loop

// live(k, state): the elements that take step k (k = 0, 1, ...; a rank-0
// i64); step(k, state): the next state, kept only where live. Every state
// value has the elements' shape.
using LiveFn = std::function<Value(Builder&, Value k, const Values& state)>;
using StepFn = std::function<Values(Builder&, Value k, const Values& state)>;

Values iterate(Builder& b, const Values& state, const LiveFn& live, const StepFn& step) {
  Values init{b.constant_int(0, E::I64)};
  init.insert(init.end(), state.begin(), state.end());
  auto rest = [](const Values& s) { return Values(s.begin() + 1, s.end()); };
  hlo::RegionFn cond = [&](Builder& r, const Values& s) {
    return Values{any_nonzero(r, live(r, s[0], rest(s)))};
  };
  hlo::RegionFn body = [&](Builder& r, const Values& s) {
    Values cur = rest(s);
    Value m = live(r, s[0], cur);
    Values next = step(r, s[0], cur);
    Values out{r.add(s[0], r.constant_int(1, E::I64))};
    for (size_t i = 0; i < cur.size(); ++i) out.push_back(r.select(m, next[i], cur[i]));
    return out;
  };
  return rest(while_loop(b, init, cond, body));
}

// k < limit, per element (limit an i64 tensor).
Value before(Builder& b, Value k, Value limit) {
  return b.compare(b.broadcast_in_dim(k, limit.shape(), {}), limit, Compare::LT);
}
// k < limit for a static limit, spread over the shape of `like`.
Value before(Builder& b, Value k, int64_t limit, const Value& like) {
  Value c = b.compare(k, b.constant_int(limit, E::I64), Compare::LT);
  return b.broadcast_in_dim(c, like.shape(), {});
}

// ---- orthogonal polynomials

// n as PyTorch's kernels see it: the value in the computation type truncated
// to int64; NaN and values out of int64's range give INT64_MIN on the CPU
// (x86's conversion), which every kernel treats as n < 0: here -1.
Value degree(Builder& b, Value n) {
  Value t = b.select(lt(b, n, 0), b.ceil(n), b.floor(n));
  Value ok = lt(b, b.abs(t), 9223372036854775808.0);  // false for NaN
  return b.convert(b.select(ok, t, splat(b, -1, t)), E::I64);
}

Value ints(Builder& b, int64_t v, const Value& like) { return b.full(double(v), E::I64, like.shape()); }
Value icmp(Builder& b, Value n, int64_t v, Compare c) { return b.compare(n, ints(b, v, n), c); }

// One step of a three-term recurrence: r from (p, q) = (P_{j-1}, P_j) and j
// (the step's index as a float value).
using StepPoly = std::function<Value(Builder&, Value j, Value p, Value q)>;

// P_n for n >= 1 where `loop` (the others get P_1 = q1): P_0 = 1, P_1 = q1
// and n - 1 steps of the recurrence, each element leaving when its q is NaN
// as the CPU's loops do.
Value recurrence(Builder& b, Value n, Value loop, Value q1, const StepPoly& f) {
  Value steps = b.select(loop, b.sub(n, ints(b, 1, n)), ints(b, 0, n));
  Values out = iterate(
      b, {splat(b, 1, q1), q1},
      [&](Builder& r, Value k, const Values& s) {
        return r.and_(before(r, k, steps), r.not_(is_nan(r, s[1])));
      },
      [&](Builder& r, Value k, const Values& s) {
        Value j = spread(r, r.add(k, r.constant_int(1, E::I64)), q1);
        return Values{s[1], f(r, j, s[0], s[1])};
      });
  return out[1];
}

// (c + c) q - p: the Chebyshev recurrence in c (x, or 2x - 1 for the shifted ones).
StepPoly chebyshev_step(Value c) {
  return [c](Builder& r, Value, Value p, Value q) { return r.sub(r.mul(r.add(c, c), q), p); };
}

Value acos_(Builder& b, Value x) {
  Value one = splat(b, 1, x);
  return b.atan2(b.sqrt(b.mul(b.sub(one, x), b.add(one, x))), x);
}

struct Deg {
  Value n, f;          // n (i64) and n as a float value
  Value even, neg;     // n % 2 == 0, n < 0
  Value odd_sign;      // n even ? 1 : -1 (float)
  Value n1, n2;        // n + 1 and 2n + 1 (float)
};

Deg deg_of(Builder& b, Value n, const Value& like) {
  Deg d;
  d.n = n;
  d.f = cast(b, n, like.dtype());
  d.even = b.compare(b.rem(n, ints(b, 2, n)), ints(b, 0, n), Compare::EQ);
  d.neg = icmp(b, n, 0, Compare::LT);
  d.odd_sign = b.select(d.even, splat(b, 1, like), splat(b, -1, like));
  d.n1 = cast(b, b.add(n, ints(b, 1, n)), like.dtype());
  d.n2 = cast(b, b.add(b.add(n, n), ints(b, 1, n)), like.dtype());
  return d;
}

// The closed forms for |c| < 1 (theta = acos c) of T, U, V, W.
Value closed_t(Builder& b, const Deg& d, Value c) { return b.cosine(b.mul(d.f, acos_(b, c))); }

Value closed_u(Builder& b, const Deg& d, Value c) {
  Value th = acos_(b, c);
  Value s = b.sine(th);
  Value a = b.mul(d.n1, th);
  return b.select(ne(b, s, 0), b.div(b.sine(a), s), b.div(b.mul(d.n1, b.cosine(a)), c));
}

Value closed_v(Builder& b, const Deg& d, Value c) {
  Value th = acos_(b, c);
  Value half = b.div(th, splat(b, 2, c));
  Value v = b.div(b.cosine(b.mul(b.add(d.f, splat(b, 0.5, c)), th)), b.cosine(half));
  return b.select(ne(b, b.sine(half), 1), v, b.mul(d.odd_sign, d.n2));
}

// W's closed form; `edge` is its value where cos(theta / 2) == 1.
Value closed_w(Builder& b, const Deg& d, Value c, Value edge) {
  Value th = acos_(b, c);
  Value half = b.div(th, splat(b, 2, c));
  Value v = b.div(b.sine(b.mul(b.add(d.f, splat(b, 0.5, c)), th)), b.sine(half));
  return b.select(ne(b, b.cosine(half), 1), v, edge);
}

// The four Chebyshev kinds, plain (c = x, special points x = +-1) or shifted
// (c = 2x - 1, special points x = 1 and x = 0).
enum class Kind { T, U, V, W };

Value chebyshev(Builder& b, Value x, Value n_in, Kind kind, bool shifted) {
  Deg d = deg_of(b, degree(b, n_in), x);
  Value one = splat(b, 1, x);
  Value c = shifted ? b.sub(b.add(x, x), one) : x;
  Value at_top = shifted ? eq(b, x, 1) : b.and_(eq(b, b.abs(x), 1), gt(b, x, 0));
  Value at_bottom = shifted ? eq(b, x, 0) : b.and_(eq(b, b.abs(x), 1), b.not_(gt(b, x, 0)));
  Value q1, top, bottom, closed;
  int64_t closed_from = shifted ? 6 : 8;
  switch (kind) {
    case Kind::T:
      q1 = c, top = one, bottom = d.odd_sign, closed = closed_t(b, d, c), closed_from = 6;
      break;
    case Kind::U:
      q1 = b.add(c, c), top = d.n1, bottom = b.mul(d.odd_sign, d.n1), closed = closed_u(b, d, c);
      break;
    case Kind::V:
      q1 = b.sub(b.add(c, c), one), top = one, bottom = b.mul(d.odd_sign, d.n2);
      closed = closed_v(b, d, c);
      break;
    case Kind::W:
      q1 = b.add(b.add(c, c), one), top = d.n2, bottom = d.odd_sign;
      // Where cos(theta / 2) == 1 the plain kernel falls back to its x = +-1
      // values, the shifted one to the parity alone.
      closed = closed_w(b, d, c, shifted ? d.odd_sign : b.select(gt(b, x, 0), d.n2, d.odd_sign));
      if (shifted) closed_from = 4;
      break;
  }
  Value special = b.or_(at_top, at_bottom);
  Value use_closed = b.and_(icmp(b, d.n, closed_from, Compare::GT), lt(b, b.abs(c), 1));
  Value n0 = icmp(b, d.n, 0, Compare::EQ);
  Value loop = b.not_(b.or_(b.or_(special, use_closed), b.or_(n0, d.neg)));
  Value r = recurrence(b, d.n, loop, q1, chebyshev_step(c));
  r = b.select(n0, one, r);
  r = b.select(use_closed, closed, r);
  r = b.select(at_bottom, bottom, r);
  r = b.select(at_top, top, r);
  return b.select(d.neg, splat(b, 0, x), r);
}

template <Kind K, bool Shifted>
Value chebyshev_impl(Builder& b, Value x, Value n) { return chebyshev(b, x, n, K, Shifted); }

// Hermite H (physicists', `physics`) and He: NaN past n = 128 (float) or 512
// (double), as PyTorch's kernels.
template <bool Physics>
Value hermite_impl(Builder& b, Value x, Value n_in) {
  Deg d = deg_of(b, degree(b, n_in), x);
  int64_t limit = x.dtype() == E::F64 ? 512 : 128;
  Value q1 = Physics ? b.add(x, x) : x;
  Value n0 = icmp(b, d.n, 0, Compare::EQ);
  Value over = icmp(b, d.n, limit, Compare::GT);
  Value loop = b.not_(b.or_(b.or_(n0, over), d.neg));
  Value r = recurrence(b, d.n, loop, q1, [x](Builder& r, Value j, Value p, Value q) {
    // H: 2x q - 2j p; He: x q - j p.
    if (Physics) return r.sub(r.mul(r.add(x, x), q), r.mul(r.add(j, j), p));
    return r.sub(r.mul(x, q), r.mul(j, p));
  });
  r = b.select(over, splat(b, NAN, x), r);
  r = b.select(n0, splat(b, 1, x), r);
  return b.select(d.neg, splat(b, 0, x), r);
}

Value laguerre_impl(Builder& b, Value x, Value n_in) {
  Deg d = deg_of(b, degree(b, n_in), x);
  Value one = splat(b, 1, x);
  Value one_minus_x = b.sub(one, x);
  Value x0 = eq(b, x, 0);
  Value n0 = icmp(b, d.n, 0, Compare::EQ);
  Value loop = b.not_(b.or_(b.or_(n0, x0), d.neg));
  // ((2j + (1 - x)) q - j p) / (j + 1)
  Value r = recurrence(b, d.n, loop, one_minus_x, [one_minus_x](Builder& r, Value j, Value p, Value q) {
    Value num = r.sub(r.mul(r.add(r.add(j, j), one_minus_x), q), r.mul(j, p));
    return r.div(num, r.add(j, splat(r, 1, j)));
  });
  r = b.select(b.or_(n0, x0), one, r);
  return b.select(d.neg, splat(b, 0, x), r);
}

Value legendre_impl(Builder& b, Value x, Value n_in) {
  Deg d = deg_of(b, degree(b, n_in), x);
  Value one = splat(b, 1, x);
  Value edge = eq(b, b.abs(x), 1);
  Value n0 = icmp(b, d.n, 0, Compare::EQ);
  Value loop = b.not_(b.or_(b.or_(n0, edge), d.neg));
  // ((2j + 1) x q - j p) / (j + 1)
  Value r = recurrence(b, d.n, loop, x, [x](Builder& r, Value j, Value p, Value q) {
    Value j1 = r.add(j, splat(r, 1, j));
    Value num = r.sub(r.mul(r.mul(r.add(j, j1), x), q), r.mul(j, p));
    return r.div(num, j1);
  });
  r = b.select(n0, one, r);
  r = b.select(edge, b.select(gt(b, x, 0), one, d.odd_sign), r);
  return b.select(d.neg, splat(b, 0, x), r);
}

// (x, n) with its three overloads (Tensor/Tensor, x a number, n a number):
// promoted as a float binary op; PyTorch's kernels exist for float and double.
constexpr char kChebyshevT[] = "chebyshev_polynomial_t_cpu";
constexpr char kChebyshevU[] = "chebyshev_polynomial_u_cpu";
constexpr char kChebyshevV[] = "chebyshev_polynomial_v_cpu";
constexpr char kChebyshevW[] = "chebyshev_polynomial_w_cpu";
constexpr char kHermiteH[] = "hermite_polynomial_h_cpu";
constexpr char kHermiteHe[] = "hermite_polynomial_he_cpu";
constexpr char kLaguerreL[] = "laguerre_polynomial_l_cpu";
constexpr char kLegendreP[] = "legendre_polynomial_p_cpu";
constexpr char kShiftedT[] = "shifted_chebyshev_polynomial_t_cpu";
constexpr char kShiftedU[] = "shifted_chebyshev_polynomial_u_cpu";
constexpr char kShiftedV[] = "shifted_chebyshev_polynomial_v_cpu";
constexpr char kShiftedW[] = "shifted_chebyshev_polynomial_w_cpu";

// ---- regularized incomplete gamma functions (Cephes as in SciPy and PyTorch)

// Constants of the computation type.
struct GammaConsts {
  double machep, maxlog, big, biginv;
};
GammaConsts gamma_consts(const Value& like) {
  if (like.dtype() == E::F64)
    return {1.11022302462515654042E-16, 7.09782712893383996843E2, 4.503599627370496e15,
            2.22044604925031308085e-16};
  return {5.9604644775390625E-8, 88.72283905206835, 16777216., 5.9604644775390625E-8};
}

const double kLanczosG = 6.024680040776729583740234375;
// The numerator and denominator of Boost's Lanczos sum (exp(g)-scaled), low order first.
const double kLanczosNum[13] = {
    0.006061842346248906525783753964555936883222, 0.5098416655656676188125178644804694509993,
    19.51992788247617482847860966235652136208,   449.9445569063168119446858607650988409623,
    6955.999602515376140356310115515198987526,   75999.29304014542649875303443598909137092,
    601859.6171681098786670226533699352302507,   3481712.15498064590882071018964774556468,
    14605578.08768506808414169982791359218571,   43338889.32467613834773723740590533316085,
    86363131.28813859145546927288977868422342,   103794043.1163445451906271053616070238554,
    56906521.91347156388090791033559122686859};
const double kLanczosDen[13] = {1.,        66.,        1925.,       32670.,     357423.,
                                2637558.,  13339535.,  45995730.,   105258076., 150917976.,
                                120543840., 39916800., 0.};

// Horner over c[0..12] in y, c[0] the highest power (`reversed`: c[12]).
Value horner13(Builder& b, Value y, const double* c, bool reversed) {
  Value s = splat(b, c[reversed ? 12 : 0], y);
  for (int i = 1; i <= 12; ++i) s = b.add(b.mul(s, y), splat(b, c[reversed ? 12 - i : i], y));
  return s;
}

// The rational function num(a) / den(a), evaluated in 1/a past |a| = 1.
Value lanczos_sum(Builder& b, Value a) {
  Value big = gt(b, b.abs(a), 1);
  Value y = b.select(big, b.div(splat(b, 1, a), a), a);
  Value num_small = horner13(b, y, kLanczosNum, false), den_small = horner13(b, y, kLanczosDen, false);
  Value num_big = horner13(b, y, kLanczosNum, true), den_big = horner13(b, y, kLanczosDen, true);
  return b.select(big, b.div(num_big, den_big), b.div(num_small, den_small));
}

// x^a e^-x / Gamma(a), from logarithms when x is far from a, else from the
// Lanczos sum (with a log1p form past 200).
// lgamma_a: lgamma(a).
Value gamma_factor(Builder& b, Value a, Value x, Value lgamma_a) {
  GammaConsts k = gamma_consts(a);
  Value far = b.compare(b.abs(b.sub(a, x)), b.mul(splat(b, 0.4, a), b.abs(a)), Compare::GT);
  Value lx = b.sub(b.sub(b.mul(a, b.log(x)), x), lgamma_a);
  Value from_logs = b.select(lt(b, lx, -k.maxlog), splat(b, 0, a), b.exp(lx));
  Value fac = b.sub(b.add(a, splat(b, kLanczosG, a)), splat(b, 0.5, a));
  Value res = b.div(b.sqrt(b.div(fac, splat(b, M_E, a))), lanczos_sum(b, a));
  Value small = b.and_(lt(b, a, 200), lt(b, x, 200));
  Value near_small = b.mul(res, b.mul(b.exp(b.sub(a, x)), b.pow(b.div(x, fac), a)));
  Value num = b.add(b.sub(b.sub(x, a), splat(b, kLanczosG, a)), splat(b, 0.5, a));
  Value numfac = b.div(num, fac);
  Value e = b.add(b.mul(a, b.sub(b.log1p(numfac), numfac)),
                  b.div(b.mul(x, splat(b, 0.5 - kLanczosG, a)), fac));
  Value near_big = b.mul(res, b.exp(e));
  return b.select(far, from_logs, b.select(small, near_small, near_big));
}

const int64_t kMaxIter = 2000;

// The lower function's power series (DLMF 8.11.4) where `mask`; ax: gamma_factor.
Value lower_series(Builder& b, Value a, Value x, Value ax, Value mask) {
  GammaConsts k = gamma_consts(a);
  Value run = b.and_(mask, ne(b, ax, 0));
  // state: r, c, sum, done
  Values s = iterate(
      b, {a, splat(b, 1, a), splat(b, 1, a), b.full(0, E::Bool, a.shape())},
      [&](Builder& r, Value i, const Values& s) {
        return r.and_(r.and_(run, r.not_(s[3])), before(r, i, kMaxIter, a));
      },
      [&](Builder& r, Value, const Values& s) {
        Value rr = r.add(s[0], splat(r, 1, a));
        Value c = r.mul(s[1], r.div(x, rr));
        Value sum = r.add(s[2], c);
        Value done = r.compare(c, r.mul(splat(r, k.machep, a), sum), Compare::LE);
        return Values{rr, c, sum, r.or_(done, is_nan(r, sum))};
      });
  return b.select(eq(b, ax, 0), splat(b, 0, a), b.div(b.mul(s[2], ax), a));
}

// The upper function's series (DLMF 8.7.3) where `mask`.
Value upper_series(Builder& b, Value a, Value x, Value lgamma_a, Value mask) {
  GammaConsts k = gamma_consts(a);
  // state: fac, sum, done; step i uses n = i + 1 (n < 2000)
  Values s = iterate(
      b, {splat(b, 1, a), splat(b, 0, a), b.full(0, E::Bool, a.shape())},
      [&](Builder& r, Value i, const Values& s) {
        return r.and_(r.and_(mask, r.not_(s[2])), before(r, i, kMaxIter - 1, a));
      },
      [&](Builder& r, Value i, const Values& s) {
        Value n = spread(r, r.add(i, r.constant_int(1, E::I64)), a);
        Value fac = r.mul(s[0], r.div(r.neg(x), n));
        Value term = r.div(fac, r.add(a, n));
        Value sum = r.add(s[1], term);
        Value done = r.compare(r.abs(term), r.mul(splat(r, k.machep, a), r.abs(sum)), Compare::LE);
        return Values{fac, sum, r.or_(done, is_nan(r, sum))};
      });
  Value logx = b.log(x);
  Value head = b.neg(b.expm1(b.sub(b.mul(a, logx), log_gamma(b, b.add(a, splat(b, 1, a))))));
  return b.sub(head, b.mul(b.exp(b.sub(b.mul(a, logx), lgamma_a)), s[1]));
}

// The upper function's continued fraction (DLMF 8.9.2) where `mask`; ax: gamma_factor.
Value upper_fraction(Builder& b, Value a, Value x, Value ax, Value mask) {
  GammaConsts k = gamma_consts(a);
  Value run = b.and_(mask, ne(b, ax, 0));
  Value one = splat(b, 1, a);
  Value y0 = b.sub(one, a);
  Value z0 = b.add(b.add(x, y0), one);
  Value p1 = b.add(x, one), q1 = b.mul(z0, x);
  // state: y, z, p_{k-2}, p_{k-1}, q_{k-2}, q_{k-1}, ans, done
  Values s = iterate(
      b, {y0, z0, one, p1, x, q1, b.div(p1, q1), b.full(0, E::Bool, a.shape())},
      [&](Builder& r, Value i, const Values& s) {
        return r.and_(r.and_(run, r.not_(s[7])), before(r, i, kMaxIter, a));
      },
      [&](Builder& r, Value i, const Values& s) {
        Value c = spread(r, r.add(i, r.constant_int(1, E::I64)), a);
        Value y = r.add(s[0], splat(r, 1, a)), z = r.add(s[1], splat(r, 2, a));
        Value yc = r.mul(y, c);
        Value pk = r.sub(r.mul(s[3], z), r.mul(s[2], yc));
        Value qk = r.sub(r.mul(s[5], z), r.mul(s[4], yc));
        Value nz = ne(r, qk, 0);
        Value ratio = r.div(pk, qk);
        Value t = r.select(nz, r.abs(r.div(r.sub(s[6], ratio), ratio)), splat(r, 1, a));
        Value ans = r.select(nz, ratio, s[6]);
        Value pm2 = s[3], pm1 = pk, qm2 = s[5], qm1 = qk;
        Value rescale = gt(r, r.abs(pk), k.big);
        Value inv = splat(r, k.biginv, a);
        pm2 = r.select(rescale, r.mul(pm2, inv), pm2);
        pm1 = r.select(rescale, r.mul(pm1, inv), pm1);
        qm2 = r.select(rescale, r.mul(qm2, inv), qm2);
        qm1 = r.select(rescale, r.mul(qm1, inv), qm1);
        Value done = r.compare(t, splat(r, k.machep, a), Compare::LE);
        return Values{y, z, pm2, pm1, qm2, qm1, ans, r.or_(done, is_nan(r, ans))};
      });
  return b.select(eq(b, ax, 0), splat(b, 0, a), b.mul(s[6], ax));
}

// Temme's uniform asymptotic expansion for large a (DLMF 8.12.3, 8.12.4):
// coefficients d[k][n] of eta^n in the k-th term.
const double kAsymD[25][25] = {
    {-3.3333333333333333e-1, 8.3333333333333333e-2, -1.4814814814814815e-2, 1.1574074074074074e-3,
     3.527336860670194e-4, -1.7875514403292181e-4, 3.9192631785224378e-5, -2.1854485106799922e-6,
     -1.85406221071516e-6, 8.296711340953086e-7, -1.7665952736826079e-7, 6.7078535434014986e-9,
     1.0261809784240308e-8, -4.3820360184533532e-9, 9.1476995822367902e-10, -2.551419399494625e-11,
     -5.8307721325504251e-11, 2.4361948020667416e-11, -5.0276692801141756e-12,
     1.1004392031956135e-13, 3.3717632624009854e-13, -1.3923887224181621e-13,
     2.8534893807047443e-14, -5.1391118342425726e-16, -1.9752288294349443e-15},
    {-1.8518518518518519e-3, -3.4722222222222222e-3, 2.6455026455026455e-3, -9.9022633744855967e-4,
     2.0576131687242798e-4, -4.0187757201646091e-7, -1.8098550334489978e-5, 7.6491609160811101e-6,
     -1.6120900894563446e-6, 4.6471278028074343e-9, 1.378633446915721e-7, -5.752545603517705e-8,
     1.1951628599778147e-8, -1.7543241719747648e-11, -1.0091543710600413e-9,
     4.1627929918425826e-10, -8.5639070264929806e-11, 6.0672151016047586e-14,
     7.1624989648114854e-12, -2.9331866437714371e-12, 5.9966963656836887e-13,
     -2.1671786527323314e-16, -4.9783399723692616e-14, 2.0291628823713425e-14,
     -4.13125571381061e-15},
    {4.1335978835978836e-3, -2.6813271604938272e-3, 7.7160493827160494e-4, 2.0093878600823045e-6,
     -1.0736653226365161e-4, 5.2923448829120125e-5, -1.2760635188618728e-5, 3.4235787340961381e-8,
     1.3721957309062933e-6, -6.298992138380055e-7, 1.4280614206064242e-7, -2.0477098421990866e-10,
     -1.4092529910867521e-8, 6.228974084922022e-9, -1.3670488396617113e-9, 9.4283561590146782e-13,
     1.2872252400089318e-10, -5.5645956134363321e-11, 1.1975935546366981e-11,
     -4.1689782251838635e-15, -1.0940640427884594e-12, 4.6622399463901357e-13,
     -9.905105763906906e-14, 1.8931876768373515e-17, 8.8592218725911273e-15},
    {6.4943415637860082e-4, 2.2947209362139918e-4, -4.6918949439525571e-4, 2.6772063206283885e-4,
     -7.5618016718839764e-5, -2.3965051138672967e-7, 1.1082654115347302e-5, -5.6749528269915966e-6,
     1.4230900732435884e-6, -2.7861080291528142e-11, -1.6958404091930277e-7, 8.0994649053880824e-8,
     -1.9111168485973654e-8, 2.3928620439808118e-12, 2.0620131815488798e-9,
     -9.4604966618551322e-10, 2.1541049775774908e-10, -1.388823336813903e-14,
     -2.1894761681963939e-11, 9.7909989511716851e-12, -2.1782191880180962e-12,
     6.2088195734079014e-17, 2.126978363279737e-13, -9.3446887915174333e-14,
     2.0453671226782849e-14},
    {-8.618882909167117e-4, 7.8403922172006663e-4, -2.9907248030319018e-4, -1.4638452578843418e-6,
     6.6414982154651222e-5, -3.9683650471794347e-5, 1.1375726970678419e-5, 2.5074972262375328e-10,
     -1.6954149536558306e-6, 8.9075075322053097e-7, -2.2929348340008049e-7, 2.956794137544049e-11,
     2.8865829742708784e-8, -1.4189739437803219e-8, 3.4463580499464897e-9, -2.3024517174528067e-13,
     -3.9409233028046405e-10, 1.8602338968504502e-10, -4.356323005056618e-11,
     1.2786001016296231e-15, 4.6792750266579195e-12, -2.1492464706134829e-12,
     4.9088156148096522e-13, -6.3385914848915603e-18, -5.0453320690800944e-14},
    {-3.3679855336635815e-4, -6.9728137583658578e-5, 2.7727532449593921e-4, -1.9932570516188848e-4,
     6.7977804779372078e-5, 1.419062920643967e-7, -1.3594048189768693e-5, 8.0184702563342015e-6,
     -2.2914811765080952e-6, -3.252473551298454e-10, 3.4652846491085265e-7, -1.8447187191171343e-7,
     4.8240967037894181e-8, -1.7989466721743515e-14, -6.3061945000135234e-9, 3.1624176287745679e-9,
     -7.8409242536974293e-10, 5.1926791652540407e-15, 9.3589442423067836e-11,
     -4.5134262161632782e-11, 1.0799129993116827e-11, -3.661886712685252e-17,
     -1.210902069055155e-12, 5.6807435849905643e-13, -1.3249659916340829e-13},
    {5.3130793646399222e-4, -5.9216643735369388e-4, 2.7087820967180448e-4, 7.9023532326603279e-7,
     -8.1539693675619688e-5, 5.6116827531062497e-5, -1.8329116582843376e-5, -3.0796134506033048e-9,
     3.4651553688036091e-6, -2.0291327396058604e-6, 5.7887928631490037e-7, 2.338630673826657e-13,
     -8.8286007463304835e-8, 4.7435958880408128e-8, -1.2545415020710382e-8, 8.6496488580102925e-14,
     1.6846058979264063e-9, -8.5754928235775947e-10, 2.1598224929232125e-10,
     -7.6132305204761539e-16, -2.6639822008536144e-11, 1.3065700536611057e-11,
     -3.1799163902367977e-12, 4.7109761213674315e-18, 3.6902800842763467e-13},
    {3.4436760689237767e-4, 5.1717909082605922e-5, -3.3493161081142236e-4, 2.812695154763237e-4,
     -1.0976582244684731e-4, -1.2741009095484485e-7, 2.7744451511563644e-5, -1.8263488805711333e-5,
     5.7876949497350524e-6, 4.9387589339362704e-10, -1.0595367014026043e-6, 6.1667143761104075e-7,
     -1.7562973359060462e-7, -1.2974473287015439e-12, 2.695423606288966e-8, -1.4578352908731271e-8,
     3.887645959386175e-9, -3.8810022510194121e-17, -5.3279941738772867e-10,
     2.7437977643314845e-10, -6.9957960920705679e-11, 2.5899863874868481e-17,
     8.8566890996696381e-12, -4.403168815871311e-12, 1.0865561947091654e-12},
    {-6.5262391859530942e-4, 8.3949872067208728e-4, -4.3829709854172101e-4, -6.969091458420552e-7,
     1.6644846642067548e-4, -1.2783517679769219e-4, 4.6299532636913043e-5, 4.5579098679227077e-9,
     -1.0595271125805195e-5, 6.7833429048651666e-6, -2.1075476666258804e-6,
     -1.7213731432817145e-11, 3.7735877416110979e-7, -2.1867506700122867e-7, 6.2202288040189269e-8,
     6.5977038267330006e-16, -9.5903864974256858e-9, 5.2132144922808078e-9, -1.3991589583935709e-9,
     5.382058999060575e-16, 1.9484714275467745e-10, -1.0127287556389682e-10,
     2.6077347197254926e-11, -5.0904186999932993e-18, -3.3721464474854592e-12},
    {-5.9676129019274625e-4, -7.2048954160200106e-5, 6.7823088376673284e-4, -6.4014752602627585e-4,
     2.7750107634328704e-4, 1.8197008380465151e-7, -8.4795071170685032e-5, 6.105192082501531e-5,
     -2.1073920183404862e-5, -8.8585890141255994e-10, 4.5284535953805377e-6,
     -2.8427815022504408e-6, 8.7082341778646412e-7, 3.6886101871706965e-12, -1.5344695190702061e-7,
     8.862466778790695e-8, -2.5184812301826817e-8, -1.0225912098215092e-14, 3.8969470758154777e-9,
     -2.1267304792235635e-9, 5.7370135528051385e-10, -1.887749850169741e-19,
     -8.0931538694657866e-11, 4.2382723283449199e-11, -1.1002224534207726e-11},
    {1.3324454494800656e-3, -1.9144384985654775e-3, 1.1089369134596637e-3, 9.932404122642299e-7,
     -5.0874501293093199e-4, 4.2735056665392884e-4, -1.6858853767910799e-4, -8.1301893922784998e-9,
     4.5284402370562147e-5, -3.127053674781734e-5, 1.044986828530338e-5, 4.8435226265680926e-11,
     -2.1482565873456258e-6, 1.329369701097492e-6, -4.0295693092101029e-7, -1.7567877666323291e-13,
     7.0145043163668257e-8, -4.040787734999483e-8, 1.1474026743371963e-8, 3.9642746853563325e-18,
     -1.7804938269892714e-9, 9.7480262548731646e-10, -2.6405338676507616e-10,
     5.794875163403742e-18, 3.7647749553543836e-11},
    {1.579727660730835e-3, 1.6251626278391582e-4, -2.0633421035543276e-3, 2.1389686185689098e-3,
     -1.0108559391263003e-3, -3.9912705529919201e-7, 3.6235025084764691e-4, -2.8143901463712154e-4,
     1.0449513336495887e-4, 2.1211418491830297e-9, -2.5779417251947842e-5, 1.7281818956040463e-5,
     -5.6413773872904282e-6, -1.1024320105776174e-11, 1.1223224418895175e-6,
     -6.8693396379526735e-7, 2.0653236975414887e-7, 4.6714772409838506e-14, -3.5609886164949055e-8,
     2.0470855345905963e-8, -5.8091738633283358e-9, -1.332821287582869e-16, 9.0354604391335133e-10,
     -4.9598782517330834e-10, 1.3481607129399749e-10},
    {-4.0725121195140166e-3, 6.4033628338080698e-3, -4.0410161081676618e-3, -2.183732802866233e-6,
     2.1740441801254639e-3, -1.9700440518418892e-3, 8.3595469747962458e-4, 1.9445447567109655e-8,
     -2.5779387120421696e-4, 1.9009987368139304e-4, -6.7696499937438965e-5,
     -1.4440629666426572e-10, 1.5712512518742269e-5, -1.0304008744776893e-5, 3.304517767401387e-6,
     7.9829760242325709e-13, -6.4097794149313004e-7, 3.8894624761300056e-7, -1.1618347644948869e-7,
     -2.816808630596451e-15, 1.9878012911297093e-8, -1.1407719956357511e-8, 3.2355857064185555e-9,
     4.1759468293455945e-20, -5.0423112718105824e-10},
    {-5.9475779383993003e-3, -5.4016476789260452e-4, 8.7910413550767898e-3, -9.8576315587856125e-3,
     5.0134695031021538e-3, 1.2807521786221875e-6, -2.0626019342754683e-3, 1.7109128573523058e-3,
     -6.7695312714133799e-4, -6.9011545676562133e-9, 1.8855128143995902e-4, -1.3395215663491969e-4,
     4.6263183033528039e-5, 4.0034230613321351e-11, -1.0255652921494033e-5, 6.612086372797651e-6,
     -2.0913022027253008e-6, -2.0951775649603837e-13, 3.9756029041993247e-7,
     -2.3956211978815887e-7, 7.1182883382145864e-8, 8.925574873053455e-16, -1.2101547235064676e-8,
     6.9350618248334386e-9, -1.9661464453856102e-9},
    {1.7402027787522711e-2, -2.9527880945699121e-2, 2.0045875571402799e-2, 7.0289515966903407e-6,
     -1.2375421071343148e-2, 1.1976293444235254e-2, -5.4156038466518525e-3, -6.3290893396418616e-8,
     1.8855118129005065e-3, -1.473473274825001e-3, 5.5515810097708387e-4, 5.2406834412550662e-10,
     -1.4357913535784836e-4, 9.9181293224943297e-5, -3.3460834749478311e-5,
     -3.5755837291098993e-12, 7.1560851960630076e-6, -4.5516802628155526e-6, 1.4236576649271475e-6,
     1.8803149082089664e-14, -2.6623403898929211e-7, 1.5950642189595716e-7, -4.7187514673841102e-8,
     -6.5107872958755177e-17, 7.9795091026746235e-9},
    {3.0249124160905891e-2, 2.4817436002649977e-3, -4.9939134373457022e-2, 5.9915643009307869e-2,
     -3.2483207601623391e-2, -5.7212968652103441e-6, 1.5085251778569354e-2, -1.3261324005088445e-2,
     5.5515262632426148e-3, 3.0263182257030016e-8, -1.7229548406756723e-3, 1.2893570099929637e-3,
     -4.6845138348319876e-4, -1.830259937893045e-10, 1.1449739014822654e-4, -7.7378565221244477e-5,
     2.5625836246985201e-5, 1.0766165333192814e-12, -5.3246809282422621e-6, 3.349634863064464e-6,
     -1.0381253128684018e-6, -5.608909920621128e-15, 1.9150821930676591e-7, -1.1418365800203486e-7,
     3.3654425209171788e-8},
    {-9.9051020880159045e-2, 1.7954011706123486e-1, -1.2989606383463778e-1, -3.1478872752284357e-5,
     9.0510635276848131e-2, -9.2828824411184397e-2, 4.4412112839877808e-2, 2.7779236316835888e-7,
     -1.7229543805449697e-2, 1.4182925050891573e-2, -5.6214161633747336e-3, -2.39598509186381e-9,
     1.6029634366079908e-3, -1.1606784674435773e-3, 4.1001337768153873e-4, 1.8365800754090661e-11,
     -9.5844256563655903e-5, 6.3643062337764708e-5, -2.076250624489065e-5, -1.1806020912804483e-13,
     4.2131808239120649e-6, -2.6262241337012467e-6, 8.0770620494930662e-7, 6.0125912123632725e-16,
     -1.4729737374018841e-7},
    {-1.9994542198219728e-1, -1.5056113040026424e-2, 3.6470239469348489e-1, -4.6435192311733545e-1,
     2.6640934719197893e-1, 3.4038266027147191e-5, -1.3784338709329624e-1, 1.276467178337056e-1,
     -5.6213828755200985e-2, -1.753150885483011e-7, 1.9235592956768113e-2, -1.5088821281095315e-2,
     5.7401854451350123e-3, 1.0622382710310225e-9, -1.5335082692563998e-3, 1.0819320643228214e-3,
     -3.7372510193945659e-4, -6.6170909729031985e-12, 8.4263617380909628e-5,
     -5.5150706827483479e-5, 1.7769536448348069e-5, 3.8827923210205533e-14, -3.53513697488768e-6,
     2.1865832130045269e-6, -6.6812849447625594e-7},
    {7.2438608504029431e-1, -1.3918010932653375, 1.0654143352413968, 1.876173868950258e-4,
     -8.2705501176152696e-1, 8.9352433347828414e-1, -4.4971003995291339e-1, -1.6107401567546652e-6,
     1.9235590165271091e-1, -1.6597702160042609e-1, 6.8882222681814333e-2, 1.3910091724608687e-8,
     -2.146911561508663e-2, 1.6228980898865892e-2, -5.9796016172584256e-3, -1.1287469112826745e-10,
     1.5167451119784857e-3, -1.0478634293553899e-3, 3.5539072889126421e-4, 8.1704322111801517e-13,
     -7.7773013442452395e-5, 5.0291413897007722e-5, -1.6035083867000518e-5, 1.2469354315487605e-14,
     3.1369106244517615e-6},
    {1.6668949727276811, 1.165462765994632e-1, -3.3288393225018906, 4.4692325482864037,
     -2.6977693045875807, -2.600667859891061e-4, 1.5389017615694539, -1.4937962361134612,
     6.8881964633233148e-1, 1.3077482004552385e-6, -2.5762963325596288e-1, 2.1097676102125449e-1,
     -8.3714408359219882e-2, -7.7920428881354753e-9, 2.4267923064833599e-2, -1.7813678334552311e-2,
     6.3970330388900056e-3, 4.9430807090480523e-11, -1.5554602758465635e-3, 1.0561196919903214e-3,
     -3.5277184460472902e-4, 9.3002334645022459e-14, 7.5285855026557172e-5, -4.8186515569156351e-5,
     1.5227271505597605e-5},
    {-6.6188298861372935, 1.3397985455142589e+1, -1.0789350606845146e+1, -1.4352254537875018e-3,
     9.2333694596189809, -1.0456552819547769e+1, 5.5105526029033471, 1.2024439690716742e-5,
     -2.5762961164755816, 2.3207442745387179, -1.0045728797216284, -1.0207833290021914e-7,
     3.3975092171169466e-1, -2.6720517450757468e-1, 1.0235252851562706e-1, 8.4329730484871625e-10,
     -2.7998284958442595e-2, 2.0066274144976813e-2, -7.0554368915086242e-3, 1.9402238183698188e-12,
     1.6562888105449611e-3, -1.1082898580743683e-3, 3.654545161310169e-4, -5.1290032026971794e-11,
     -7.6340103696869031e-5},
    {-1.7112706061976095e+1, -1.1208044642899116, 3.7131966511885444e+1, -5.2298271025348962e+1,
     3.3058589696624618e+1, 2.4791298976200222e-3, -2.061089403411526e+1, 2.088672775145582e+1,
     -1.0045703956517752e+1, -1.2238783449063012e-5, 4.0770134274221141, -3.473667358470195,
     1.4329352617312006, 7.1359914411879712e-8, -4.4797257159115612e-1, 3.4112666080644461e-1,
     -1.2699786326594923e-1, -2.8953677269081528e-10, 3.3125776278259863e-2,
     -2.3274087021036101e-2, 8.0399993503648882e-3, -1.177805216235265e-9, -1.8321624891071668e-3,
     1.2108282933588665e-3, -3.9479941246822517e-4},
    {7.389033153567425e+1, -1.5680141270402273e+2, 1.322177542759164e+2, 1.3692876877324546e-2,
     -1.2366496885920151e+2, 1.4620689391062729e+2, -8.0365587724865346e+1, -1.1259851148881298e-4,
     4.0770132196179938e+1, -3.8210340013273034e+1, 1.719522294277362e+1, 9.3519707955168356e-7,
     -6.2716159907747034, 5.1168999071852637, -2.0319658112299095, -4.9507215582761543e-9,
     5.9626397294332597e-1, -4.4220765337238094e-1, 1.6079998700166273e-1, -2.4733786203223402e-8,
     -4.0307574759979762e-2, 2.7849050747097869e-2, -9.4751858992054221e-3, 6.419922235909132e-6,
     2.1250180774699461e-3},
    {2.1216837098382522e+2, 1.3107863022633868e+1, -4.9698285932871748e+2, 7.3121595266969204e+2,
     -4.8213821720890847e+2, -2.8817248692894889e-2, 3.2616720302947102e+2, -3.4389340280087117e+2,
     1.7195193870816232e+2, 1.4038077378096158e-4, -7.52594195897599e+1, 6.651969984520934e+1,
     -2.8447519748152462e+1, -7.613702615875391e-7, 9.5402237105304373, -7.5175301113311376,
     2.8943997568871961, -4.6612194999538201e-7, -8.0615149598794088e-1, 5.8483006570631029e-1,
     -2.0845408972964956e-1, 1.4765818959305817e-4, 5.1000433863753019e-2, -3.3066252141883665e-2,
     1.5109265210467774e-2},
    {-9.8959643098322368e+2, 2.1925555360905233e+3, -1.9283586782723356e+3, -1.5925738122215253e-1,
     1.9569985945919857e+3, -2.4072514765081556e+3, 1.3756149959336496e+3, 1.2920735237496668e-3,
     -7.525941715948055e+2, 7.3171668742208716e+2, -3.4137023466220065e+2, -9.9857390260608043e-6,
     1.3356313181291573e+2, -1.1276295161252794e+2, 4.6310396098204458e+1, -7.9237387133614756e-6,
     -1.4510726927018646e+1, 1.1111771248100563e+1, -4.1690817945270892, 3.1008219800117808e-3,
     1.1220095449981468, -7.6052379926149916e-1, 3.6262236505085254e-1, 2.216867741940747e-1,
     4.8683443692930507e-1},
};

// The lower (`lower`) or upper function by the expansion, where `mask`.
Value asymptotic(Builder& b, Value a, Value x, Value mask, bool lower) {
  GammaConsts k = gamma_consts(a);
  double sgn = lower ? -1 : 1;
  Value lambda = b.div(x, a);
  Value sigma = b.div(b.sub(x, a), a);
  Value e = b.sqrt(b.mul(splat(b, -2, a), b.sub(b.log1p(sigma), sigma)));
  Value eta = b.select(gt(b, lambda, 1), e, b.select(lt(b, lambda, 1), b.neg(e), splat(b, 0, a)));
  Value res = b.mul(splat(b, 0.5, a),
                    erfc(b, b.mul(b.mul(splat(b, sgn, a), eta), b.sqrt(b.div(a, splat(b, 2, a))))));
  std::vector<double> flat;
  for (const auto& row : kAsymD) flat.insert(flat.end(), row, row + 25);
  Value table = b.reshape(constant_vector(b, flat, a.dtype()), {25, 25});
  auto coef = [&](Builder& r, Value row, Value col) {
    Value c = r.reshape(r.dynamic_slice(table, {row, col}, {1, 1}), {});
    return r.broadcast_in_dim(c, a.shape(), {});
  };
  // state: sum, a^-k, |previous term|, done
  Values s = iterate(
      b, {splat(b, 0, a), splat(b, 1, a), splat(b, INFINITY, a), b.full(0, E::Bool, a.shape())},
      [&](Builder& r, Value i, const Values& s) {
        return r.and_(r.and_(mask, r.not_(s[3])), before(r, i, 25, a));
      },
      [&](Builder& r, Value i, const Values& s) {
        // c_k: d[k][0] + d[k][1] eta + ... until a term is negligible
        // (state: c_k, done, eta^n).
        Values c = iterate(
            r, {coef(r, i, r.constant_int(0, E::I64)), r.full(0, E::Bool, a.shape()), splat(r, 1, a)},
            [&](Builder& q, Value n, const Values& c) {
              return q.and_(q.and_(mask, q.not_(c[1])), before(q, n, 24, a));
            },
            [&](Builder& q, Value n, const Values& c) {
              Value power = q.mul(eta, c[2]);
              Value term = q.mul(coef(q, i, q.add(n, q.constant_int(1, E::I64))), power);
              Value next = q.add(c[0], term);
              Value small = q.compare(q.abs(term), q.mul(splat(q, k.machep, a), q.abs(next)), Compare::LT);
              return Values{next, small, power};
            });
        Value ck = c[0];
        Value term = r.mul(ck, s[1]);
        Value abs_term = r.abs(term);
        Value grows = r.compare(abs_term, s[2], Compare::GT);
        Value sum = r.select(grows, s[0], r.add(s[0], term));
        Value small = r.compare(abs_term, r.mul(splat(r, k.machep, a), r.abs(sum)), Compare::LT);
        return Values{sum, r.div(s[1], a), abs_term, r.or_(grows, small)};
      });
  // PyTorch's kernels take pi as a float here, in double too.
  const double pi_f = double(float(M_PI));
  Value damp = b.exp(b.mul(b.mul(b.mul(splat(b, -0.5, a), a), eta), eta));
  Value tail = b.div(b.mul(b.mul(splat(b, sgn, a), damp), s[0]), b.sqrt(b.mul(splat(b, 2 * pi_f, a), a)));
  return b.add(res, tail);
}

// The kernels' boundary values, in their order of precedence, over `v`.
Value gamma_boundaries(Builder& b, Value a, Value x, Value v, bool lower) {
  Value nan = splat(b, NAN, a), zero = splat(b, 0, a), one = splat(b, 1, a);
  Value lo = lower ? zero : one, hi = lower ? one : zero;
  v = b.select(b.or_(is_nan(b, a), is_nan(b, x)), nan, v);
  v = b.select(is_inf(b, x), hi, v);
  v = b.select(is_inf(b, a), b.select(is_inf(b, x), nan, lo), v);
  v = b.select(eq(b, x, 0), lo, v);
  v = b.select(eq(b, a, 0), b.select(gt(b, x, 0), hi, nan), v);
  return b.select(b.or_(lt(b, x, 0), lt(b, a, 0)), nan, v);
}

// The elements that reach the kernels' series and fractions: none of the
// boundary cases, and (`asym`) those the asymptotic expansion takes.
Value regular(Builder& b, Value a, Value x, Value* asym) {
  Value edge = b.or_(b.or_(lt(b, x, 0), lt(b, a, 0)), b.or_(eq(b, a, 0), eq(b, x, 0)));
  edge = b.or_(edge, b.or_(b.or_(is_inf(b, a), is_inf(b, x)), b.or_(is_nan(b, a), is_nan(b, x))));
  Value ratio = b.div(b.abs(b.sub(x, a)), a);
  Value mid = b.and_(b.and_(gt(b, a, 20), lt(b, a, 200)), lt(b, ratio, 0.3));
  Value large = b.and_(gt(b, a, 200), b.compare(ratio, b.div(splat(b, 4.5, a), b.sqrt(a)), Compare::LT));
  *asym = b.and_(b.not_(edge), b.or_(mid, large));
  return b.and_(b.not_(edge), b.not_(*asym));
}

Value igamma_impl(Builder& b, Value a, Value x) {
  Value asym;
  Value reg = regular(b, a, x, &asym);
  Value one = splat(b, 1, a);
  // x > 1 and x > a: 1 - the upper function, which there takes its
  // continued fraction past x = 1.1 and its series below.
  Value up = b.and_(gt(b, x, 1), b.compare(x, a, Compare::GT));
  Value frac = gt(b, x, 1.1);
  Value lg = log_gamma(b, a), ax = gamma_factor(b, a, x, lg);
  Value s = lower_series(b, a, x, ax, b.and_(reg, b.not_(up)));
  Value cf = upper_fraction(b, a, x, ax, b.and_(b.and_(reg, up), frac));
  Value us = upper_series(b, a, x, lg, b.and_(b.and_(reg, up), b.not_(frac)));
  Value v = b.select(up, b.sub(one, b.select(frac, cf, us)), s);
  v = b.select(asym, asymptotic(b, a, x, asym, true), v);
  return gamma_boundaries(b, a, x, v, true);
}

Value igammac_impl(Builder& b, Value a, Value x) {
  Value asym;
  Value reg = regular(b, a, x, &asym);
  Value one = splat(b, 1, a);
  // 1 - the lower series, or the upper function's own series or fraction.
  Value frac = gt(b, x, 1.1);
  Value low = b.compare(x, splat(b, 0.5, x), Compare::LE);
  Value by_lower = b.select(
      frac, b.compare(x, a, Compare::LT),
      b.select(low, b.compare(b.div(splat(b, -0.4, x), b.log(x)), a, Compare::LT),
               b.compare(b.mul(x, splat(b, 1.1, x)), a, Compare::LT)));
  Value lg = log_gamma(b, a), ax = gamma_factor(b, a, x, lg);
  Value s = lower_series(b, a, x, ax, b.and_(reg, by_lower));
  Value cf = upper_fraction(b, a, x, ax, b.and_(b.and_(reg, b.not_(by_lower)), frac));
  Value us = upper_series(b, a, x, lg, b.and_(b.and_(reg, b.not_(by_lower)), b.not_(frac)));
  Value v = b.select(by_lower, b.sub(one, s), b.select(frac, cf, us));
  v = b.select(asym, asymptotic(b, a, x, asym, false), v);
  return gamma_boundaries(b, a, x, v, false);
}

// igamma(a, x) and igammac(a, x): kernels for the float types (half types
// compute in float); integer inputs are not promoted.
template <bool Upper>
Values lower_igamma(Context& ctx, const Args& args) {
  E t = result_type(ctx, {&args.at(0), &args.at(1)});
  check_dtype(hlo::is_float(t), Upper ? "igammac_cpu" : "igamma_cpu", t);
  Value a = operand(ctx, args.at(0), opmath(t)), x = operand(ctx, args.at(1), opmath(t));
  Shape shape = broadcast_shapes(a.shape(), x.shape());
  a = broadcast_to(ctx.b, a, shape), x = broadcast_to(ctx.b, x, shape);
  return {cast(ctx.b, Upper ? igammac_impl(ctx.b, a, x) : igamma_impl(ctx.b, a, x), t)};
}

}  // namespace

TPU_LOWERING("aten::igamma", lower_igamma<false>);
TPU_LOWERING("aten::igammac", lower_igamma<true>);
TPU_LOWERING("aten::special_chebyshev_polynomial_t", float_double_binary<chebyshev_impl<Kind::T, false>, kChebyshevT>);
TPU_LOWERING("aten::special_chebyshev_polynomial_t.n_scalar", float_double_binary<chebyshev_impl<Kind::T, false>, kChebyshevT>);
TPU_LOWERING("aten::special_chebyshev_polynomial_t.x_scalar", float_double_binary<chebyshev_impl<Kind::T, false>, kChebyshevT>);
TPU_LOWERING("aten::special_chebyshev_polynomial_u", float_double_binary<chebyshev_impl<Kind::U, false>, kChebyshevU>);
TPU_LOWERING("aten::special_chebyshev_polynomial_u.n_scalar", float_double_binary<chebyshev_impl<Kind::U, false>, kChebyshevU>);
TPU_LOWERING("aten::special_chebyshev_polynomial_u.x_scalar", float_double_binary<chebyshev_impl<Kind::U, false>, kChebyshevU>);
TPU_LOWERING("aten::special_chebyshev_polynomial_v", float_double_binary<chebyshev_impl<Kind::V, false>, kChebyshevV>);
TPU_LOWERING("aten::special_chebyshev_polynomial_v.n_scalar", float_double_binary<chebyshev_impl<Kind::V, false>, kChebyshevV>);
TPU_LOWERING("aten::special_chebyshev_polynomial_v.x_scalar", float_double_binary<chebyshev_impl<Kind::V, false>, kChebyshevV>);
TPU_LOWERING("aten::special_chebyshev_polynomial_w", float_double_binary<chebyshev_impl<Kind::W, false>, kChebyshevW>);
TPU_LOWERING("aten::special_chebyshev_polynomial_w.n_scalar", float_double_binary<chebyshev_impl<Kind::W, false>, kChebyshevW>);
TPU_LOWERING("aten::special_chebyshev_polynomial_w.x_scalar", float_double_binary<chebyshev_impl<Kind::W, false>, kChebyshevW>);
TPU_LOWERING("aten::special_hermite_polynomial_h", float_double_binary<hermite_impl<true>, kHermiteH>);
TPU_LOWERING("aten::special_hermite_polynomial_h.n_scalar", float_double_binary<hermite_impl<true>, kHermiteH>);
TPU_LOWERING("aten::special_hermite_polynomial_h.x_scalar", float_double_binary<hermite_impl<true>, kHermiteH>);
TPU_LOWERING("aten::special_hermite_polynomial_he", float_double_binary<hermite_impl<false>, kHermiteHe>);
TPU_LOWERING("aten::special_hermite_polynomial_he.n_scalar", float_double_binary<hermite_impl<false>, kHermiteHe>);
TPU_LOWERING("aten::special_hermite_polynomial_he.x_scalar", float_double_binary<hermite_impl<false>, kHermiteHe>);
TPU_LOWERING("aten::special_laguerre_polynomial_l", float_double_binary<laguerre_impl, kLaguerreL>);
TPU_LOWERING("aten::special_laguerre_polynomial_l.n_scalar", float_double_binary<laguerre_impl, kLaguerreL>);
TPU_LOWERING("aten::special_laguerre_polynomial_l.x_scalar", float_double_binary<laguerre_impl, kLaguerreL>);
TPU_LOWERING("aten::special_legendre_polynomial_p", float_double_binary<legendre_impl, kLegendreP>);
TPU_LOWERING("aten::special_legendre_polynomial_p.n_scalar", float_double_binary<legendre_impl, kLegendreP>);
TPU_LOWERING("aten::special_legendre_polynomial_p.x_scalar", float_double_binary<legendre_impl, kLegendreP>);
TPU_LOWERING("aten::special_shifted_chebyshev_polynomial_t", float_double_binary<chebyshev_impl<Kind::T, true>, kShiftedT>);
TPU_LOWERING("aten::special_shifted_chebyshev_polynomial_t.n_scalar", float_double_binary<chebyshev_impl<Kind::T, true>, kShiftedT>);
TPU_LOWERING("aten::special_shifted_chebyshev_polynomial_t.x_scalar", float_double_binary<chebyshev_impl<Kind::T, true>, kShiftedT>);
TPU_LOWERING("aten::special_shifted_chebyshev_polynomial_u", float_double_binary<chebyshev_impl<Kind::U, true>, kShiftedU>);
TPU_LOWERING("aten::special_shifted_chebyshev_polynomial_u.n_scalar", float_double_binary<chebyshev_impl<Kind::U, true>, kShiftedU>);
TPU_LOWERING("aten::special_shifted_chebyshev_polynomial_u.x_scalar", float_double_binary<chebyshev_impl<Kind::U, true>, kShiftedU>);
TPU_LOWERING("aten::special_shifted_chebyshev_polynomial_v", float_double_binary<chebyshev_impl<Kind::V, true>, kShiftedV>);
TPU_LOWERING("aten::special_shifted_chebyshev_polynomial_v.n_scalar", float_double_binary<chebyshev_impl<Kind::V, true>, kShiftedV>);
TPU_LOWERING("aten::special_shifted_chebyshev_polynomial_v.x_scalar", float_double_binary<chebyshev_impl<Kind::V, true>, kShiftedV>);
TPU_LOWERING("aten::special_shifted_chebyshev_polynomial_w", float_double_binary<chebyshev_impl<Kind::W, true>, kShiftedW>);
TPU_LOWERING("aten::special_shifted_chebyshev_polynomial_w.n_scalar", float_double_binary<chebyshev_impl<Kind::W, true>, kShiftedW>);
TPU_LOWERING("aten::special_shifted_chebyshev_polynomial_w.x_scalar", float_double_binary<chebyshev_impl<Kind::W, true>, kShiftedW>);

}  // namespace torch_tpu::lowering
