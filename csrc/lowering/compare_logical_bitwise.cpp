// Comparisons (eq .. ne), logical and/or/xor/not, bitwise ops and shifts.
// Comparisons promote their operands as PyTorch does and return bool;
// bitwise ops take integers and bools, shifts integers, and unsupported
// types raise PyTorch's CPU kernel's NotImplementedError.
#include <cmath>
#include <string>

#include "lowering/common.h"
#include "lowering/elementwise_internal.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

using namespace elementwise;

namespace {

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
TPU_LOWERING("aten::bitwise_and.Scalar", lower_bitwise<&Builder::and_, kBitwiseAnd>);
TPU_LOWERING("aten::bitwise_and.Tensor", lower_bitwise<&Builder::and_, kBitwiseAnd>);
TPU_LOWERING("aten::bitwise_left_shift.Tensor", lower_shift<true>);
TPU_LOWERING("aten::bitwise_not", lower_bitwise_not);
TPU_LOWERING("aten::bitwise_or.Scalar", lower_bitwise<&Builder::or_, kBitwiseOr>);
TPU_LOWERING("aten::bitwise_or.Tensor", lower_bitwise<&Builder::or_, kBitwiseOr>);
TPU_LOWERING("aten::bitwise_right_shift.Tensor", lower_shift<false>);
TPU_LOWERING("aten::bitwise_xor.Scalar", lower_bitwise<&Builder::xor_, kBitwiseXor>);
TPU_LOWERING("aten::bitwise_xor.Tensor", lower_bitwise<&Builder::xor_, kBitwiseXor>);
TPU_LOWERING("aten::eq.Scalar", lower_compare<Compare::EQ>);
TPU_LOWERING("aten::eq.Tensor", lower_compare<Compare::EQ>);
TPU_LOWERING("aten::ge.Scalar", lower_compare<Compare::GE>);
TPU_LOWERING("aten::ge.Tensor", lower_compare<Compare::GE>);
TPU_LOWERING("aten::gt.Scalar", lower_compare<Compare::GT>);
TPU_LOWERING("aten::gt.Tensor", lower_compare<Compare::GT>);
TPU_LOWERING("aten::le.Scalar", lower_compare<Compare::LE>);
TPU_LOWERING("aten::le.Tensor", lower_compare<Compare::LE>);
TPU_LOWERING("aten::logical_and", lower_logical<&Builder::and_>);
TPU_LOWERING("aten::logical_not", lower_logical_not);
TPU_LOWERING("aten::logical_or", lower_logical<&Builder::or_>);
TPU_LOWERING("aten::logical_xor", lower_logical<&Builder::xor_>);
TPU_LOWERING("aten::lt.Scalar", lower_compare<Compare::LT>);
TPU_LOWERING("aten::lt.Tensor", lower_compare<Compare::LT>);
TPU_LOWERING("aten::ne.Scalar", lower_compare<Compare::NE>);
TPU_LOWERING("aten::ne.Tensor", lower_compare<Compare::NE>);

}  // namespace torch_tpu::lowering
