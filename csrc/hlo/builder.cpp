#include "hlo/builder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <sstream>

#include "common/error.h"

namespace torch_tpu::hlo {

namespace {

[[noreturn]] void bad(const char* op, const std::string& msg) {
  fail(ErrorKind::Value, "hlo.", op, ": ", msg);
}

std::string name(const Value& v) { return "%v" + std::to_string(v.id); }

std::string join(const std::vector<std::string>& parts, const char* sep = ", ") {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

std::string ints(const std::vector<int64_t>& v) {
  std::vector<std::string> parts;
  for (int64_t x : v) parts.push_back(std::to_string(x));
  return join(parts);
}

// DenseI64ArrayAttr: `array<i64>` when empty, the parser rejects `array<i64: >`.
std::string i64_array(const std::vector<int64_t>& v) {
  return v.empty() ? "array<i64>" : "array<i64: " + ints(v) + ">";
}

std::string list(const std::vector<int64_t>& v) { return "[" + ints(v) + "]"; }

std::string types_text(const std::vector<TensorType>& ts) {
  std::vector<std::string> parts;
  for (const auto& t : ts) parts.push_back(t.str());
  return join(parts);
}

std::vector<TensorType> types_of(const std::vector<Value>& vs) {
  std::vector<TensorType> ts;
  for (const auto& v : vs) ts.push_back(v.type);
  return ts;
}

// ---- exact literals

uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Round-to-nearest-even truncation of an f32 bit pattern to its top 16 bits.
uint16_t bf16_bits(float f) {
  uint32_t u = f32_bits(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);  // keep it quiet
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

uint16_t f16_bits(float f) {
  uint32_t u = f32_bits(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  if (std::isnan(f)) return sign | 0x7E00;
  float a = std::fabs(f);
  if (a >= 65520.0f) return sign | 0x7C00;  // rounds to inf
  if (a < 6.103515625e-05f) {
    // Subnormal: the value in units of 2^-24, rounded half to even by nearbyint.
    return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f));
  }
  uint32_t exp = ((u >> 23) & 0xFF) - 127 + 15;
  uint32_t mant = u & 0x7FFFFF;
  uint32_t half = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1FFF;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1))) ++half;  // may carry into exp: fine
  return sign | static_cast<uint16_t>(half);
}

std::string hex(uint64_t bits, int digits) {
  std::ostringstream out;
  out << "0x" << std::uppercase << std::hex;
  out.width(digits);
  out.fill('0');
  out << bits;
  return out.str();
}

std::string float_literal(double v, ElementType t) {
  switch (t) {
    case ElementType::F16: return hex(f16_bits(static_cast<float>(v)), 4);
    case ElementType::BF16: return hex(bf16_bits(static_cast<float>(v)), 4);
    case ElementType::F32: return hex(f32_bits(static_cast<float>(v)), 8);
    default: {
      uint64_t u;
      std::memcpy(&u, &v, 8);
      return hex(u, 16);
    }
  }
}

// Inclusive range of an integer type as long double so that u64 fits.
std::pair<long double, long double> int_range(ElementType t) {
  switch (t) {
    case ElementType::Bool: return {0, 1};
    case ElementType::U8: return {0, 255};
    case ElementType::U16: return {0, 65535};
    case ElementType::U32: return {0, 4294967295.0L};
    case ElementType::U64: return {0, 18446744073709551615.0L};
    case ElementType::I8: return {-128, 127};
    case ElementType::I16: return {-32768, 32767};
    case ElementType::I32: return {-2147483648.0L, 2147483647};
    default: return {-9223372036854775808.0L, 9223372036854775807.0L};
  }
}

void check_int_range(long double v, ElementType t) {
  auto [lo, hi] = int_range(t);
  if (!(v >= lo && v <= hi)) {
    std::ostringstream msg;
    msg << "value " << static_cast<double>(v) << " does not fit in " << mlir_name(t);
    bad("constant", msg.str());
  }
}

// ---- checks

void need(const Value& v, const char* op) {
  if (!v.valid()) bad(op, "operand is not a value of this builder");
}

void same_type(const Value& a, const Value& b, const char* op) {
  need(a, op);
  need(b, op);
  if (a.type != b.type) bad(op, "operand types differ: " + a.type.str() + " vs " + b.type.str());
}

bool is_int_or_bool(ElementType t) { return is_integral(t) || t == ElementType::Bool; }
bool is_numeric(ElementType t) { return t != ElementType::Bool; }
bool is_inexact(ElementType t) { return is_float(t) || is_complex(t); }
bool is_real_number(ElementType t) { return is_integral(t) || is_float(t); }
bool is_signed_number(ElementType t) { return is_signed_int(t) || is_inexact(t); }

void need_dtype(const Value& a, bool ok, const char* op, const char* what) {
  if (!ok) bad(op, std::string("expects ") + what + ", got " + a.type.str());
}

void check_dim(int64_t d, int64_t rank, const char* op) {
  if (d < 0 || d >= rank)
    bad(op, "dimension " + std::to_string(d) + " out of range for rank " + std::to_string(rank));
}

// Every entry is a valid, distinct dimension of a rank-`rank` tensor.
void check_dims(const std::vector<int64_t>& dims, int64_t rank, const char* op) {
  std::set<int64_t> seen;
  for (int64_t d : dims) {
    check_dim(d, rank, op);
    if (!seen.insert(d).second) bad(op, "dimension " + std::to_string(d) + " repeated");
  }
}

bool contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

void check_index_scalars(const std::vector<Value>& idx, int64_t rank, const char* op) {
  if (static_cast<int64_t>(idx.size()) != rank)
    bad(op, "expects " + std::to_string(rank) + " start indices, got " + std::to_string(idx.size()));
  for (const auto& i : idx) {
    need(i, op);
    if (i.rank() != 0 || !is_integral(i.dtype()))
      bad(op, "start indices must be rank-0 integers, got " + i.type.str());
    if (i.dtype() != idx[0].dtype()) bad(op, "start indices must share one element type");
  }
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

ElementType complex_part(ElementType t) {
  return t == ElementType::C128 ? ElementType::F64 : ElementType::F32;
}

// All ones, the identity of a bitwise and.
Value all_ones(Builder& b, ElementType t) {
  if (t == ElementType::Bool) return b.constant_bool(true);
  return is_unsigned(t) ? b.max_value(t) : b.constant_int(-1, t);
}

Value emit_constant(Builder& b, const std::string& lit, ElementType t) {
  TensorType type = scalar_type(t);
  return b.op("stablehlo.constant", {}, type, "value = dense<" + lit + "> : " + type.str());
}

}  // namespace

std::string literal(double v, ElementType t) {
  if (is_float(t)) return float_literal(v, t);
  if (is_complex(t)) {
    ElementType p = complex_part(t);
    return "(" + float_literal(v, p) + ", " + float_literal(0, p) + ")";
  }
  if (t == ElementType::Bool) return v != 0 ? "true" : "false";
  if (std::isnan(v)) bad("constant", "nan has no integer value");
  long double x = std::trunc(static_cast<long double>(v));
  check_int_range(x, t);
  if (is_unsigned(t)) return std::to_string(static_cast<unsigned long long>(x));
  return std::to_string(static_cast<long long>(x));
}

Builder::Builder() { blocks_.push_back(Block{}); }

Value Builder::fresh(const TensorType& t) { return Value{next_id_++, t}; }

void Builder::emit(const std::string& line) {
  Block& b = blocks_.back();
  b.text += std::string(b.indent, ' ') + line + "\n";
}

// ---- module interface

Value Builder::parameter(const TensorType& type) {
  if (blocks_.size() != 1) bad("parameter", "parameters cannot be created inside a region");
  for (int64_t d : type.shape)
    if (d < 0) bad("parameter", "negative dimension in " + shape_str(type.shape));
  Value v = fresh(type);
  params_.push_back(type);
  param_ids_.push_back(v.id);
  param_alias_.push_back(-1);
  return v;
}

void Builder::alias_parameter(const Value& param, int result_index) {
  auto it = std::find(param_ids_.begin(), param_ids_.end(), param.id);
  if (it == param_ids_.end()) bad("alias_parameter", "value is not a parameter of @main");
  if (result_index < 0) bad("alias_parameter", "negative result index");
  param_alias_[it - param_ids_.begin()] = result_index;
}

std::string Builder::module(const std::vector<Value>& results) const {
  if (blocks_.size() != 1) bad("module", "called while a region is open");
  std::set<int> aliased;
  std::vector<std::string> args;
  for (size_t i = 0; i < params_.size(); ++i) {
    std::string arg = "%v" + std::to_string(param_ids_[i]) + ": " + params_[i].str();
    int k = param_alias_[i];
    if (k >= 0) {
      // PJRT can only reuse the donated buffer for an output of the same type.
      if (k >= static_cast<int>(results.size()))
        bad("module", "parameter aliased to result " + std::to_string(k) + " of " +
                          std::to_string(results.size()));
      if (results[k].type != params_[i])
        bad("module", "aliased parameter " + params_[i].str() + " differs from result " +
                          results[k].type.str());
      if (!aliased.insert(k).second)
        bad("module", "result " + std::to_string(k) + " aliased twice");
      arg += " {tf.aliasing_output = " + std::to_string(k) + " : i32}";
    }
    args.push_back(arg);
  }
  std::vector<std::string> names;
  for (const auto& r : results) {
    need(r, "module");
    names.push_back(name(r));
  }
  std::string rtypes = types_text(types_of(results));
  std::string out = "module @torch_tpu {\n";
  out += "  func.func public @main(" + join(args) + ") -> (" + rtypes + ") {\n";
  out += blocks_[0].text;
  out += "    \"func.return\"(" + join(names) + ") : (" + rtypes + ") -> ()\n";
  out += "  }\n";
  for (const auto& f : functions_) out += f.second + "\n";
  out += "}\n";
  return out;
}

void Builder::add_functions(const std::string& symbol, const std::string& text) {
  for (const auto& f : functions_)
    if (f.first == symbol) return;
  functions_.emplace_back(symbol, text);
}

// ---- generic emission

Value Builder::op(const std::string& op_name, const std::vector<Value>& operands,
                  const TensorType& result, const std::string& attrs) {
  return op_multi(op_name, operands, {result}, attrs, {})[0];
}

std::string Builder::region_text(const std::vector<TensorType>& arg_types, const RegionFn& fn) {
  int indent = blocks_.back().indent;
  std::vector<Value> args;
  std::vector<std::string> decls;
  for (const auto& t : arg_types) {
    args.push_back(fresh(t));
    decls.push_back(name(args.back()) + ": " + t.str());
  }
  blocks_.push_back(Block{"", indent + 2});
  std::vector<Value> yielded;
  try {
    yielded = fn(*this, args);
    std::vector<std::string> names;
    for (const auto& y : yielded) {
      need(y, "region");
      names.push_back(name(y));
    }
    emit("\"stablehlo.return\"(" + join(names) + ") : (" + types_text(types_of(yielded)) +
         ") -> ()");
  } catch (...) {
    blocks_.pop_back();  // leave the builder usable for the caller's error handling
    throw;
  }
  std::string body = blocks_.back().text;
  blocks_.pop_back();
  std::string pad(indent, ' ');
  return "{\n" + pad + "^bb0(" + join(decls) + "):\n" + body + pad + "}";
}

std::vector<Value> Builder::op_multi(
    const std::string& op_name, const std::vector<Value>& operands,
    const std::vector<TensorType>& results, const std::string& attrs,
    const std::vector<std::pair<std::vector<TensorType>, RegionFn>>& regions) {
  std::vector<std::string> args;
  for (const auto& v : operands) {
    need(v, op_name.c_str());
    args.push_back(name(v));
  }
  std::vector<std::string> region_texts;
  for (const auto& [types, fn] : regions) region_texts.push_back(region_text(types, fn));

  std::vector<Value> outs;
  std::vector<std::string> out_names;
  for (const auto& t : results) {
    outs.push_back(fresh(t));
    out_names.push_back(name(outs.back()));
  }
  std::string line;
  if (!outs.empty()) line = join(out_names) + " = ";
  line += "\"" + op_name + "\"(" + join(args) + ")";
  if (!region_texts.empty()) line += " (" + join(region_texts) + ")";
  if (!attrs.empty()) line += " {" + attrs + "}";
  std::string rtypes = types_text(results);
  line += " : (" + types_text(types_of(operands)) + ") -> ";
  line += results.size() == 1 ? rtypes : "(" + rtypes + ")";
  emit(line);
  return outs;
}

// ---- constants

Value Builder::constant(double v, ElementType t) { return emit_constant(*this, literal(v, t), t); }

Value Builder::constant_int(int64_t v, ElementType t) {
  if (is_inexact(t)) return constant(static_cast<double>(v), t);
  if (t == ElementType::Bool) return constant_bool(v != 0);
  check_int_range(static_cast<long double>(v), t);
  return emit_constant(*this, std::to_string(v), t);
}

Value Builder::constant_bool(bool v) {
  return emit_constant(*this, v ? "true" : "false", ElementType::Bool);
}

Value Builder::full(double v, ElementType t, const Shape& shape) {
  Value c = constant(v, t);
  return shape.empty() ? c : broadcast_in_dim(c, shape, {});
}

Value Builder::max_value(ElementType t) {
  if (is_float(t)) return constant(std::numeric_limits<double>::infinity(), t);
  if (is_complex(t)) bad("max_value", "complex numbers are not ordered");
  if (t == ElementType::Bool) return constant_bool(true);
  if (t == ElementType::U64) return emit_constant(*this, "18446744073709551615", t);
  return constant_int(static_cast<int64_t>(int_range(t).second), t);
}

Value Builder::min_value(ElementType t) {
  if (is_float(t)) return constant(-std::numeric_limits<double>::infinity(), t);
  if (is_complex(t)) bad("min_value", "complex numbers are not ordered");
  if (t == ElementType::Bool) return constant_bool(false);
  return constant_int(static_cast<int64_t>(int_range(t).first), t);
}

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

// ---- shape

Value Builder::reshape(Value a, const Shape& shape) {
  need(a, "reshape");
  TensorType t{a.dtype(), shape};
  for (int64_t d : shape)
    if (d < 0) bad("reshape", "negative dimension in " + shape_str(shape));
  if (t.numel() != a.type.numel())
    bad("reshape", "cannot reshape " + shape_str(a.shape()) + " to " + shape_str(shape));
  return op("stablehlo.reshape", {a}, t);
}

Value Builder::transpose(Value a, const std::vector<int64_t>& perm) {
  need(a, "transpose");
  if (static_cast<int64_t>(perm.size()) != a.rank())
    bad("transpose", "permutation " + shape_str(perm) + " does not match rank " +
                         std::to_string(a.rank()));
  check_dims(perm, a.rank(), "transpose");
  TensorType t{a.dtype(), {}};
  for (int64_t p : perm) t.shape.push_back(a.shape()[p]);
  return op("stablehlo.transpose", {a}, t, "permutation = " + i64_array(perm));
}

Value Builder::broadcast_in_dim(Value a, const Shape& shape, const std::vector<int64_t>& dims) {
  need(a, "broadcast_in_dim");
  if (static_cast<int64_t>(dims.size()) != a.rank())
    bad("broadcast_in_dim", "needs one dimension per operand dimension, got " + shape_str(dims) +
                                " for " + a.type.str());
  check_dims(dims, static_cast<int64_t>(shape.size()), "broadcast_in_dim");
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t from = a.shape()[i], to = shape[dims[i]];
    if (from != 1 && from != to)
      bad("broadcast_in_dim", "cannot broadcast " + shape_str(a.shape()) + " to " +
                                  shape_str(shape) + " with dims " + shape_str(dims));
  }
  return op("stablehlo.broadcast_in_dim", {a}, TensorType{a.dtype(), shape},
            "broadcast_dimensions = " + i64_array(dims));
}

Value Builder::slice(Value a, const std::vector<int64_t>& start, const std::vector<int64_t>& limit,
                     const std::vector<int64_t>& strides) {
  need(a, "slice");
  size_t r = a.shape().size();
  if (start.size() != r || limit.size() != r || strides.size() != r)
    bad("slice", "start/limit/strides must have rank " + std::to_string(r) + " entries");
  TensorType t{a.dtype(), {}};
  for (size_t i = 0; i < r; ++i) {
    if (start[i] < 0 || start[i] > limit[i] || limit[i] > a.shape()[i] || strides[i] <= 0)
      bad("slice", "bad bounds [" + std::to_string(start[i]) + ":" + std::to_string(limit[i]) +
                       ":" + std::to_string(strides[i]) + "] for dimension " + std::to_string(i) +
                       " of " + a.type.str());
    t.shape.push_back((limit[i] - start[i] + strides[i] - 1) / strides[i]);
  }
  return op("stablehlo.slice", {a}, t,
            "start_indices = " + i64_array(start) + ", limit_indices = " + i64_array(limit) +
                ", strides = " + i64_array(strides));
}

Value Builder::dynamic_slice(Value a, const std::vector<Value>& start_indices, const Shape& sizes) {
  need(a, "dynamic_slice");
  check_index_scalars(start_indices, a.rank(), "dynamic_slice");
  if (static_cast<int64_t>(sizes.size()) != a.rank())
    bad("dynamic_slice", "sizes " + shape_str(sizes) + " do not match " + a.type.str());
  for (size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i] < 0 || sizes[i] > a.shape()[i])
      bad("dynamic_slice", "sizes " + shape_str(sizes) + " exceed " + a.type.str());
  std::vector<Value> operands{a};
  operands.insert(operands.end(), start_indices.begin(), start_indices.end());
  return op("stablehlo.dynamic_slice", operands, TensorType{a.dtype(), sizes},
            "slice_sizes = " + i64_array(sizes));
}

Value Builder::dynamic_update_slice(Value a, Value update, const std::vector<Value>& start_indices) {
  need(a, "dynamic_update_slice");
  need(update, "dynamic_update_slice");
  check_index_scalars(start_indices, a.rank(), "dynamic_update_slice");
  bool fits = update.dtype() == a.dtype() && update.rank() == a.rank();
  for (int64_t i = 0; fits && i < a.rank(); ++i) fits = update.shape()[i] <= a.shape()[i];
  if (!fits)
    bad("dynamic_update_slice", "update " + update.type.str() + " does not fit " + a.type.str());
  std::vector<Value> operands{a, update};
  operands.insert(operands.end(), start_indices.begin(), start_indices.end());
  return op("stablehlo.dynamic_update_slice", operands, a.type);
}

Value Builder::concatenate(const std::vector<Value>& values, int64_t dim) {
  if (values.empty()) bad("concatenate", "needs at least one operand");
  const Value& first = values[0];
  need(first, "concatenate");
  check_dim(dim, first.rank(), "concatenate");
  TensorType t = first.type;
  t.shape[dim] = 0;
  for (const auto& v : values) {
    need(v, "concatenate");
    bool ok = v.dtype() == first.dtype() && v.rank() == first.rank();
    for (int64_t i = 0; ok && i < v.rank(); ++i) ok = i == dim || v.shape()[i] == first.shape()[i];
    if (!ok)
      bad("concatenate", "cannot join " + v.type.str() + " with " + first.type.str() +
                             " along dimension " + std::to_string(dim));
    t.shape[dim] += v.shape()[dim];
  }
  return op("stablehlo.concatenate", values, t, "dimension = " + std::to_string(dim) + " : i64");
}

Value Builder::pad(Value a, Value pad_value, const std::vector<int64_t>& low,
                   const std::vector<int64_t>& high, const std::vector<int64_t>& interior) {
  need(a, "pad");
  need(pad_value, "pad");
  if (pad_value.type != scalar_type(a.dtype()))
    bad("pad", "padding value must be " + scalar_type(a.dtype()).str() + ", got " +
                   pad_value.type.str());
  size_t r = a.shape().size();
  if (low.size() != r || high.size() != r || interior.size() != r)
    bad("pad", "low/high/interior must have rank " + std::to_string(r) + " entries");
  TensorType t{a.dtype(), {}};
  for (size_t i = 0; i < r; ++i) {
    int64_t d = a.shape()[i];
    int64_t n = low[i] + high[i] + d + (d > 0 ? (d - 1) * interior[i] : 0);
    if (interior[i] < 0 || n < 0) bad("pad", "bad padding for dimension " + std::to_string(i));
    t.shape.push_back(n);
  }
  return op("stablehlo.pad", {a, pad_value}, t,
            "edge_padding_low = " + i64_array(low) + ", edge_padding_high = " + i64_array(high) +
                ", interior_padding = " + i64_array(interior));
}

Value Builder::reverse(Value a, const std::vector<int64_t>& dims) {
  need(a, "reverse");
  check_dims(dims, a.rank(), "reverse");
  return op("stablehlo.reverse", {a}, a.type, "dimensions = " + i64_array(dims));
}

Value Builder::iota(const TensorType& type, int64_t dim) {
  check_dim(dim, type.rank(), "iota");
  if (type.dtype == ElementType::Bool) bad("iota", "i1 cannot count");
  return op("stablehlo.iota", {}, type, "iota_dimension = " + std::to_string(dim) + " : i64");
}

// ---- linear algebra

Value Builder::dot_general(Value lhs, Value rhs, const std::vector<int64_t>& lhs_batch,
                           const std::vector<int64_t>& rhs_batch,
                           const std::vector<int64_t>& lhs_contract,
                           const std::vector<int64_t>& rhs_contract, ElementType result) {
  const char* o = "dot_general";
  need(lhs, o);
  need(rhs, o);
  if (lhs.dtype() != rhs.dtype())
    bad(o, "operand element types differ: " + lhs.type.str() + " vs " + rhs.type.str());
  if (lhs_batch.size() != rhs_batch.size() || lhs_contract.size() != rhs_contract.size())
    bad(o, "lhs and rhs need as many batching and contracting dimensions");
  std::vector<int64_t> lhs_all = lhs_batch, rhs_all = rhs_batch;
  lhs_all.insert(lhs_all.end(), lhs_contract.begin(), lhs_contract.end());
  rhs_all.insert(rhs_all.end(), rhs_contract.begin(), rhs_contract.end());
  check_dims(lhs_all, lhs.rank(), o);
  check_dims(rhs_all, rhs.rank(), o);
  for (size_t i = 0; i < lhs_all.size(); ++i)
    if (lhs.shape()[lhs_all[i]] != rhs.shape()[rhs_all[i]])
      bad(o, "dimension " + std::to_string(lhs_all[i]) + " of " + lhs.type.str() +
                 " does not match dimension " + std::to_string(rhs_all[i]) + " of " +
                 rhs.type.str());
  TensorType t{result, {}};
  for (int64_t d : lhs_batch) t.shape.push_back(lhs.shape()[d]);
  for (int64_t d = 0; d < lhs.rank(); ++d)
    if (!contains(lhs_all, d)) t.shape.push_back(lhs.shape()[d]);
  for (int64_t d = 0; d < rhs.rank(); ++d)
    if (!contains(rhs_all, d)) t.shape.push_back(rhs.shape()[d]);
  std::string attrs = "dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = " +
                      list(lhs_batch) + ", rhs_batching_dimensions = " + list(rhs_batch) +
                      ", lhs_contracting_dimensions = " + list(lhs_contract) +
                      ", rhs_contracting_dimensions = " + list(rhs_contract) + ">";
  return op("stablehlo.dot_general", {lhs, rhs}, t, attrs);
}

// ---- ops with regions

namespace {

// Checks that a region yielded rank-0 values of the expected element types.
RegionFn checked_region(const char* o, std::vector<ElementType> expect, const RegionFn& body) {
  return [o, expect, body](Builder& b, const std::vector<Value>& args) {
    std::vector<Value> out = body(b, args);
    if (out.size() != expect.size())
      bad(o, "region returned " + std::to_string(out.size()) + " values, expected " +
                 std::to_string(expect.size()));
    for (size_t i = 0; i < out.size(); ++i)
      if (out[i].type != scalar_type(expect[i]))
        bad(o, "region result " + std::to_string(i) + " is " + out[i].type.str() +
                   ", expected " + scalar_type(expect[i]).str());
    return out;
  };
}

void check_inputs_inits(const std::vector<Value>& inputs, const std::vector<Value>& inits,
                        const char* o) {
  if (inputs.empty() || inputs.size() != inits.size())
    bad(o, "needs one init value per input, and at least one input");
  for (size_t i = 0; i < inputs.size(); ++i) {
    need(inputs[i], o);
    need(inits[i], o);
    if (inputs[i].shape() != inputs[0].shape())
      bad(o, "inputs differ in shape: " + inputs[i].type.str() + " vs " + inputs[0].type.str());
    if (inits[i].type != scalar_type(inputs[i].dtype()))
      bad(o, "init value " + inits[i].type.str() + " should be " +
                 scalar_type(inputs[i].dtype()).str());
  }
}

// Region arguments of reduce-like ops: the accumulators, then the elements.
std::vector<TensorType> acc_then_x(const std::vector<Value>& inputs) {
  std::vector<TensorType> ts;
  for (int pass = 0; pass < 2; ++pass)
    for (const auto& v : inputs) ts.push_back(scalar_type(v.dtype()));
  return ts;
}

std::vector<ElementType> dtypes(const std::vector<Value>& vs) {
  std::vector<ElementType> ds;
  for (const auto& v : vs) ds.push_back(v.dtype());
  return ds;
}

}  // namespace

std::vector<Value> Builder::reduce(const std::vector<Value>& inputs, const std::vector<Value>& inits,
                                   const std::vector<int64_t>& dims, const RegionFn& body) {
  check_inputs_inits(inputs, inits, "reduce");
  check_dims(dims, inputs[0].rank(), "reduce");
  std::vector<TensorType> results;
  for (const auto& v : inputs) {
    TensorType t{v.dtype(), {}};
    for (int64_t d = 0; d < v.rank(); ++d)
      if (!contains(dims, d)) t.shape.push_back(v.shape()[d]);
    results.push_back(t);
  }
  std::vector<Value> operands = inputs;
  operands.insert(operands.end(), inits.begin(), inits.end());
  std::vector<int64_t> sorted = dims;
  std::sort(sorted.begin(), sorted.end());
  return op_multi("stablehlo.reduce", operands, results, "dimensions = " + i64_array(sorted),
                  {{acc_then_x(inputs), checked_region("reduce", dtypes(inputs), body)}});
}

namespace {

Value reduce_with(Builder& b, Value a, const std::vector<int64_t>& dims, Value init,
                  Value (Builder::*combine)(Value, Value)) {
  return b.reduce({a}, {init}, dims, [combine](Builder& r, const std::vector<Value>& x) {
    return std::vector<Value>{(r.*combine)(x[0], x[1])};
  })[0];
}

}  // namespace

Value Builder::reduce_sum(Value a, const std::vector<int64_t>& dims) {
  // One stablehlo.reduce may add its elements in one sequence (XLA's CPU
  // emitter does), its rounding error growing with their count; PyTorch's
  // CPU kernels sum in cascades of 16. Summing blocks of 16 consecutive
  // elements, then the blocks' sums likewise, rounds as they do.
  constexpr int64_t kBlock = 16;
  auto plain = [this](Value v, const std::vector<int64_t>& d) {
    return reduce_with(*this, v, d, constant(0, v.dtype()), &Builder::add);
  };
  std::vector<int64_t> sorted = dims;
  std::sort(sorted.begin(), sorted.end());
  int64_t count = 1;
  for (int64_t d : sorted) {
    if (d < 0 || d >= a.rank()) return plain(a, dims);  // reduce() names the error
    count *= a.shape()[d];
  }
  if (!is_float(a.dtype()) || count <= kBlock) return plain(a, dims);
  // The reduced dimensions as one: in place when they are adjacent (a free
  // reshape), else moved after the kept ones.
  Value v = a;
  int64_t axis = sorted.front();
  if (sorted.back() - sorted.front() + 1 != int64_t(sorted.size())) {
    std::vector<int64_t> perm;
    for (int64_t i = 0; i < a.rank(); ++i)
      if (!std::binary_search(sorted.begin(), sorted.end(), i)) perm.push_back(i);
    axis = int64_t(perm.size());
    perm.insert(perm.end(), sorted.begin(), sorted.end());
    v = transpose(v, perm);
  }
  Shape shape(v.shape().begin(), v.shape().begin() + axis);
  shape.push_back(count);
  shape.insert(shape.end(), v.shape().begin() + axis + int64_t(sorted.size()), v.shape().end());
  v = reshape(v, shape);
  while (shape[axis] > kBlock) {
    int64_t blocks = (shape[axis] + kBlock - 1) / kBlock;
    if (blocks * kBlock != shape[axis]) {
      // Zeros fill the last block: adding them is exact.
      std::vector<int64_t> none(shape.size(), 0), high(shape.size(), 0);
      high[axis] = blocks * kBlock - shape[axis];
      v = pad(v, constant(0, v.dtype()), none, high, none);
    }
    Shape split = shape;
    split[axis] = blocks;
    split.insert(split.begin() + axis + 1, kBlock);
    v = plain(reshape(v, split), {axis + 1});
    shape[axis] = blocks;
  }
  return plain(v, {axis});
}
Value Builder::reduce_prod(Value a, const std::vector<int64_t>& dims) {
  return reduce_with(*this, a, dims, constant(1, a.dtype()), &Builder::mul);
}
Value Builder::reduce_max(Value a, const std::vector<int64_t>& dims) {
  return reduce_with(*this, a, dims, min_value(a.dtype()), &Builder::max);
}
Value Builder::reduce_min(Value a, const std::vector<int64_t>& dims) {
  return reduce_with(*this, a, dims, max_value(a.dtype()), &Builder::min);
}
Value Builder::reduce_and(Value a, const std::vector<int64_t>& dims) {
  need_dtype(a, is_int_or_bool(a.dtype()), "reduce_and", "bools or integers");
  return reduce_with(*this, a, dims, all_ones(*this, a.dtype()), &Builder::and_);
}
Value Builder::reduce_or(Value a, const std::vector<int64_t>& dims) {
  need_dtype(a, is_int_or_bool(a.dtype()), "reduce_or", "bools or integers");
  return reduce_with(*this, a, dims, constant_int(0, a.dtype()), &Builder::or_);
}

std::vector<Value> Builder::reduce_window(
    const std::vector<Value>& inputs, const std::vector<Value>& inits,
    const std::vector<int64_t>& window_dims, const std::vector<int64_t>& window_strides,
    const std::vector<int64_t>& base_dilations, const std::vector<int64_t>& window_dilations,
    const std::vector<std::pair<int64_t, int64_t>>& padding, const RegionFn& body) {
  const char* o = "reduce_window";
  check_inputs_inits(inputs, inits, o);
  size_t r = inputs[0].shape().size();
  // Empty lists mean the defaults (strides and dilations 1, no padding).
  auto or_ones = [r](std::vector<int64_t> v) { return v.empty() ? std::vector<int64_t>(r, 1) : v; };
  std::vector<int64_t> strides = or_ones(window_strides), base = or_ones(base_dilations),
                       wdil = or_ones(window_dilations);
  auto pads = padding.empty() ? std::vector<std::pair<int64_t, int64_t>>(r, {0, 0}) : padding;
  if (window_dims.size() != r || strides.size() != r || base.size() != r || wdil.size() != r ||
      pads.size() != r)
    bad(o, "window attributes must have rank " + std::to_string(r) + " entries");
  Shape out;
  std::vector<std::string> pad_rows;
  for (size_t i = 0; i < r; ++i) {
    if (window_dims[i] <= 0 || strides[i] <= 0 || base[i] <= 0 || wdil[i] <= 0)
      bad(o, "window sizes, strides and dilations must be positive");
    int64_t d = inputs[0].shape()[i];
    int64_t padded = (d > 0 ? (d - 1) * base[i] + 1 : 0) + pads[i].first + pads[i].second;
    int64_t window = (window_dims[i] - 1) * wdil[i] + 1;
    out.push_back(padded < window ? 0 : (padded - window) / strides[i] + 1);
    pad_rows.push_back("[" + std::to_string(pads[i].first) + ", " + std::to_string(pads[i].second) +
                       "]");
  }
  std::vector<TensorType> results;
  for (const auto& v : inputs) results.push_back(TensorType{v.dtype(), out});
  std::string attrs = "window_dimensions = " + i64_array(window_dims) +
                      ", window_strides = " + i64_array(strides) +
                      ", base_dilations = " + i64_array(base) +
                      ", window_dilations = " + i64_array(wdil) + ", padding = dense<" +
                      (r ? "[" + join(pad_rows) + "]" : std::string("0")) + "> : tensor<" +
                      std::to_string(r) + "x2xi64>";
  std::vector<Value> operands = inputs;
  operands.insert(operands.end(), inits.begin(), inits.end());
  return op_multi("stablehlo.reduce_window", operands, results, attrs,
                  {{acc_then_x(inputs), checked_region(o, dtypes(inputs), body)}});
}

std::vector<Value> Builder::sort(const std::vector<Value>& inputs, int64_t dim, bool is_stable,
                                 const RegionFn& comparator) {
  if (inputs.empty()) bad("sort", "needs at least one input");
  std::vector<TensorType> args;
  for (const auto& v : inputs) {
    need(v, "sort");
    if (v.shape() != inputs[0].shape())
      bad("sort", "inputs differ in shape: " + v.type.str() + " vs " + inputs[0].type.str());
    args.push_back(scalar_type(v.dtype()));
    args.push_back(scalar_type(v.dtype()));
  }
  check_dim(dim, inputs[0].rank(), "sort");
  std::string attrs = "dimension = " + std::to_string(dim) +
                      " : i64, is_stable = " + (is_stable ? "true" : "false");
  return op_multi("stablehlo.sort", inputs, types_of(inputs), attrs,
                  {{args, checked_region("sort", {ElementType::Bool}, comparator)}});
}

namespace {

// Indices without index_vector_dim: the batch ("scatter") dimensions.
Shape batch_shape(const Value& indices, int64_t index_vector_dim) {
  Shape s;
  for (int64_t d = 0; d < indices.rank(); ++d)
    if (d != index_vector_dim) s.push_back(indices.shape()[d]);
  return s;
}

void check_indices(const Value& indices, int64_t index_vector_dim, size_t index_count,
                   const char* o) {
  need(indices, o);
  if (!is_integral(indices.dtype())) bad(o, "indices must be integers, got " + indices.type.str());
  if (index_vector_dim < 0 || index_vector_dim > indices.rank())
    bad(o, "index_vector_dim " + std::to_string(index_vector_dim) + " out of range");
  int64_t n = index_vector_dim == indices.rank() ? 1 : indices.shape()[index_vector_dim];
  if (n != static_cast<int64_t>(index_count))
    bad(o, "index vectors have " + std::to_string(n) + " entries but the index map has " +
               std::to_string(index_count));
}

// Dimension-number fields; batching fields only when used, so that plugins
// predating batching dimensions still parse the common case.
std::string field(const char* key, const std::vector<int64_t>& v, bool optional = false) {
  if (optional && v.empty()) return "";
  return std::string(key) + " = " + list(v) + ", ";
}

}  // namespace

Value Builder::gather(Value operand, Value indices, const GatherDims& dims,
                      const std::vector<int64_t>& slice_sizes, const Shape& result_shape) {
  const char* o = "gather";
  need(operand, o);
  check_indices(indices, dims.index_vector_dim, dims.start_index_map.size(), o);
  if (static_cast<int64_t>(slice_sizes.size()) != operand.rank())
    bad(o, "slice_sizes " + shape_str(slice_sizes) + " do not match " + operand.type.str());
  for (int64_t i = 0; i < operand.rank(); ++i)
    if (slice_sizes[i] < 0 || slice_sizes[i] > operand.shape()[i])
      bad(o, "slice_sizes " + shape_str(slice_sizes) + " exceed " + operand.type.str());
  std::vector<int64_t> dropped = dims.collapsed_slice_dims;
  dropped.insert(dropped.end(), dims.operand_batching_dims.begin(), dims.operand_batching_dims.end());
  check_dims(dropped, operand.rank(), o);
  check_dims(dims.start_index_map, operand.rank(), o);
  if (dims.operand_batching_dims.size() != dims.start_indices_batching_dims.size())
    bad(o, "operand and indices need as many batching dimensions");
  for (int64_t d : dropped)
    if (slice_sizes[d] > 1) bad(o, "collapsed dimension " + std::to_string(d) + " has size > 1");

  Shape offsets;
  for (int64_t d = 0; d < operand.rank(); ++d)
    if (!contains(dropped, d)) offsets.push_back(slice_sizes[d]);
  if (offsets.size() != dims.offset_dims.size())
    bad(o, "offset_dims " + shape_str(dims.offset_dims) + " do not match slice " +
               shape_str(offsets));
  Shape batch = batch_shape(indices, dims.index_vector_dim);
  int64_t rank = static_cast<int64_t>(offsets.size() + batch.size());
  check_dims(dims.offset_dims, rank, o);
  Shape expect;
  for (int64_t d = 0, off = 0, bat = 0; d < rank; ++d)
    expect.push_back(contains(dims.offset_dims, d) ? offsets[off++] : batch[bat++]);
  if (result_shape != expect)
    bad(o, "result shape " + shape_str(result_shape) + " should be " + shape_str(expect));

  std::string attrs = "dimension_numbers = #stablehlo.gather<" +
                      field("offset_dims", dims.offset_dims) +
                      field("collapsed_slice_dims", dims.collapsed_slice_dims) +
                      field("operand_batching_dims", dims.operand_batching_dims, true) +
                      field("start_indices_batching_dims", dims.start_indices_batching_dims, true) +
                      field("start_index_map", dims.start_index_map) +
                      "index_vector_dim = " + std::to_string(dims.index_vector_dim) +
                      ">, slice_sizes = " + i64_array(slice_sizes) + ", indices_are_sorted = false";
  return op("stablehlo.gather", {operand, indices}, TensorType{operand.dtype(), expect}, attrs);
}

Value Builder::scatter(Value operand, Value indices, Value updates, const ScatterDims& dims,
                       const RegionFn& update) {
  const char* o = "scatter";
  need(operand, o);
  need(updates, o);
  check_indices(indices, dims.index_vector_dim, dims.scatter_dims_to_operand_dims.size(), o);
  if (updates.dtype() != operand.dtype())
    bad(o, "updates " + updates.type.str() + " differ in type from " + operand.type.str());
  std::vector<int64_t> dropped = dims.inserted_window_dims;
  dropped.insert(dropped.end(), dims.input_batching_dims.begin(), dims.input_batching_dims.end());
  check_dims(dropped, operand.rank(), o);
  check_dims(dims.scatter_dims_to_operand_dims, operand.rank(), o);
  if (dims.input_batching_dims.size() != dims.scatter_indices_batching_dims.size())
    bad(o, "input and indices need as many batching dimensions");
  check_dims(dims.update_window_dims, updates.rank(), o);

  Shape window_bounds;  // operand dimensions that update windows span
  for (int64_t d = 0; d < operand.rank(); ++d)
    if (!contains(dropped, d)) window_bounds.push_back(operand.shape()[d]);
  Shape batch = batch_shape(indices, dims.index_vector_dim);
  if (window_bounds.size() != dims.update_window_dims.size() ||
      updates.rank() != static_cast<int64_t>(window_bounds.size() + batch.size()))
    bad(o, "updates " + updates.type.str() + " do not match operand " + operand.type.str() +
               " and indices " + indices.type.str());
  for (int64_t d = 0, w = 0, s = 0; d < updates.rank(); ++d) {
    bool window = contains(dims.update_window_dims, d);
    int64_t n = updates.shape()[d];
    if (window ? n > window_bounds[w++] : n != batch[s++])
      bad(o, "dimension " + std::to_string(d) + " of updates " + updates.type.str() +
                 " does not fit operand " + operand.type.str() + " / indices " +
                 indices.type.str());
  }
  std::string attrs =
      "scatter_dimension_numbers = #stablehlo.scatter<" +
      field("update_window_dims", dims.update_window_dims) +
      field("inserted_window_dims", dims.inserted_window_dims) +
      field("input_batching_dims", dims.input_batching_dims, true) +
      field("scatter_indices_batching_dims", dims.scatter_indices_batching_dims, true) +
      field("scatter_dims_to_operand_dims", dims.scatter_dims_to_operand_dims) +
      "index_vector_dim = " + std::to_string(dims.index_vector_dim) +
      ">, indices_are_sorted = false, unique_indices = false";
  TensorType s = scalar_type(operand.dtype());
  return op_multi("stablehlo.scatter", {operand, indices, updates}, {operand.type}, attrs,
                  {{{s, s}, checked_region(o, {operand.dtype()}, update)}})[0];
}

Value Builder::rng_bit_generator(Value state, const TensorType& result, Value* new_state) {
  const char* o = "rng_bit_generator";
  need(state, o);
  if (state.dtype() != ElementType::U64 || state.rank() != 1 ||
      (state.shape()[0] != 2 && state.shape()[0] != 3))
    bad(o, "PHILOX state must be tensor<2xui64> or tensor<3xui64>, got " + state.type.str());
  if (!is_integral(result.dtype) && !is_float(result.dtype))
    bad(o, "bits must be integers or floats, got " + result.str());
  auto outs = op_multi("stablehlo.rng_bit_generator", {state},
                       {state.type, result}, "rng_algorithm = #stablehlo<rng_algorithm PHILOX>", {});
  if (new_state) *new_state = outs[0];
  return outs[1];
}

}  // namespace torch_tpu::hlo
