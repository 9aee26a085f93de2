// The Builder's elementwise ops: unary and binary arithmetic, bitwise and
// shift ops, comparisons, select and clamp, complex parts, and element type
// conversions. Each checks that its operands share a type and that the
// element type is one the StableHLO op accepts, naming the op when not.
#include "hlo/builder_internal.h"
#include "hlo/float8.h"

namespace torch_tpu::hlo {

using namespace internal;

namespace {

void same_type(const Value& a, const Value& b, const char* op) {
  need(a, op);
  need(b, op);
  if (a.type != b.type) bad(op, "operand types differ: " + a.type.str() + " vs " + b.type.str());
}

std::string compare_type(ElementType t) {
  if (is_inexact(t)) return "FLOAT";
  return is_signed_int(t) ? "SIGNED" : "UNSIGNED";
}

const char* direction(Compare c) {
  switch (c) {
    case Compare::EQ: return "EQ";
    case Compare::NE: return "NE";
    case Compare::LT: return "LT";
    case Compare::LE: return "LE";
    case Compare::GT: return "GT";
    case Compare::GE: return "GE";
  }
  return "EQ";
}

}  // namespace

// ---- elementwise

Value Builder::unary(const char* op_name, Value a) {
  need(a, op_name);
  return op(op_name, {a}, a.type);
}

Value Builder::binary(const char* op_name, Value a, Value b) {
  same_type(a, b, op_name);
  return op(op_name, {a, b}, a.type);
}

#define TPU_BINARY(fn, opname, pred, what)                   \
  Value Builder::fn(Value a, Value b) {                      \
    same_type(a, b, opname);                                 \
    need_dtype(a, pred(a.dtype()), opname, what);            \
    return binary("stablehlo." opname, a, b);                \
  }
TPU_BINARY(add, "add", [](ElementType) { return true; }, "")
TPU_BINARY(sub, "subtract", is_numeric, "numbers")
TPU_BINARY(mul, "multiply", [](ElementType) { return true; }, "")
TPU_BINARY(div, "divide", is_numeric, "numbers")
TPU_BINARY(rem, "remainder", is_real_number, "integers or floats")
TPU_BINARY(pow, "power", is_numeric, "numbers")
TPU_BINARY(max, "maximum", !is_complex, "bools, integers or floats")
TPU_BINARY(min, "minimum", !is_complex, "bools, integers or floats")
TPU_BINARY(and_, "and", is_int_or_bool, "bools or integers")
TPU_BINARY(or_, "or", is_int_or_bool, "bools or integers")
TPU_BINARY(xor_, "xor", is_int_or_bool, "bools or integers")
TPU_BINARY(shift_left, "shift_left", is_integral, "integers")
TPU_BINARY(shift_right_arithmetic, "shift_right_arithmetic", is_integral, "integers")
TPU_BINARY(shift_right_logical, "shift_right_logical", is_integral, "integers")
TPU_BINARY(atan2, "atan2", is_inexact, "floats or complex")
#undef TPU_BINARY

#define TPU_UNARY(fn, opname, pred, what)             \
  Value Builder::fn(Value a) {                        \
    need(a, opname);                                  \
    need_dtype(a, pred(a.dtype()), opname, what);     \
    return unary("stablehlo." opname, a);             \
  }
TPU_UNARY(neg, "negate", is_numeric, "numbers")
TPU_UNARY(exp, "exponential", is_inexact, "floats or complex")
TPU_UNARY(expm1, "exponential_minus_one", is_inexact, "floats or complex")
TPU_UNARY(log, "log", is_inexact, "floats or complex")
TPU_UNARY(log1p, "log_plus_one", is_inexact, "floats or complex")
TPU_UNARY(sqrt, "sqrt", is_inexact, "floats or complex")
TPU_UNARY(rsqrt, "rsqrt", is_inexact, "floats or complex")
TPU_UNARY(cbrt, "cbrt", is_inexact, "floats or complex")
TPU_UNARY(tanh, "tanh", is_inexact, "floats or complex")
TPU_UNARY(logistic, "logistic", is_inexact, "floats or complex")
TPU_UNARY(sine, "sine", is_inexact, "floats or complex")
TPU_UNARY(cosine, "cosine", is_inexact, "floats or complex")
TPU_UNARY(tan, "tan", is_inexact, "floats or complex")
TPU_UNARY(floor, "floor", is_float, "floats")
TPU_UNARY(ceil, "ceil", is_float, "floats")
TPU_UNARY(round_nearest_even, "round_nearest_even", is_float, "floats")
TPU_UNARY(round_nearest_afz, "round_nearest_afz", is_float, "floats")
TPU_UNARY(sign, "sign", is_signed_number, "signed numbers")
TPU_UNARY(not_, "not", is_int_or_bool, "bools or integers")
TPU_UNARY(popcnt, "popcnt", is_integral, "integers")
TPU_UNARY(clz, "count_leading_zeros", is_integral, "integers")
#undef TPU_UNARY

Value Builder::abs(Value a) {
  need(a, "abs");
  need_dtype(a, is_signed_number(a.dtype()), "abs", "signed numbers");
  TensorType t = a.type;
  if (is_complex(t.dtype)) t.dtype = complex_part(t.dtype);  // |z| is real
  return op("stablehlo.abs", {a}, t);
}

Value Builder::is_finite(Value a) {
  need(a, "is_finite");
  need_dtype(a, is_float(a.dtype()), "is_finite", "floats");
  return op("stablehlo.is_finite", {a}, TensorType{ElementType::Bool, a.shape()});
}

namespace {
// real/imag of a complex value is its part type; of a float, the float type.
Value part(Builder& b, const char* o, Value a) {
  need(a, o);
  need_dtype(a, is_inexact(a.dtype()), o, "floats or complex");
  TensorType t = a.type;
  if (is_complex(t.dtype)) t.dtype = complex_part(t.dtype);
  return b.op(std::string("stablehlo.") + o, {a}, t);
}
}  // namespace

Value Builder::real(Value a) { return part(*this, "real", a); }
Value Builder::imag(Value a) { return part(*this, "imag", a); }

Value Builder::complex(Value re, Value im) {
  same_type(re, im, "complex");
  ElementType d = re.dtype();
  need_dtype(re, d == ElementType::F32 || d == ElementType::F64, "complex", "f32 or f64 parts");
  TensorType t{d == ElementType::F32 ? ElementType::C64 : ElementType::C128, re.shape()};
  return op("stablehlo.complex", {re, im}, t);
}

Value Builder::compare(Value a, Value b, Compare dir) {
  same_type(a, b, "compare");
  if (is_complex(a.dtype()) && dir != Compare::EQ && dir != Compare::NE)
    bad("compare", "complex numbers only support EQ and NE");
  std::string attrs = std::string("comparison_direction = #stablehlo<comparison_direction ") +
                      direction(dir) + ">, compare_type = #stablehlo<comparison_type " +
                      compare_type(a.dtype()) + ">";
  return op("stablehlo.compare", {a, b}, TensorType{ElementType::Bool, a.shape()}, attrs);
}

Value Builder::select(Value pred, Value on_true, Value on_false) {
  same_type(on_true, on_false, "select");
  need(pred, "select");
  if (pred.dtype() != ElementType::Bool) bad("select", "predicate must be i1, got " + pred.type.str());
  if (pred.rank() != 0 && pred.shape() != on_true.shape())
    bad("select", "predicate shape " + shape_str(pred.shape()) + " differs from " +
                      shape_str(on_true.shape()));
  return op("stablehlo.select", {pred, on_true, on_false}, on_true.type);
}

Value Builder::clamp(Value lo, Value x, Value hi) {
  for (const Value* v : {&lo, &x, &hi}) {
    need(*v, "clamp");
    if (v->dtype() != x.dtype()) bad("clamp", "element types differ: " + v->type.str());
  }
  for (const Value* v : {&lo, &hi})
    if (v->rank() != 0 && v->shape() != x.shape())
      bad("clamp", "bound " + v->type.str() + " must be rank 0 or match " + x.type.str());
  need_dtype(x, !is_complex(x.dtype()), "clamp", "ordered numbers");
  return op("stablehlo.clamp", {lo, x, hi}, x.type);
}

Value Builder::convert(Value a, ElementType to) {
  need(a, "convert");
  if (is_complex(a.dtype()) && !is_complex(to))
    bad("convert", "complex to real is ambiguous; take real() first");
  if (to == ElementType::F8E4M3FN && a.dtype() != to) {
    // PyTorch saturates into e4m3fn's finite range, where StableHLO's
    // convert makes NaN of what lies past it (hlo/float8.h). Integers pass
    // through f32 first: past 2^24 they lie past 448 anyway.
    if (!is_float(a.dtype())) a = convert(a, ElementType::F32);
    Value max = constant(kFloat8E4M3FNMax, a.dtype());
    a = clamp(neg(max), a, max);
  }
  return op("stablehlo.convert", {a}, TensorType{to, a.shape()});
}

Value Builder::bitcast_convert(Value a, const TensorType& to) {
  need(a, "bitcast_convert");
  if (a.dtype() == ElementType::Bool || to.dtype == ElementType::Bool)
    bad("bitcast_convert", "i1 has no bit layout");
  int64_t from_bytes = byte_size(a.dtype()), to_bytes = byte_size(to.dtype);
  Shape expect = a.shape();
  if (to_bytes < from_bytes) {
    expect.push_back(from_bytes / to_bytes);
  } else if (to_bytes > from_bytes) {
    if (expect.empty() || expect.back() != to_bytes / from_bytes)
      bad("bitcast_convert", "to widen " + a.type.str() + " to " + mlir_name(to.dtype) +
                                 " the last dimension must be " +
                                 std::to_string(to_bytes / from_bytes));
    expect.pop_back();
  }
  if (to.shape != expect)
    bad("bitcast_convert", "result " + to.str() + " should have shape " + shape_str(expect));
  return op("stablehlo.bitcast_convert", {a}, to);
}


}  // namespace torch_tpu::hlo
