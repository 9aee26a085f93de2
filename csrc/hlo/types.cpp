#include "hlo/types.h"

#include <sstream>

#include "common/key_text.h"

namespace torch_tpu::hlo {

namespace {

struct Info {
  const char* mlir;
  const char* torch;
  int64_t bytes;
};

// Indexed by ElementType; the switch keeps the compiler checking that every
// enumerator has an entry even if the enum is reordered.
Info info(ElementType t) {
  switch (t) {
    case ElementType::Bool: return {"i1", "bool", 1};
    case ElementType::U8: return {"ui8", "uint8", 1};
    case ElementType::I8: return {"i8", "int8", 1};
    case ElementType::I16: return {"i16", "int16", 2};
    case ElementType::I32: return {"i32", "int32", 4};
    case ElementType::I64: return {"i64", "int64", 8};
    case ElementType::F16: return {"f16", "float16", 2};
    case ElementType::BF16: return {"bf16", "bfloat16", 2};
    case ElementType::F32: return {"f32", "float32", 4};
    case ElementType::F64: return {"f64", "float64", 8};
    case ElementType::C64: return {"complex<f32>", "complex64", 8};
    case ElementType::C128: return {"complex<f64>", "complex128", 16};
    case ElementType::U16: return {"ui16", "uint16", 2};
    case ElementType::U32: return {"ui32", "uint32", 4};
    case ElementType::U64: return {"ui64", "uint64", 8};
    case ElementType::F8E4M3FN: return {"f8E4M3FN", "float8_e4m3fn", 1};
    case ElementType::F8E5M2: return {"f8E5M2", "float8_e5m2", 1};
  }
  return {"?", "?", 0};
}

}  // namespace

const char* mlir_name(ElementType t) { return info(t).mlir; }
const char* short_name(ElementType t) { return info(t).torch; }
int64_t byte_size(ElementType t) { return info(t).bytes; }

bool is_float(ElementType t) {
  return t == ElementType::F16 || t == ElementType::BF16 || t == ElementType::F32 ||
         t == ElementType::F64 || t == ElementType::F8E4M3FN || t == ElementType::F8E5M2;
}
bool is_complex(ElementType t) { return t == ElementType::C64 || t == ElementType::C128; }
bool is_unsigned(ElementType t) {
  return t == ElementType::Bool || t == ElementType::U8 || t == ElementType::U16 ||
         t == ElementType::U32 || t == ElementType::U64;
}
bool is_signed_int(ElementType t) {
  return t == ElementType::I8 || t == ElementType::I16 || t == ElementType::I32 ||
         t == ElementType::I64;
}
bool is_integral(ElementType t) {
  return is_signed_int(t) || (is_unsigned(t) && t != ElementType::Bool);
}

int64_t TensorType::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorType::str() const {
  std::string s;
  append_key(s);
  return s;
}

void TensorType::append_key(std::string& s) const {
  s += "tensor<";
  for (int64_t d : shape) append_int(s, d, 'x');
  s += mlir_name(dtype);
  s += '>';
}

std::string shape_str(const Shape& s) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < s.size(); ++i) out << (i ? ", " : "") << s[i];
  out << "]";
  return out.str();
}

}  // namespace torch_tpu::hlo
