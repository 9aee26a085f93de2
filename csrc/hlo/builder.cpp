// The Builder's core: parameters and the module text of @main (the
// printer: every op is one line in the generic form, `%v3 = "stablehlo.add"
// (%v1, %v2) : (...) -> ...`, regions nested as ^bb0 blocks), generic
// emission, and constants, whose floats are printed as exact hex bit
// patterns of their element type (rounded to nearest even for f16 / bf16)
// so that no value changes between C++ and the compiler.
#include "hlo/builder.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <sstream>

#include "hlo/builder_internal.h"
#include "hlo/float8.h"

namespace torch_tpu::hlo {

using namespace internal;

namespace {

std::string name(const Value& v) { return "%v" + std::to_string(v.id); }

std::string types_text(const std::vector<TensorType>& ts) {
  std::vector<std::string> parts;
  for (const auto& t : ts) parts.push_back(t.str());
  return join(parts);
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
    case ElementType::F8E4M3FN:
    case ElementType::F8E5M2: return hex(float8_bits(v, t), 2);
    default: {
      uint64_t u;
      std::memcpy(&u, &v, 8);
      return hex(u, 16);
    }
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

Value emit_constant(Builder& b, const std::string& lit, ElementType t) {
  TensorType type = scalar_type(t);
  return b.op("stablehlo.constant", {}, type, "value = dense<" + lit + "> : " + type.str());
}

}  // namespace

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

}  // namespace torch_tpu::hlo
