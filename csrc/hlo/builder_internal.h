// What the builder's files share (hlo/builder.h is the public face): the
// error every operand check raises, operand and dimension checks, element
// type classes, and the pieces of MLIR text that attributes are made of.
// The Builder's methods are split by op family: builder.cpp (the module,
// generic emission and the printer, constants and exact literals),
// builder_elementwise.cpp, builder_shape.cpp, builder_linalg.cpp,
// builder_regions.cpp (reductions, sort, gather, scatter) and collectives.cpp.
#pragma once

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "hlo/builder.h"

namespace torch_tpu::hlo::internal {

[[noreturn]] inline void bad(const char* op, const std::string& msg) {
  fail(ErrorKind::Value, "hlo.", op, ": ", msg);
}

inline std::string join(const std::vector<std::string>& parts, const char* sep = ", ") {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

inline std::string ints(const std::vector<int64_t>& v) {
  std::vector<std::string> parts;
  for (int64_t x : v) parts.push_back(std::to_string(x));
  return join(parts);
}

// DenseI64ArrayAttr: `array<i64>` when empty, the parser rejects `array<i64: >`.
inline std::string i64_array(const std::vector<int64_t>& v) {
  return v.empty() ? "array<i64>" : "array<i64: " + ints(v) + ">";
}

inline std::string list(const std::vector<int64_t>& v) { return "[" + ints(v) + "]"; }

inline std::vector<TensorType> types_of(const std::vector<Value>& vs) {
  std::vector<TensorType> ts;
  for (const auto& v : vs) ts.push_back(v.type);
  return ts;
}

inline void need(const Value& v, const char* op) {
  if (!v.valid()) bad(op, "operand is not a value of this builder");
}

inline bool is_int_or_bool(ElementType t) { return is_integral(t) || t == ElementType::Bool; }
inline bool is_numeric(ElementType t) { return t != ElementType::Bool; }
inline bool is_inexact(ElementType t) { return is_float(t) || is_complex(t); }
inline bool is_real_number(ElementType t) { return is_integral(t) || is_float(t); }
inline bool is_signed_number(ElementType t) { return is_signed_int(t) || is_inexact(t); }

inline void need_dtype(const Value& a, bool ok, const char* op, const char* what) {
  if (!ok) bad(op, std::string("expects ") + what + ", got " + a.type.str());
}

inline void check_dim(int64_t d, int64_t rank, const char* op) {
  if (d < 0 || d >= rank)
    bad(op, "dimension " + std::to_string(d) + " out of range for rank " + std::to_string(rank));
}

// Every entry is a valid, distinct dimension of a rank-`rank` tensor.
inline void check_dims(const std::vector<int64_t>& dims, int64_t rank, const char* op) {
  std::set<int64_t> seen;
  for (int64_t d : dims) {
    check_dim(d, rank, op);
    if (!seen.insert(d).second) bad(op, "dimension " + std::to_string(d) + " repeated");
  }
}

inline bool contains(const std::vector<int64_t>& v, int64_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

inline ElementType complex_part(ElementType t) {
  return t == ElementType::C128 ? ElementType::F64 : ElementType::F32;
}

}  // namespace torch_tpu::hlo::internal
