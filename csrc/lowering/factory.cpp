// Tensor factories that need a program of their own: fill and zero (what
// zeros, ones, full and the *_like factories decompose into), arange,
// linspace, logspace and eye. Lengths and default types follow PyTorch's
// range factories.
#include <cmath>
#include <limits>

#include "lowering/common.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

Value linspace_values(hlo::Builder& b, Value lo, Value hi, int64_t steps) {
  using E = ElementType;
  using hlo::Compare;
  E c = lo.dtype();
  Shape shape{steps};
  if (steps == 1) return b.broadcast_in_dim(lo, shape, {});
  Value step = b.div(b.sub(hi, lo), b.constant(static_cast<double>(steps - 1), c));
  step = b.broadcast_in_dim(step, shape, {});
  Value idx = b.iota(hlo::TensorType{E::I64, shape}, 0);
  Value from_start = b.add(b.broadcast_in_dim(lo, shape, {}), b.mul(step, b.convert(idx, c)));
  Value back = b.convert(b.sub(b.full(static_cast<double>(steps - 1), E::I64, shape), idx), c);
  Value from_end = b.sub(b.broadcast_in_dim(hi, shape, {}), b.mul(step, back));
  Value first_half = b.compare(idx, b.full(static_cast<double>(steps / 2), E::I64, shape), Compare::LT);
  return b.select(first_half, from_start, from_end);
}

namespace {

using hlo::Builder;
using hlo::Compare;
using hlo::TensorType;
using E = ElementType;
using Values = std::vector<Value>;

bool is_int_number(const Arg& a) {
  return a.kind == Arg::Kind::Number &&
         (a.number.kind == Number::Kind::Int || a.number.kind == Number::Kind::Bool);
}

// fill.Scalar(self, value): self's shape and type.
Values lower_fill_scalar(Context& ctx, const Args& args) {
  const Value& self = args.at(0).as_tensor();
  return {broadcast_to(ctx.b, ctx.number(args.at(1), self.dtype()), self.shape())};
}

// fill.Tensor(self, value): value is a 0-dim tensor.
Values lower_fill_tensor(Context& ctx, const Args& args) {
  const Value& self = args.at(0).as_tensor();
  const Value& value = args.at(1).as_tensor();
  TPU_CHECK(value.rank() == 0, ErrorKind::Runtime,
            "fill_ only supports 0-dimension value tensor but got tensor with ", value.rank(),
            " dimensions.");
  return {broadcast_to(ctx.b, cast(ctx.b, value, self.dtype()), self.shape())};
}

// zero(self): what zero_ (and so torch.zeros) becomes.
Values lower_zero(Context& ctx, const Args& args) {
  const Value& self = args.at(0).as_tensor();
  return {ctx.b.zeros(self.dtype(), self.shape())};
}

std::optional<E> dtype_arg(const Args& args, size_t i) {
  return args.size() > i ? args[i].opt_dtype() : std::nullopt;
}

Arg int_number(int64_t v) {
  Arg a;
  a.kind = Arg::Kind::Number;
  a.number.kind = Number::Kind::Int;
  a.number.i = v;
  return a;
}

// The range [start, end) by step, or [start, end] (torch.range) when
// `inclusive`. The numbers are static: they decide the length.
Value arange(Context& ctx, const Arg& start, const Arg& end, const Arg& step,
             std::optional<E> requested, bool inclusive = false) {
  Builder& b = ctx.b;
  bool all_int = is_int_number(start) && is_int_number(end) && is_int_number(step);
  E t = requested ? *requested : all_int ? E::I64 : ctx.default_float;
  bool integral = !hlo::is_float(t);

  double s = start.number.as_double(), e = end.number.as_double(), d = step.number.as_double();
  TPU_CHECK(d != 0, ErrorKind::Runtime, "step must be nonzero");
  TPU_CHECK(std::isfinite(s) && std::isfinite(e), ErrorKind::Runtime, "unsupported range: ", s,
            " -> ", e);
  TPU_CHECK((d > 0 && e >= s) || (d < 0 && e <= s), ErrorKind::Runtime,
            "upper bound and lower bound inconsistent with step sign");
  // Integer results step from the truncated start by the truncated step.
  // PyTorch sizes int64 ranges in integer arithmetic on those truncated
  // values, and every other type in double on the given ones.
  int64_t is = all_int ? start.number.i : static_cast<int64_t>(s);
  int64_t ie = all_int ? end.number.i : static_cast<int64_t>(e);
  int64_t id = all_int ? step.number.i : static_cast<int64_t>(d);
  int64_t n;
  if (inclusive) {
    // torch.range sizes every integer type in int64 on the truncated values.
    TPU_CHECK(!integral || id != 0, ErrorKind::Runtime, "step must be nonzero");
    n = integral ? (ie - is) / id + 1 : static_cast<int64_t>((e - s) / d + 1);
  } else if (t == E::I64) {
    TPU_CHECK(id != 0, ErrorKind::Value, "step must be nonzero");
    int64_t sign = id > 0 ? 1 : -1;
    n = (ie - is + id - sign) / id;
  } else {
    double size = std::ceil((e - s) / d);
    TPU_CHECK(size >= 0 && size <= static_cast<double>(std::numeric_limits<int64_t>::max()),
              ErrorKind::Runtime, "invalid size, possible overflow?");
    n = static_cast<int64_t>(size);
  }

  Shape shape{n};
  if (integral) {
    Value i = b.iota(TensorType{E::I64, shape}, 0);
    Value v = b.add(b.mul(i, b.broadcast_in_dim(b.constant_int(id, E::I64), shape, {})),
                    b.broadcast_in_dim(b.constant_int(is, E::I64), shape, {}));
    return cast(b, v, t);
  }
  E c = opmath(t);
  Value i = b.iota(TensorType{c, shape}, 0);
  Value v = b.add(b.mul(i, b.full(d, c, shape)), b.full(s, c, shape));
  return cast(b, v, t);
}

// _efficientzerotensor(size, *, dtype, ...): autograd's zero gradients. A
// plain zero tensor serves (no ZeroTensor dispatch key on tpu).
Values lower_efficientzerotensor(Context& ctx, const Args& args) {
  E t = dtype_arg(args, 1).value_or(ctx.default_float);
  return {ctx.b.zeros(t, args.at(0).as_ints())};
}

// arange(end, *, dtype, layout, device, pin_memory)
Values lower_arange(Context& ctx, const Args& args) {
  return {arange(ctx, int_number(0), args.at(0), int_number(1), dtype_arg(args, 1))};
}

// arange.start(start, end, *, dtype, ...)
Values lower_arange_start(Context& ctx, const Args& args) {
  return {arange(ctx, args.at(0), args.at(1), int_number(1), dtype_arg(args, 2))};
}

// arange.start_step(start, end, step, *, dtype, ...)
Values lower_arange_start_step(Context& ctx, const Args& args) {
  return {arange(ctx, args.at(0), args.at(1), args.at(2), dtype_arg(args, 3))};
}

// range.step(start, end, step=1, *, dtype, ...): the default dtype unless
// given, whatever the numbers' types.
Values lower_range(Context& ctx, const Args& args) {
  return {arange(ctx, args.at(0), args.at(1), args.at(2), dtype_arg(args, 3).value_or(ctx.default_float),
                 /*inclusive=*/true)};
}

Value linspace_values(Builder& b, double start, double end, int64_t steps, E c) {
  return lowering::linspace_values(b, b.constant(start, c), b.constant(end, c), steps);
}

int64_t checked_steps(const Arg& a) {
  int64_t steps = a.as_int();
  TPU_CHECK(steps >= 0, ErrorKind::Runtime, "number of steps must be non-negative");
  return steps;
}

// Where PyTorch computes a linspace: in the type itself for floats (so half
// types round every step), in double for integers, whose ends are first
// truncated to the type.
struct LinspaceSetup {
  E t, c;
  double start, end;
};
LinspaceSetup linspace_setup(Context& ctx, const Args& args, size_t dtype_index) {
  E t = dtype_arg(args, dtype_index).value_or(ctx.default_float);
  double start = args.at(0).number.as_double(), end = args.at(1).number.as_double();
  if (hlo::is_float(t)) return {t, t, start, end};
  return {t, E::F64, std::trunc(start), std::trunc(end)};
}

// linspace(start, end, steps, *, dtype, ...)
Values lower_linspace(Context& ctx, const Args& args) {
  int64_t steps = checked_steps(args.at(2));
  LinspaceSetup s = linspace_setup(ctx, args, 3);
  return {cast(ctx.b, linspace_values(ctx.b, s.start, s.end, steps, s.c), s.t)};
}

// logspace(start, end, steps, base, *, dtype, ...) = base ** linspace.
Values lower_logspace(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  int64_t steps = checked_steps(args.at(2));
  double base = args.at(3).as_float();
  LinspaceSetup s = linspace_setup(ctx, args, 4);
  Value exps = linspace_values(b, s.start, s.end, steps, s.c);
  return {cast(b, b.pow(b.full(base, s.c, exps.shape()), exps), s.t)};
}

Value eye(Builder& b, int64_t n, int64_t m, E t) {
  TPU_CHECK(n >= 0, ErrorKind::Runtime, "n must be greater or equal to 0, got ", n);
  TPU_CHECK(m >= 0, ErrorKind::Runtime, "m must be greater or equal to 0, got ", m);
  TensorType idx{E::I64, {n, m}};
  Value diagonal = b.compare(b.iota(idx, 0), b.iota(idx, 1), Compare::EQ);
  return t == E::Bool ? diagonal : b.convert(diagonal, t);
}

// eye(n, *, dtype, ...)
Values lower_eye(Context& ctx, const Args& args) {
  int64_t n = args.at(0).as_int();
  return {eye(ctx.b, n, n, dtype_arg(args, 1).value_or(ctx.default_float))};
}

// eye.m(n, m, *, dtype, ...)
Values lower_eye_m(Context& ctx, const Args& args) {
  E t = dtype_arg(args, 2).value_or(ctx.default_float);
  return {eye(ctx.b, args.at(0).as_int(), args.at(1).as_int(), t)};
}

}  // namespace

// Sorted by op name.
TPU_LOWERING("aten::_efficientzerotensor", lower_efficientzerotensor);
TPU_LOWERING("aten::arange", lower_arange, /*static_numbers=*/true);
TPU_LOWERING("aten::arange.start", lower_arange_start, /*static_numbers=*/true);
TPU_LOWERING("aten::arange.start_step", lower_arange_start_step, /*static_numbers=*/true);
TPU_LOWERING("aten::eye", lower_eye);
TPU_LOWERING("aten::eye.m", lower_eye_m);
TPU_LOWERING("aten::fill.Scalar", lower_fill_scalar);
TPU_LOWERING("aten::fill.Tensor", lower_fill_tensor);
TPU_LOWERING("aten::linspace", lower_linspace, /*static_numbers=*/true);
TPU_LOWERING("aten::logspace", lower_logspace, /*static_numbers=*/true);
TPU_LOWERING("aten::range.step", lower_range, /*static_numbers=*/true);
TPU_LOWERING("aten::zero", lower_zero);

}  // namespace torch_tpu::lowering
