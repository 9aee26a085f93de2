// Elementwise arithmetic of two or more operands: add, sub, rsub, mul,
// division in its rounding modes, remainder and fmod, pow, maximum and
// minimum, clamp, lerp, addcmul and addcdiv, where, atan2, hypot, copysign,
// xlogy, logaddexp. Types follow PyTorch's promotion (result_type); integer
// and NaN edge cases follow PyTorch's CPU kernels, which are the reference.
#include <cmath>
#include <string>

#include "lowering/common.h"
#include "lowering/elementwise_internal.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

using namespace elementwise;

namespace {

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

}  // namespace

// Sorted by op name.
TPU_LOWERING("aten::add.Scalar", lower_add);
TPU_LOWERING("aten::add.Tensor", lower_add);
TPU_LOWERING("aten::addcdiv", lower_addcdiv);
TPU_LOWERING("aten::addcmul", lower_addcmul);
TPU_LOWERING("aten::atan2", lower_atan2);
TPU_LOWERING("aten::clamp", lower_clamp);
TPU_LOWERING("aten::clamp.Tensor", lower_clamp);
TPU_LOWERING("aten::clamp_max", lower_clamp_max);
TPU_LOWERING("aten::clamp_max.Tensor", lower_clamp_max);
TPU_LOWERING("aten::clamp_min", lower_clamp_min);
TPU_LOWERING("aten::clamp_min.Tensor", lower_clamp_min);
TPU_LOWERING("aten::copysign.Tensor", lower_copysign);
TPU_LOWERING("aten::div.Scalar", lower_div);
TPU_LOWERING("aten::div.Scalar_mode", lower_div_mode);
TPU_LOWERING("aten::div.Tensor", lower_div);
TPU_LOWERING("aten::div.Tensor_mode", lower_div_mode);
TPU_LOWERING("aten::floor_divide", lower_floor_divide);
TPU_LOWERING("aten::floor_divide.Scalar", lower_floor_divide);
TPU_LOWERING("aten::fmod.Scalar", lower_fmod);
TPU_LOWERING("aten::fmod.Tensor", lower_fmod);
TPU_LOWERING("aten::hypot", lower_hypot);
TPU_LOWERING("aten::lerp.Scalar", lower_lerp);
TPU_LOWERING("aten::lerp.Tensor", lower_lerp);
TPU_LOWERING("aten::logaddexp", lower_logaddexp);
TPU_LOWERING("aten::maximum", lower_maximum);
TPU_LOWERING("aten::minimum", lower_minimum);
TPU_LOWERING("aten::mul.Scalar", lower_mul);
TPU_LOWERING("aten::mul.Tensor", lower_mul);
TPU_LOWERING("aten::pow.Scalar", lower_pow);
TPU_LOWERING("aten::pow.Tensor_Scalar", lower_pow_scalar, /*static_numbers=*/true);
TPU_LOWERING("aten::pow.Tensor_Tensor", lower_pow);
TPU_LOWERING("aten::remainder.Scalar", lower_remainder);
TPU_LOWERING("aten::remainder.Scalar_Tensor", lower_remainder);
TPU_LOWERING("aten::remainder.Tensor", lower_remainder);
TPU_LOWERING("aten::rsub.Scalar", lower_rsub);
TPU_LOWERING("aten::rsub.Tensor", lower_rsub);
TPU_LOWERING("aten::sub.Scalar", lower_sub);
TPU_LOWERING("aten::sub.Tensor", lower_sub);
TPU_LOWERING("aten::where.self", lower_where);
TPU_LOWERING("aten::xlogy.Tensor", lower_xlogy);

}  // namespace torch_tpu::lowering
