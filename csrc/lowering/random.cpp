// Random ops on StableHLO's PHILOX bit generator. The generator argument is
// (seed, offset); the same pair always gives the same numbers, so
// torch.manual_seed replays a stream.
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "lowering/common.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

using hlo::Builder;
using hlo::Compare;
using hlo::TensorType;
using E = ElementType;
using Values = std::vector<Value>;

// A ui64 constant of any value (constant_int stops at INT64_MAX).
Value u64(Builder& b, uint64_t v, const Shape& shape = {}) {
  TensorType t = hlo::scalar_type(E::U64);
  Value c = b.op("stablehlo.constant", {}, t, "value = dense<" + std::to_string(v) + "> : " + t.str());
  return shape.empty() ? c : b.broadcast_in_dim(c, shape, {});
}

// SplitMix64's finalizer: a bijective mix of 64 bits.
Value mix64(Builder& b, Value z) {
  z = b.mul(b.xor_(z, b.shift_right_logical(z, u64(b, 30))), u64(b, 0xBF58476D1CE4E5B9ull));
  z = b.mul(b.xor_(z, b.shift_right_logical(z, u64(b, 27))), u64(b, 0x94D049BB133111EBull));
  return b.xor_(z, b.shift_right_logical(z, u64(b, 31)));
}

// A stream of random bits for one op. The generator's offset advances by the
// number of values each op draws, while PHILOX's counter advances by 128-bit
// blocks, so using the offset as the counter would make neighbouring ops
// overlap. Instead (seed, offset) are hashed into the PHILOX key and the
// counter starts at 0: every (seed, offset) gets its own stream.
class Bits {
 public:
  Bits(Context& ctx, const Arg& generator) : b_(ctx.b) {
    Value state = ctx.rng_state(generator);
    auto word = [&](int64_t i) { return b_.reshape(b_.slice(state, {i}, {i + 1}, {1}), {}); };
    Value offset_key = mix64(b_, b_.add(word(1), u64(b_, 0x9E3779B97F4A7C15ull)));
    Value key = mix64(b_, b_.xor_(word(0), offset_key));
    state_ = b_.concatenate({b_.reshape(key, {1}), u64(b_, 0, {1})}, 0);
  }

  // A stream carried through a loop: `state` is a ui64[2] the previous
  // round returned by state().
  Bits(Builder& b, Value state) : b_(b), state_(std::move(state)) {}
  const Value& state() const { return state_; }

  // Uniform bits of an unsigned type.
  Value draw(E type, const Shape& shape) {
    return b_.rng_bit_generator(state_, TensorType{type, shape}, &state_);
  }

  // Uniform floats in [0, 1) of type `acc` (f32 or f64) holding `digits`
  // random bits: k / 2^digits, exactly representable in the target type.
  Value uniform(E acc, int digits, const Shape& shape) {
    bool wide = acc == E::F64;
    Value bits = draw(wide ? E::U64 : E::U32, shape);
    int width = wide ? 64 : 32;
    Value shift = b_.full(width - digits, bits.dtype(), shape);
    Value k = b_.convert(b_.shift_right_logical(bits, shift), acc);
    return b_.mul(k, b_.full(std::ldexp(1.0, -digits), acc, shape));
  }

 private:
  Builder& b_;
  Value state_;
};

// Mantissa digits of a float type (std::numeric_limits<T>::digits).
int digits(E t) {
  switch (t) {
    case E::F64: return 53;
    case E::F32: return 24;
    case E::F16: return 11;
    case E::BF16: return 8;
    default: return 24;
  }
}

E acc_type(E t) { return t == E::F64 ? E::F64 : E::F32; }

const Value& self_of(const Args& args) { return args.at(0).as_tensor(); }

// Complex tensors are filled as the CPU fills view_as_real(self): the real
// and imaginary parts are drawn as a trailing pair of reals of the part type.
E part_type(E t) { return t == E::C128 ? E::F64 : t == E::C64 ? E::F32 : t; }
Shape draw_shape(const Value& self) {
  Shape s = self.shape();
  if (hlo::is_complex(self.dtype())) s.push_back(2);
  return s;
}
// A draw of draw_shape(self) (in the accumulation type) as a value of type t.
Value from_parts(Builder& b, Value r, E t) {
  if (!hlo::is_complex(t)) return cast(b, r, t);
  r = cast(b, r, part_type(t));
  Shape s = r.shape();
  Shape lo(s.size(), 0), hi = s, st(s.size(), 1);
  Shape out(s.begin(), s.end() - 1);
  hi.back() = 1;
  Value re = b.reshape(b.slice(r, lo, hi, st), out);
  lo.back() = 1;
  hi.back() = 2;
  Value im = b.reshape(b.slice(r, lo, hi, st), out);
  return b.complex(re, im);
}

// uniform(self, from, to, *, generator): values in [from, to), computed as
// from + u (to - from) in the accumulation type like PyTorch's CPU kernel.
Values lower_uniform(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value self = self_of(args);
  E t = self.dtype(), p = part_type(t);
  check_dtype(hlo::is_float(p), "check_uniform_bounds", t);
  double from = args.at(1).as_float(), to = args.at(2).as_float();
  TPU_CHECK(from <= to, ErrorKind::Runtime, "uniform_ expects to return a [from, to) range, but found from=",
            from, " > to=", to);
  Bits bits(ctx, args.at(3));
  Value u = bits.uniform(acc_type(p), digits(p), draw_shape(self));
  Value r = b.add(b.mul(u, splat(b, to - from, u)), splat(b, from, u));
  return {from_parts(b, r, t)};
}

// Standard normal values by Box-Muller (the cosine half).
Value standard_normal(Bits& bits, Builder& b, E acc, const Shape& shape) {
  int d = acc == E::F64 ? 53 : 24;
  Value u1 = bits.uniform(acc, d, shape);
  Value u2 = bits.uniform(acc, d, shape);
  // 1 - u1 is in (0, 1], so the log is finite.
  Value radius = b.sqrt(b.mul(b.log(b.sub(splat(b, 1, u1), u1)), splat(b, -2, u1)));
  return b.mul(radius, b.cosine(b.mul(u2, splat(b, 2 * M_PI, u2))));
}

// normal_functional(self, mean, std, *, generator)
Values lower_normal(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value self = self_of(args);
  E t = self.dtype(), p = part_type(t);
  check_dtype(hlo::is_float(p), "normal_kernel_cpu", t);
  double mean = args.at(1).as_float(), std = args.at(2).as_float();
  TPU_CHECK(std >= 0.0, ErrorKind::Runtime, "normal expects std >= 0.0, but found std ", std);
  // Each part of a complex value gets half the variance (and the whole mean).
  if (hlo::is_complex(t)) std /= std::sqrt(2.0);
  Bits bits(ctx, args.at(3));
  Value z = standard_normal(bits, b, acc_type(p), draw_shape(self));
  return {from_parts(b, b.add(b.mul(z, splat(b, std, z)), splat(b, mean, z)), t)};
}

// rrelu_with_noise(self, noise, lower, upper, training, generator) ->
// (out, noise), as rrelu_with_noise_functional returns them. In training
// each element that is not positive is scaled by a slope drawn uniformly
// from [lower, upper) and kept in noise (1 elsewhere, NaN included); outside
// training it is leaky_relu with the mean slope, and noise stays as it was.
Values lower_rrelu_with_noise(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value x = self_of(args), noise = args.at(1).as_tensor();
  E t = x.dtype(), c = opmath(t);
  TPU_CHECK(x.shape() == noise.shape(), ErrorKind::Runtime,
            "noise tensor shape must match self tensor shape. Got self.shape = ", hlo::shape_str(x.shape()),
            " noise.shape = ", hlo::shape_str(noise.shape()));
  double lower = args.at(2).as_float(), upper = args.at(3).as_float();
  Value xc = cast(b, x, c), zero = b.zeros(c, x.shape());
  if (!args.at(4).as_bool()) {
    check_dtype(hlo::is_float(t), "leaky_relu_cpu", t);
    Value out = b.select(b.compare(xc, zero, Compare::GT), xc, b.mul(xc, splat(b, (lower + upper) / 2, xc)));
    return {cast(b, out, t), noise};
  }
  check_dtype(hlo::is_float(t), "rrelu_with_noise_out_cpu", t);
  TPU_CHECK(noise.dtype() == t, ErrorKind::Runtime, "expected scalar type ", scalar_type_name(t),
            " but found ", scalar_type_name(noise.dtype()));
  TPU_CHECK(lower <= upper, ErrorKind::Runtime, "Expected from <= to to be true, but got false.");
  Bits bits(ctx, args.at(5));
  Value u = bits.uniform(acc_type(t), acc_type(t) == E::F64 ? 53 : 24, x.shape());
  Value slope = cast(b, b.add(b.mul(u, splat(b, upper - lower, u)), splat(b, lower, u)), c);
  Value scaled = b.compare(xc, zero, Compare::LE);
  return {cast(b, b.select(scaled, b.mul(xc, slope), xc), t),
          cast(b, b.select(scaled, slope, b.full(1, c, x.shape())), t)};
}

// ---- gamma draws (torch.distributions' Gamma, Beta, Dirichlet, Chi2...)

// The log of a standard Gamma(alpha) draw per element, by Marsaglia and
// Tsang's rejection method as PyTorch's sample_gamma does it: alpha < 1
// draws with alpha + 1 and scales by u^(1/alpha). Each round of one device
// while loop gives every element not yet done a candidate (a normal and a
// uniform draw), until all have accepted one (each does with probability
// above 0.95). alpha <= 0 or NaN gives -inf, a zero draw. Logs keep the
// tiny draws of tiny alphas, which underflow float32 and which Dirichlet
// normalizes.
Value log_gamma_draw(Context& ctx, const Arg& generator, Value alpha) {
  Builder& b = ctx.b;
  E t = alpha.dtype();
  const Shape s = alpha.shape();
  Bits bits(ctx, generator);
  Value one = splat(b, 1, alpha);
  Value boost = b.compare(alpha, one, Compare::LT);
  Value u0 = bits.uniform(t, digits(t), s);
  Value log_scale = b.select(boost, b.div(b.log1p(b.neg(u0)), alpha), splat(b, 0, alpha));
  Value a = b.select(boost, b.add(alpha, one), alpha);
  Value d = b.sub(a, splat(b, 1.0 / 3, a));
  Value c = b.div(one, b.sqrt(b.mul(splat(b, 9, d), d)));
  Value none = b.not_(b.compare(alpha, splat(b, 0, alpha), Compare::GT));  // <= 0 or NaN
  hlo::RegionFn cond = [](Builder& r, const Values& st) { return Values{any_nonzero(r, r.not_(st[1]))}; };
  hlo::RegionFn body = [&](Builder& r, const Values& st) {
    Bits round(r, st[0]);
    Value x = standard_normal(round, r, t, s);
    Value u = r.sub(splat(r, 1, x), round.uniform(t, digits(t), s));  // in (0, 1]
    Value y = r.add(splat(r, 1, x), r.mul(c, x));
    Value v = r.mul(r.mul(y, y), y), xx = r.mul(x, x);
    Value squeeze = r.compare(u, r.sub(splat(r, 1, x), r.mul(splat(r, 0.0331, x), r.mul(xx, xx))), Compare::LT);
    Value log_v = r.log(v);
    Value bound = r.add(r.mul(splat(r, 0.5, x), xx), r.mul(d, r.add(r.sub(splat(r, 1, x), v), log_v)));
    Value ok = r.and_(r.compare(y, splat(r, 0, y), Compare::GT),
                      r.or_(squeeze, r.compare(r.log(u), bound, Compare::LT)));
    Value take = r.and_(r.not_(st[1]), ok);
    return Values{round.state(), r.or_(st[1], take), r.select(take, log_v, st[2])};
  };
  Values out = while_loop(b, {bits.state(), none, b.full(0, t, s)}, cond, body);
  Value draw = b.add(b.add(b.log(d), out[2]), log_scale);
  return b.select(none, b.full(-INFINITY, t, s), draw);
}

void check_gamma_dtype(E t, const char* kernel) {
  check_dtype(t == E::F32 || t == E::F64, kernel, t);
}

// The smallest normal number and the float below 1 of f32 or f64.
double smallest_normal(E t) {
  return t == E::F64 ? std::numeric_limits<double>::min() : double(std::numeric_limits<float>::min());
}
double below_one(E t) { return t == E::F64 ? std::nextafter(1.0, 0.0) : double(std::nextafter(1.0f, 0.0f)); }

// _standard_gamma(self, generator): a Gamma(self, 1) draw per element, at
// least the type's smallest normal number (as the CPU clamps it).
Values lower_standard_gamma(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value alpha = self_of(args);
  check_gamma_dtype(alpha.dtype(), "gamma_cpu");
  Value g = b.exp(log_gamma_draw(ctx, args.at(1), alpha));
  return {b.max(g, b.full(smallest_normal(alpha.dtype()), alpha.dtype(), alpha.shape()))};
}

// _sample_dirichlet(self, generator): gamma draws normalized along the last
// dimension, as the CPU computes them: each draw at least double's smallest
// normal (the CPU draws in double), each share in [smallest normal, the
// float below 1]. Normalized in logs (a softmax), so float32 keeps what the
// CPU's double keeps.
Values lower_sample_dirichlet(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value alpha = self_of(args);
  E t = alpha.dtype();
  check_gamma_dtype(t, "dirichlet");
  const Shape& s = alpha.shape();
  Value lg = b.max(log_gamma_draw(ctx, args.at(1), alpha),
                   b.full(std::log(std::numeric_limits<double>::min()), t, s));
  // Each log share: lg - logsumexp(lg) along the last dimension; a 0-dim
  // draw is the whole.
  Value share = b.full(0, t, s);
  if (!s.empty()) {
    int64_t last = int64_t(s.size()) - 1;
    std::vector<int64_t> lead;
    for (int64_t i = 0; i < last; ++i) lead.push_back(i);
    Value top = b.broadcast_in_dim(b.reduce_max(lg, {last}), s, lead);
    Value sum = b.reduce_sum(b.exp(b.sub(lg, top)), {last});
    share = b.sub(b.sub(lg, top), b.broadcast_in_dim(b.log(sum), s, lead));
  }
  return {b.min(b.max(b.exp(share), b.full(smallest_normal(t), t, s)), b.full(below_one(t), t, s))};
}

// ---- distributions by inverse transform of a uniform draw

// A float tensor argument's type and a uniform draw for it in op-math
// precision; `kernel` names PyTorch's kernel in the dtype error.
Value uniform_for(Context& ctx, const Arg& self, const Arg& generator, const char* kernel) {
  E t = self.as_tensor().dtype();
  check_dtype(hlo::is_float(t), kernel, t);
  Bits bits(ctx, generator);
  return bits.uniform(acc_type(t), acc_type(t) == E::F64 ? 53 : 24, self.tensor.shape());
}

// exponential(self, lambd): -log(1 - u) / lambd
Values lower_exponential(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  double lambd = args.at(1).as_float();
  TPU_CHECK(lambd > 0.0, ErrorKind::Runtime, "exponential_ expects lambda > 0.0, but found lambda=", lambd);
  Value u = uniform_for(ctx, args.at(0), args.at(2), "exponential_cpu");
  Value r = b.div(b.neg(b.log1p(b.neg(u))), splat(b, lambd, u));
  return {cast(b, r, args[0].tensor.dtype())};
}

// geometric(self, p): the number of trials up to the first success,
// ceil(log(1 - u) / log(1 - p)); any numeric type.
Values lower_geometric(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value self = self_of(args);
  double p = args.at(1).as_float();
  TPU_CHECK(p > 0 && p < 1, ErrorKind::Runtime, "geometric_ expects p to be in (0, 1), but got p=", p);
  E acc = self.dtype() == E::F64 ? E::F64 : E::F32;
  Bits bits(ctx, args.at(2));
  Value u = bits.uniform(acc, acc == E::F64 ? 53 : 24, self.shape());
  Value r = b.ceil(b.div(b.log1p(b.neg(u)), splat(b, std::log1p(-p), u)));
  // u = 0 gives 0 trials; the least count is 1.
  r = b.max(r, splat(b, 1, r));
  return {cast(b, r, self.dtype())};
}

// log_normal(self, mean, std): exp of a normal draw.
Values lower_log_normal(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value self = self_of(args);
  E t = self.dtype();
  check_dtype(hlo::is_float(t), "log_normal_cpu", t);
  double mean = args.at(1).as_float(), std = args.at(2).as_float();
  TPU_CHECK(std > 0.0, ErrorKind::Runtime, "log_normal_ expects std > 0.0, but found std=", std);
  Bits bits(ctx, args.at(3));
  Value z = standard_normal(bits, b, acc_type(t), self.shape());
  return {cast(b, b.exp(b.add(b.mul(z, splat(b, std, z)), splat(b, mean, z))), t)};
}

// cauchy(self, median, sigma): median + sigma tan(pi (u - 1/2))
Values lower_cauchy(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  double median = args.at(1).as_float(), sigma = args.at(2).as_float();
  TPU_CHECK(sigma > 0.0, ErrorKind::Runtime, "cauchy_ expects sigma > 0.0, but found sigma=", sigma);
  Value u = uniform_for(ctx, args.at(0), args.at(3), "cauchy_cpu");
  Value angle = b.mul(b.sub(u, splat(b, 0.5, u)), splat(b, M_PI, u));
  Value r = b.add(b.mul(b.tan(angle), splat(b, sigma, u)), splat(b, median, u));
  return {cast(b, r, args[0].tensor.dtype())};
}

// 1 where a uniform draw falls below p, in `type`.
Value bernoulli_mask(Context& ctx, const Arg& generator, Value p, E type) {
  Builder& b = ctx.b;
  Bits bits(ctx, generator);
  Value u = bits.uniform(p.dtype(), digits(p.dtype()), p.shape());
  Value hit = b.compare(u, p, Compare::LT);
  return type == E::Bool ? hit : b.convert(hit, type);
}

// bernoulli.p(self, p, *, generator): self's shape and type.
Values lower_bernoulli_p(Context& ctx, const Args& args) {
  Value self = self_of(args);
  double p = args.at(1).as_float();
  TPU_CHECK(p >= 0 && p <= 1, ErrorKind::Runtime, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  Value pv = ctx.b.full(p, E::F32, self.shape());
  return {bernoulli_mask(ctx, args.at(2), pv, self.dtype())};
}

// bernoulli.Tensor(self, p, *, generator): p broadcast to self's shape.
Values lower_bernoulli_tensor(Context& ctx, const Args& args) {
  Value self = self_of(args);
  Value p = args.at(1).as_tensor();
  check_dtype(hlo::is_float(p.dtype()), "bernoulli_tensor_cpu_p_", p.dtype());
  p = broadcast_to(ctx.b, cast(ctx.b, p, acc_type(p.dtype())), self.shape());
  return {bernoulli_mask(ctx, args.at(2), p, self.dtype())};
}

// bernoulli(self, *, generator): self holds the probabilities.
Values lower_bernoulli(Context& ctx, const Args& args) {
  Value self = self_of(args);
  check_dtype(hlo::is_float(self.dtype()), "bernoulli_tensor_cpu_self_", self.dtype());
  Value p = cast(ctx.b, self, acc_type(self.dtype()));
  return {bernoulli_mask(ctx, args.at(1), p, self.dtype())};
}

// native_dropout(input, p, train): (input * mask / (1 - p), mask). Outside
// training (train == false) the input passes through with an all-true mask.
// The op takes no generator: the default one arrives as a last argument.
Values lower_native_dropout(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value x = self_of(args);
  double p = args.at(1).as_float();
  const Arg& train = args.at(2);
  if (!train.is_none() && !train.as_bool()) return {x, b.full(1, E::Bool, x.shape())};
  TPU_CHECK(p >= 0 && p <= 1, ErrorKind::Value,
            "dropout probability has to be between 0 and 1, but got ", p);
  double keep = 1 - p;
  Value mask = bernoulli_mask(ctx, args.back(), b.full(keep, E::F32, x.shape()), E::Bool);
  E t = x.dtype();
  E c = opmath(t);
  double scale = keep == 0 ? 0 : 1 / keep;
  Value kept = b.select(mask, cast(b, x, c), b.full(0, c, x.shape()));
  return {cast(b, b.mul(kept, b.full(scale, c, x.shape())), t), mask};
}

// native_dropout_backward(grad, mask, scale) = grad * mask * scale
Values lower_native_dropout_backward(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value g = args.at(0).as_tensor();
  Value mask = args.at(1).as_tensor();
  // grad * mask * scale: the (double) scale makes integer and bool grads
  // the default float type, as on the CPU.
  E t = hlo::is_float(g.dtype()) || hlo::is_complex(g.dtype()) ? g.dtype() : ctx.default_float;
  E c = opmath(t);
  Shape shape = broadcast_shapes(g.shape(), mask.shape());
  Value m = broadcast_to(b, cast(b, mask, c), shape);
  Value r = b.mul(b.mul(broadcast_to(b, cast(b, g, c), shape), m), b.full(args.at(2).as_float(), c, shape));
  return {cast(b, r, t)};
}

// ---- random_: integers uniform over [from, to)

// The largest value random_() without bounds produces, per PyTorch: 2^digits
// for floats (every integer up to it is exact), the type's max for integers.
uint64_t default_to(E t) {
  if (hlo::is_float(t)) return (uint64_t{1} << digits(t)) + 1;
  switch (t) {
    case E::Bool: return 2;
    case E::U8: return 256;
    case E::I8: return 128;
    case E::I16: return 32768;
    case E::I32: return uint64_t{1} << 31;
    case E::U16: return 65536;
    case E::U32: return uint64_t{1} << 32;
    default: return uint64_t{1} << 63;  // i64, u64
  }
}

// from + bits % range, drawing 64-bit words when the range needs them. A
// range of 0 stands for 2^64 (every int64).
Value random_range(Context& ctx, const Arg& generator, const Value& self, int64_t from,
                   uint64_t range) {
  Builder& b = ctx.b;
  const Shape& shape = self.shape();
  Bits bits(ctx, generator);
  bool wide = range == 0 || range > (uint64_t{1} << 32);
  Value r = bits.draw(wide ? E::U64 : E::U32, shape);
  if (!wide) r = b.convert(r, E::U64);
  Value v;
  if (range == 0) {
    v = b.bitcast_convert(r, {E::I64, shape});
  } else {
    Value k = b.convert(b.rem(r, u64(b, range, shape)), E::I64);
    v = b.add(k, broadcast_to(b, b.constant_int(from, E::I64), shape));
  }
  E t = self.dtype();
  return t == E::Bool ? b.compare(v, b.zeros(E::I64, shape), Compare::NE) : b.convert(v, t);
}

Values lower_random(Context& ctx, const Args& args) {
  Value self = self_of(args);
  return {random_range(ctx, args.at(1), self, 0, default_to(self.dtype()))};
}

void check_from_to(int64_t from, int64_t to) {
  TPU_CHECK(from < to, ErrorKind::Runtime, "random_ expects 'from' to be less than 'to', but got from=",
            from, " >= to=", to);
}

// A bound of random_ must be a value of the element type, or the draws would
// wrap into it: the CPU's check, with the type named as its message (c10's
// type name) names it. Other types hold every int64 (bf16 and f32 only
// round; the CPU warns).
void check_in_type(int64_t v, const char* what, E t) {
  const char* name = nullptr;
  switch (t) {
    case E::Bool: name = "bool"; break;
    case E::I8: name = "signed char"; break;
    case E::U8: name = "unsigned char"; break;
    case E::I16: name = "short int"; break;
    case E::U16: name = "short unsigned int"; break;
    case E::I32: name = "int"; break;
    case E::U32: name = "unsigned int"; break;
    case E::F16: name = "c10::Half"; break;
    default: return;
  }
  const auto [lo, hi] = t == E::F16 ? std::pair<long double, long double>{-65504, 65504} : hlo::int_range(t);
  const long double x = v;
  TPU_CHECK(x >= lo && x <= hi, ErrorKind::Runtime, what, " is out of bounds for ", name);
}

// random.from(self, from, to?, *, generator)
Values lower_random_from(Context& ctx, const Args& args) {
  Value self = self_of(args);
  int64_t from = args.at(1).as_int();
  std::optional<int64_t> to = args.at(2).opt_int();
  uint64_t range;
  if (to) {
    check_from_to(from, *to);
    check_in_type(from, "from", self.dtype());
    check_in_type(*to - 1, "to - 1", self.dtype());
    range = static_cast<uint64_t>(*to) - static_cast<uint64_t>(from);
  } else {
    check_in_type(from, "from", self.dtype());
    range = default_to(self.dtype()) - static_cast<uint64_t>(from);
  }
  return {random_range(ctx, args.at(3), self, from, range)};
}

// random.to(self, to, *, generator)
Values lower_random_to(Context& ctx, const Args& args) {
  Value self = self_of(args);
  int64_t to = args.at(1).as_int();
  check_from_to(0, to);
  check_in_type(to - 1, "to - 1", self.dtype());
  return {random_range(ctx, args.at(2), self, 0, static_cast<uint64_t>(to))};
}

// randperm.generator(n, *, generator, dtype, ...): 0..n-1 ordered by random
// 64-bit keys, so that ties (and the bias they bring) are negligible.
Values lower_randperm(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  int64_t n = args.at(0).as_int();
  TPU_CHECK(n >= 0, ErrorKind::Runtime, "n must be non-negative, got", n);
  E t = args.size() > 2 && !args[2].is_none() ? args[2].as_dtype() : E::I64;
  Shape shape{n};
  Bits bits(ctx, args.at(1));
  Value keys = bits.draw(E::U64, shape);
  Value order = b.iota(TensorType{E::I64, shape}, 0);
  auto sorted = b.sort({keys, order}, 0, /*is_stable=*/true,
                       [](Builder& rb, const Values& v) { return Values{rb.compare(v[0], v[1], Compare::LT)}; });
  return {cast(b, sorted[1], t)};
}

// ---- multinomial

// An inclusive scan along dim 1 of a (rows, c) value by doubling (log2 c
// steps of `combine(x[j], x[j - s])`, `fill` before the first column).
template <typename Combine>
Value scan_rows(Builder& b, Value x, double fill, Combine combine) {
  int64_t r = x.shape()[0], c = x.shape()[1];
  for (int64_t s = 1; s < c; s *= 2) {
    Value shifted = b.pad(b.slice(x, {0, 0}, {r, c - s}, {1, 1}), b.constant(fill, x.dtype()), {0, s},
                          {0, 0}, {0, 0});
    x = combine(x, shifted);
  }
  return x;
}

// Without replacement (and for one sample), the CPU's exponential race: the
// n largest p / e with e ~ Exp(1) per category are a draw of n distinct
// categories, each next one with probability proportional to p among those
// left; a category of probability 0 has key 0 and loses to every other.
Value race(Builder& b, Bits& bits, Value p, int64_t n) {
  E acc = p.dtype();
  int64_t rows = p.shape()[0];
  Value u = bits.uniform(acc, digits(acc), p.shape());
  // u = 0 gives e = 0; the least normal number keeps the key finite for p = 0.
  Value e = b.max(b.neg(b.log1p(b.neg(u))), splat(b, acc == E::F64 ? 2.2250738585072014e-308 : 1.17549435e-38, u));
  Value key = b.div(p, e);
  Value order = b.iota(TensorType{E::I64, p.shape()}, 1);
  if (n == 1) {
    // The first of the largest keys: a reduce, not a sort of the whole row
    // (sampling a token from a vocabulary takes one).
    Values best = b.reduce({key, order}, {b.constant(-1, acc), b.constant_int(0, E::I64)}, {1},
                           [](Builder& r, const Values& v) {
                             Value later = r.or_(r.compare(v[2], v[0], Compare::GT),
                                                 r.and_(r.compare(v[2], v[0], Compare::EQ),
                                                        r.compare(v[3], v[1], Compare::LT)));
                             return Values{r.select(later, v[2], v[0]), r.select(later, v[3], v[1])};
                           });
    return b.reshape(best[1], {rows, 1});
  }
  Values sorted = b.sort({key, order}, 1, /*is_stable=*/true, [](Builder& r, const Values& v) {
    return Values{r.compare(v[0], v[1], Compare::GT)};
  });
  return b.slice(sorted[1], {0, 0}, {rows, n}, {1, 1});
}

// With replacement: sample k is the first category whose prefix sum reaches
// v = u' * total with u' uniform in (0, 1], found by a binary search of
// log2(c) steps. The prefix sums are made to repeat exactly across a
// category of probability 0 (a running maximum over the categories with
// p > 0): a rounded sum that grew there would give it a sliver of the range.
Value inverse_cdf(Builder& b, Bits& bits, Value p, int64_t n) {
  E acc = p.dtype();
  int64_t rows = p.shape()[0], c = p.shape()[1];
  Value sums = scan_rows(b, p, 0, [&](Value x, Value y) { return b.add(x, y); });
  Value positive = b.compare(p, splat(b, 0, p), Compare::GT);
  sums = scan_rows(b, b.select(positive, sums, splat(b, 0, sums)), 0,
                   [&](Value x, Value y) { return b.max(x, y); });
  Value total = b.slice(sums, {0, c - 1}, {rows, c}, {1, 1});
  Value u = bits.uniform(acc, digits(acc), {rows, n});
  Value v = b.mul(b.sub(splat(b, 1, u), u), b.broadcast_in_dim(b.reshape(total, {rows}), {rows, n}, {0}));
  Shape s{rows, n};
  Value base = b.mul(b.iota(TensorType{E::I64, s}, 0), b.full(double(c), E::I64, s));
  Value lo = b.zeros(E::I64, s), hi = b.full(double(c), E::I64, s);
  Value flat = b.reshape(sums, {rows * c});
  Builder::GatherDims d;
  d.collapsed_slice_dims = {0};
  d.start_index_map = {0};
  d.index_vector_dim = 1;
  for (int64_t left = c; left > 0; left /= 2) {
    Value mid = b.shift_right_logical(b.add(lo, hi), b.full(1, E::I64, s));
    Value at = b.min(mid, b.full(double(c - 1), E::I64, s));
    Value sum = b.reshape(b.gather(flat, b.reshape(b.add(base, at), {rows * n, 1}), d, {1}, {rows * n}), s);
    Value open = b.compare(lo, hi, Compare::LT);
    Value right = b.and_(open, b.compare(sum, v, Compare::LT));
    lo = b.select(right, b.add(mid, b.full(1, E::I64, s)), lo);
    hi = b.select(b.and_(open, b.not_(right)), mid, hi);
  }
  return b.min(lo, b.full(double(c - 1), E::I64, s));
}

// multinomial(self, num_samples, replacement, *, generator): int64 category
// indices, (rows, n) or (n). The argument checks are the CPU's; the checks of
// the values (negative, inf, NaN, all-zero rows) need them on the host and
// are made by aten/multinomial.cpp before this runs.
Values lower_multinomial(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value self = self_of(args);
  int64_t n = args.at(1).as_int();
  bool replacement = args.at(2).as_bool();
  TPU_CHECK(self.rank() == 1 || self.rank() == 2, ErrorKind::Runtime, "prob_dist must be 1 or 2 dim");
  TPU_CHECK(hlo::is_float(self.dtype()), ErrorKind::Runtime,
            "multinomial only supports floating-point dtypes for input, got: ", scalar_type_name(self.dtype()));
  TPU_CHECK(n > 0, ErrorKind::Runtime, "cannot sample n_sample <= 0 samples");
  int64_t c = self.shape().back();
  TPU_CHECK(replacement || n <= c, ErrorKind::Runtime,
            "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  TPU_CHECK(c <= (int64_t{1} << 24), ErrorKind::Runtime, "number of categories cannot exceed 2^24");
  int64_t rows = self.rank() == 2 ? self.shape()[0] : 1;
  Shape out = self.rank() == 2 ? Shape{rows, n} : Shape{n};
  if (rows == 0) return {b.zeros(E::I64, out)};
  TPU_CHECK(c > 0, ErrorKind::Runtime, "invalid multinomial distribution (sum of probabilities <= 0)");
  Value p = b.reshape(cast(b, self, acc_type(self.dtype())), {rows, c});
  Bits bits(ctx, args.at(3));
  Value idx = !replacement || n == 1 ? race(b, bits, p, n) : inverse_cdf(b, bits, p, n);
  return {b.reshape(idx, out)};
}

}  // namespace

// Sorted by op name.
TPU_LOWERING("aten::_sample_dirichlet", lower_sample_dirichlet);
TPU_LOWERING("aten::_standard_gamma", lower_standard_gamma);
TPU_LOWERING("aten::bernoulli", lower_bernoulli);
TPU_LOWERING("aten::bernoulli.Tensor", lower_bernoulli_tensor);
TPU_LOWERING("aten::bernoulli.p", lower_bernoulli_p);
TPU_LOWERING("aten::cauchy", lower_cauchy);
TPU_LOWERING("aten::exponential", lower_exponential);
TPU_LOWERING("aten::geometric", lower_geometric);
TPU_LOWERING("aten::log_normal", lower_log_normal);
TPU_LOWERING("aten::multinomial", lower_multinomial);
TPU_LOWERING("aten::native_dropout", lower_native_dropout, kImplicitGenerator);
TPU_LOWERING("aten::native_dropout_backward", lower_native_dropout_backward);
TPU_LOWERING("aten::normal_functional", lower_normal);
TPU_LOWERING("aten::random", lower_random);
TPU_LOWERING("aten::random.from", lower_random_from);
TPU_LOWERING("aten::random.to", lower_random_to);
TPU_LOWERING("aten::randperm.generator", lower_randperm);
TPU_LOWERING("aten::rrelu_with_noise", lower_rrelu_with_noise, kStaticNumbers);
TPU_LOWERING("aten::rrelu_with_noise_functional", lower_rrelu_with_noise, kStaticNumbers);
TPU_LOWERING("aten::uniform", lower_uniform);

}  // namespace torch_tpu::lowering
