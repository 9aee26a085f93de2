// Activation functions and the backward ops autograd calls for them. Like
// PyTorch's kernels, half-precision inputs compute in f32 and round once.
#include <cmath>

#include "lowering/common.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

using hlo::Builder;
using hlo::Compare;
using E = ElementType;
using Values = std::vector<Value>;

// A Number argument as a value shaped like `like`.
Value num(Context& ctx, const Arg& a, const Value& like) {
  return broadcast_to(ctx.b, ctx.number(a, like.dtype()), like.shape());
}

Value cmp(Builder& b, Value x, double v, Compare d) { return b.compare(x, splat(b, v, x), d); }

// The op-math value of a float tensor argument; `kernel` names PyTorch's
// kernel in the error for other types.
Value float_input(Context& ctx, const Arg& a, const char* kernel) {
  Value x = a.as_tensor();
  check_dtype(hlo::is_float(x.dtype()), kernel, x.dtype());
  return cast(ctx.b, x, opmath(x.dtype()));
}

// (grad, x) of a backward op, both in op-math precision and broadcast
// together; the result type is theirs promoted.
struct GradInput {
  Value grad, x;
  E type;
};
GradInput grad_input(Context& ctx, const Arg& grad, const Arg& x) {
  E t = result_type(ctx, {&grad, &x});
  Value g = cast(ctx.b, grad.as_tensor(), opmath(t));
  Value v = cast(ctx.b, x.as_tensor(), opmath(t));
  Shape shape = broadcast_shapes(g.shape(), v.shape());
  return {broadcast_to(ctx.b, g, shape), broadcast_to(ctx.b, v, shape), t};
}

Values done(Builder& b, Value v, E t) { return {cast(b, v, t)}; }

// ---- relu family

Values lower_relu(Context& ctx, const Args& args) {
  Value x = args.at(0).as_tensor();
  TPU_CHECK(x.dtype() != E::Bool, ErrorKind::Runtime, "Boolean inputs not supported for relu");
  // NaN stays NaN, as in PyTorch's relu.
  return {nan_max(ctx.b, x, splat(ctx.b, 0, x))};
}

Values lower_leaky_relu(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value x = float_input(ctx, args.at(0), "leaky_relu_cpu");
  Value r = b.select(cmp(b, x, 0, Compare::GT), x, b.mul(x, num(ctx, args.at(1), x)));
  return done(b, r, args[0].tensor.dtype());
}

Values lower_leaky_relu_backward(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  auto [g, x, t] = grad_input(ctx, args.at(0), args.at(1));
  Value r = b.select(cmp(b, x, 0, Compare::GT), g, b.mul(g, num(ctx, args.at(2), g)));
  return done(b, r, t);
}

Values lower_threshold(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value x = args.at(0).as_tensor();
  // PyTorch compares and fills in the input's own type.
  Value th = num(ctx, args.at(1), x);
  return {b.select(b.compare(x, th, Compare::LE), num(ctx, args.at(2), x), x)};
}

Values lower_threshold_backward(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  E t = result_type(ctx, {&args.at(0), &args.at(1)});
  Value g = cast(b, args.at(0).as_tensor(), t), x = cast(b, args.at(1).as_tensor(), t);
  Shape shape = broadcast_shapes(g.shape(), x.shape());
  g = broadcast_to(b, g, shape);
  x = broadcast_to(b, x, shape);
  return {b.select(b.compare(x, num(ctx, args.at(2), x), Compare::LE), splat(b, 0, g), g)};
}

Values lower_hardtanh(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value x = args.at(0).as_tensor();
  TPU_CHECK(x.dtype() != E::Bool, ErrorKind::Runtime, "Bool inputs not supported for hardtanh");
  // clamp in the promoted type, then back to the input's type, like
  // PyTorch's hardtanh writing clamp's result into a tensor like the input.
  E t = result_type(ctx, {&args[0], &args.at(1), &args.at(2)});
  Value v = cast(b, x, t);
  Value r = b.min(b.max(v, num(ctx, args[1], v)), num(ctx, args[2], v));
  return done(b, r, x.dtype());
}

Values lower_hardtanh_backward(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  auto [g, x, t] = grad_input(ctx, args.at(0), args.at(1));
  // NaN inputs get a zero gradient, as in PyTorch's vectorized kernel.
  Value inside = b.and_(b.compare(x, num(ctx, args.at(2), x), Compare::GT),
                        b.compare(x, num(ctx, args.at(3), x), Compare::LT));
  return done(b, b.select(inside, g, splat(b, 0, g)), t);
}

// ---- gelu

constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi)
constexpr double kGeluCubic = 0.044715;

bool gelu_tanh(const Arg& approximate) {
  const std::string& s = approximate.s;
  TPU_CHECK(approximate.kind == Arg::Kind::String && (s == "none" || s == "tanh"),
            ErrorKind::Runtime, "approximate argument must be either none or tanh.");
  return s == "tanh";
}

// The tanh approximation 0.5 x (1 + tanh u), u = sqrt(2/pi) (x + 0.044715 x^3),
// is computed as x sigmoid(2u): XLA's tanh rounds to +-1 from |u| ~ 7.9 on,
// which would zero the gradient's 1 - tanh^2 u, while sigmoid keeps its
// tail (and 1 - tanh^2 u = 4 sigmoid(2u) sigmoid(-2u)).
Value gelu_2u(Builder& b, Value x) {
  Value cube = b.mul(b.mul(x, x), x);
  return b.mul(splat(b, 2 * kSqrt2OverPi, x), b.add(x, b.mul(splat(b, kGeluCubic, x), cube)));
}

// Phi(x) = (1 + erf(x / sqrt 2)) / 2, as PyTorch's CPU kernels compute it:
// one erf, no exp. (erfc(-x / sqrt 2) / 2 keeps the relative accuracy of the
// far negative tail, where the sum cancels, but its exps made GELU's
// backward the costliest kernel of a fused training step; the CPU reference
// cancels the same way.)
Value normal_cdf(Builder& b, Value x) {
  Value e = erf(b, b.mul(x, splat(b, M_SQRT1_2, x)));
  return b.mul(b.add(splat(b, 1, x), e), splat(b, 0.5, x));
}

// Phi(x) + v for an f32 x, as one fraction over erf's denominator Q:
// (Q (1/2 + v) + num / 2) / Q, where erf(x / sqrt 2) = num / Q. XLA:CPU
// copies cheap ops into each consumer fusion but never an expensive one (a
// division, an exp): where GELU's backward fed two fusions (the weight
// gradient's product and a bias gradient's sum over blocks of rows), erf's
// division and the exp inside became passes of their own over the
// activations, then the rest was computed twice. With the division last, the
// derivative is one pass, and its consumers read it.
Value normal_cdf_plus(Builder& b, Value x, Value v) {
  ErfFraction erf = erf_fraction(b, b.mul(x, splat(b, M_SQRT1_2, x)));
  Value half = splat(b, 0.5, x);
  return b.div(b.add(b.mul(erf.den, b.add(half, v)), b.mul(erf.num, half)), erf.den);
}

Values lower_gelu(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  bool approx = gelu_tanh(args.at(1));
  Value x = float_input(ctx, args.at(0), "GeluKernelImpl");
  Value r = approx ? b.mul(x, b.logistic(gelu_2u(b, x))) : b.mul(x, normal_cdf(b, x));
  return done(b, r, args[0].tensor.dtype());
}

Values lower_gelu_backward(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  bool approx = gelu_tanh(args.at(2));
  auto [g, x, t] = grad_input(ctx, args.at(0), args.at(1));
  check_dtype(hlo::is_float(t), "GeluBackwardKernelImpl", t);
  Value d;
  if (approx) {
    // d/dx [x s(2u)] = s + x * 2 s(2u) s(-2u) * du/dx
    Value two_u = gelu_2u(b, x);
    Value s = b.logistic(two_u), s_neg = b.logistic(b.neg(two_u));
    Value x2 = b.mul(x, x);
    Value du = b.mul(splat(b, kSqrt2OverPi, x), b.add(splat(b, 1, x), b.mul(splat(b, 3 * kGeluCubic, x), x2)));
    Value ds = b.mul(b.mul(b.mul(s, s_neg), splat(b, 2, x)), du);
    d = b.add(s, b.mul(x, ds));
  } else {
    // Phi(x) + x phi(x)
    Value pdf = b.mul(b.exp(b.mul(b.mul(x, x), splat(b, -0.5, x))), splat(b, 0.5 * M_2_SQRTPI * M_SQRT1_2, x));
    d = x.dtype() == E::F32 ? normal_cdf_plus(b, x, b.mul(x, pdf)) : b.add(normal_cdf(b, x), b.mul(x, pdf));
  }
  return done(b, b.mul(g, d), t);
}

// ---- sigmoid/tanh family

Values lower_silu(Context& ctx, const Args& args) {
  Value x = args.at(0).as_tensor();
  // The CPU's kernel takes complex inputs too: z sigmoid(z).
  if (!hlo::is_complex(x.dtype())) x = float_input(ctx, args.at(0), "silu_cpu");
  return done(ctx.b, ctx.b.mul(x, ctx.b.logistic(x)), args[0].tensor.dtype());
}

Values lower_silu_backward(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  auto [g, x, t] = grad_input(ctx, args.at(0), args.at(1));
  Value s = b.logistic(x);
  Value one = splat(b, 1, x);
  // s (1 + x (1 - s))
  Value d = b.mul(s, b.add(one, b.mul(x, b.sub(one, s))));
  return done(b, b.mul(g, d), t);
}

// Complex gradients take the conjugate of the derivative (PyTorch's
// convention: grad * conj(f'(z))).
Value conj_if_complex(Builder& b, Value v) {
  if (!hlo::is_complex(v.dtype())) return v;
  return b.complex(b.real(v), b.neg(b.imag(v)));
}

Values lower_sigmoid_backward(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  auto [g, y, t] = grad_input(ctx, args.at(0), args.at(1));
  // PyTorch's order: (g (1 - y)) y for reals, g conj((1 - y) y) for complex.
  if (hlo::is_complex(y.dtype()))
    return done(b, b.mul(g, conj_if_complex(b, b.mul(b.sub(splat(b, 1, y), y), y))), t);
  if (t == E::F16) {
    // PyTorch's CPU kernel rounds each step to half for float16 (not for
    // bfloat16, which computes in f32 like the other types).
    auto r = [&](Value v) { return cast(b, cast(b, v, t), y.dtype()); };
    return done(b, b.mul(r(b.mul(g, r(b.sub(splat(b, 1, y), y)))), y), t);
  }
  return done(b, b.mul(b.mul(g, b.sub(splat(b, 1, y), y)), y), t);
}

Values lower_tanh_backward(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  auto [g, y, t] = grad_input(ctx, args.at(0), args.at(1));
  return done(b, b.mul(g, conj_if_complex(b, b.sub(splat(b, 1, y), b.mul(y, y)))), t);
}

// log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)). The second output is the
// "buffer" PyTorch's CPU kernel saves (exp(-|x|)); the backward recomputes it.
Values lower_log_sigmoid_forward(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value x = float_input(ctx, args.at(0), "log_sigmoid_cpu");
  Value e = b.exp(b.neg(b.abs(x)));
  Value r = b.sub(b.min(x, splat(b, 0, x)), b.log1p(e));
  E t = args[0].tensor.dtype();
  return {cast(b, r, t), cast(b, e, t)};
}

Values lower_log_sigmoid_backward(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  auto [g, x, t] = grad_input(ctx, args.at(0), args.at(1));
  // d/dx log sigmoid(x) = 1 - sigmoid(x) = sigmoid(-x)
  return done(b, b.mul(g, b.logistic(b.neg(x))), t);
}

// ---- elu, softplus, mish

// elu(x) = scale x for x > 0, else alpha scale (exp(input_scale x) - 1)
Values lower_elu(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value x = float_input(ctx, args.at(0), "elu_cpu");
  Value alpha = num(ctx, args.at(1), x), scale = num(ctx, args.at(2), x);
  Value input_scale = num(ctx, args.at(3), x);
  Value neg = b.mul(b.expm1(b.mul(x, input_scale)), b.mul(alpha, scale));
  return done(b, b.select(cmp(b, x, 0, Compare::LE), neg, b.mul(x, scale)), args[0].tensor.dtype());
}

// elu_backward(grad, alpha, scale, input_scale, is_result, self_or_result)
Values lower_elu_backward(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  auto [g, v, t] = grad_input(ctx, args.at(0), args.at(5));
  Value alpha = num(ctx, args.at(1), v), scale = num(ctx, args.at(2), v);
  Value input_scale = num(ctx, args.at(3), v);
  Value neg_coef = b.mul(alpha, scale);
  Value neg;
  if (args.at(4).as_bool()) {
    // From the output y = neg_coef (e - 1): dy/dx = input_scale (y + neg_coef).
    neg = b.mul(b.mul(g, input_scale), b.add(v, neg_coef));
  } else {
    neg = b.mul(b.mul(b.mul(g, input_scale), neg_coef), b.exp(b.mul(v, input_scale)));
  }
  // NaN takes the positive branch, as in PyTorch.
  return done(b, b.select(cmp(b, v, 0, Compare::LE), neg, b.mul(g, scale)), t);
}

// softplus(x) = log1p(exp(beta x)) / beta, or x where beta x > threshold.
Values lower_softplus(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value x = float_input(ctx, args.at(0), "softplus_cpu");
  Value beta = num(ctx, args.at(1), x);
  Value bx = b.mul(x, beta);
  Value soft = b.div(b.log1p(b.exp(bx)), beta);
  Value linear = b.compare(bx, num(ctx, args.at(2), x), Compare::GT);
  return done(b, b.select(linear, x, soft), args[0].tensor.dtype());
}

Values lower_softplus_backward(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  auto [g, x, t] = grad_input(ctx, args.at(0), args.at(1));
  Value bx = b.mul(x, num(ctx, args.at(2), x));
  Value linear = b.compare(bx, num(ctx, args.at(3), x), Compare::GT);
  return done(b, b.select(linear, g, b.mul(g, b.logistic(bx))), t);
}

// mish(x) = x tanh(log1p(exp(x))); an overflowing exp still gives x.
Values lower_mish(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value x = float_input(ctx, args.at(0), "mish_cpu");
  return done(b, b.mul(x, b.tanh(b.log1p(b.exp(x)))), args[0].tensor.dtype());
}

// d/dx mish = tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2), sp = softplus(x),
// in op-math precision (PyTorch's CPU kernel; its composite would round
// every step in half precision).
Values lower_mish_backward(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  auto [g, x, t] = grad_input(ctx, args.at(0), args.at(1));
  check_dtype(hlo::is_float(t), "mish_backward_cpu", t);
  Value th = b.tanh(b.log1p(b.exp(x)));
  Value one = splat(b, 1, x);
  Value d = b.add(th, b.mul(b.mul(x, b.logistic(x)), b.sub(one, b.mul(th, th))));
  return done(b, b.mul(g, d), t);
}

// ---- hard sigmoid/swish

// relu6(x + 3) / 6
Value hard_gate(Builder& b, Value x) {
  Value r = b.min(b.max(b.add(x, splat(b, 3, x)), splat(b, 0, x)), splat(b, 6, x));
  return b.div(r, splat(b, 6, x));
}

Values lower_hardsigmoid(Context& ctx, const Args& args) {
  Value x = float_input(ctx, args.at(0), "hardsigmoid_cpu");
  return done(ctx.b, hard_gate(ctx.b, x), args[0].tensor.dtype());
}

Values lower_hardsigmoid_backward(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  auto [g, x, t] = grad_input(ctx, args.at(0), args.at(1));
  Value inside = b.and_(cmp(b, x, -3, Compare::GT), cmp(b, x, 3, Compare::LT));
  return done(b, b.select(inside, b.div(g, splat(b, 6, g)), splat(b, 0, g)), t);
}

Values lower_hardswish(Context& ctx, const Args& args) {
  Value x = float_input(ctx, args.at(0), "hardswish_cpu");
  return done(ctx.b, ctx.b.mul(x, hard_gate(ctx.b, x)), args[0].tensor.dtype());
}

// 0 up to -3, g (x/3 + 1/2) below 3, g from 3 on (and for NaN).
Values lower_hardswish_backward(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  auto [g, x, t] = grad_input(ctx, args.at(0), args.at(1));
  Value mid = b.mul(g, b.add(b.div(x, splat(b, 3, x)), splat(b, 0.5, x)));
  Value r = b.select(cmp(b, x, 3, Compare::LT), mid, g);
  return done(b, b.select(cmp(b, x, -3, Compare::LE), splat(b, 0, g), r), t);
}

// ---- shrink

// |x| <= lambd, false for NaN so that NaN passes through like PyTorch's.
Value within(Context& ctx, Value x, const Arg& lambd) {
  Builder& b = ctx.b;
  Value l = num(ctx, lambd, x);
  return b.and_(b.compare(x, b.neg(l), Compare::GE), b.compare(x, l, Compare::LE));
}

Values lower_hardshrink(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value x = float_input(ctx, args.at(0), "hardshrink_cpu");
  return done(b, b.select(within(ctx, x, args.at(1)), splat(b, 0, x), x), args[0].tensor.dtype());
}

// Both shrinks' gradients: zero within lambd, else the incoming gradient.
Values lower_shrink_backward(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  auto [g, x, t] = grad_input(ctx, args.at(0), args.at(1));
  return done(b, b.select(within(ctx, x, args.at(2)), splat(b, 0, g), g), t);
}

// x - lambd above lambd, x + lambd below -lambd, else 0 (NaN stays NaN).
Values lower_softshrink(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value x = float_input(ctx, args.at(0), "softshrink_cpu");
  Value l = num(ctx, args.at(1), x);
  Value r = b.select(b.compare(x, l, Compare::GT), b.sub(x, l), b.mul(x, splat(b, 0, x)));
  r = b.select(b.compare(x, b.neg(l), Compare::LT), b.add(x, l), r);
  return done(b, r, args[0].tensor.dtype());
}

}  // namespace

// Sorted by op name.
TPU_LOWERING("aten::elu", lower_elu);
TPU_LOWERING("aten::elu_backward", lower_elu_backward);
TPU_LOWERING("aten::gelu", lower_gelu);
TPU_LOWERING("aten::gelu_backward", lower_gelu_backward);
TPU_LOWERING("aten::hardshrink", lower_hardshrink);
TPU_LOWERING("aten::hardshrink_backward", lower_shrink_backward);
TPU_LOWERING("aten::hardsigmoid", lower_hardsigmoid);
TPU_LOWERING("aten::hardsigmoid_backward", lower_hardsigmoid_backward);
TPU_LOWERING("aten::hardswish", lower_hardswish);
TPU_LOWERING("aten::hardswish_backward", lower_hardswish_backward);
TPU_LOWERING("aten::hardtanh", lower_hardtanh);
TPU_LOWERING("aten::hardtanh_backward", lower_hardtanh_backward);
TPU_LOWERING("aten::leaky_relu", lower_leaky_relu);
TPU_LOWERING("aten::leaky_relu_backward", lower_leaky_relu_backward);
TPU_LOWERING("aten::log_sigmoid_backward", lower_log_sigmoid_backward);
TPU_LOWERING("aten::log_sigmoid_forward", lower_log_sigmoid_forward);
TPU_LOWERING("aten::mish", lower_mish);
TPU_LOWERING("aten::mish_backward", lower_mish_backward);
TPU_LOWERING("aten::relu", lower_relu);
TPU_LOWERING("aten::sigmoid_backward", lower_sigmoid_backward);
TPU_LOWERING("aten::silu", lower_silu);
TPU_LOWERING("aten::silu_backward", lower_silu_backward);
TPU_LOWERING("aten::softplus", lower_softplus);
TPU_LOWERING("aten::softplus_backward", lower_softplus_backward);
TPU_LOWERING("aten::softshrink", lower_softshrink);
TPU_LOWERING("aten::softshrink_backward", lower_shrink_backward);
TPU_LOWERING("aten::tanh_backward", lower_tanh_backward);
TPU_LOWERING("aten::threshold", lower_threshold);
TPU_LOWERING("aten::threshold_backward", lower_threshold_backward);

}  // namespace torch_tpu::lowering
