// What the elementwise lowering files share: elementwise.cpp (math
// functions of one tensor: erf, trig and hyperbolic, rounding, sign,
// predicates), arithmetic.cpp (add .. xlogy, pow, clamp, where) and
// compare_logical_bitwise.cpp. The helpers more than one of them uses.
#pragma once

#include <initializer_list>

#include "lowering/common.h"

namespace torch_tpu::lowering::elementwise {

using hlo::Builder;
using hlo::Compare;
using E = ElementType;
using Values = std::vector<Value>;

// How PyTorch prints a dtype in messages that stream the TypeMeta.
inline const char* type_meta_name(E t) {
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

inline Value is_zero(Builder& b, Value v) { return b.compare(v, splat(b, 0, v), Compare::EQ); }
inline Value is_negative(Builder& b, Value v) { return b.compare(v, splat(b, 0, v), Compare::LT); }

// Tensor/Number args converted to t and broadcast to their common shape.
inline Values promoted(Context& ctx, std::initializer_list<const Arg*> args, E t) {
  Values vs;
  Shape shape;
  for (const Arg* a : args) {
    vs.push_back(operand(ctx, *a, t));
    shape = broadcast_shapes(shape, vs.back().shape());
  }
  for (Value& v : vs) v = broadcast_to(ctx.b, v, shape);
  return vs;
}

inline const Value& self_of(const Args& args) { return args.at(0).as_tensor(); }

inline bool is_int_or_bool(E t) { return hlo::is_integral(t) || t == E::Bool; }

// 1 / x.
inline Value reciprocal_(Builder& b, Value x) { return b.div(splat(b, 1, x), x); }

// Rounds toward zero.
inline Value trunc_(Builder& b, Value x) {
  return b.select(is_negative(b, x), b.ceil(x), b.floor(x));
}

}  // namespace torch_tpu::lowering::elementwise
