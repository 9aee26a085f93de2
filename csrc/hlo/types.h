// Element and tensor types of StableHLO programs, independent of torch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace torch_tpu::hlo {

// Order matters: it is the order of PyTorch's promotion lattice within a
// category, and aten/ maps c10::ScalarType onto it one to one.
enum class ElementType : uint8_t {
  Bool,
  U8,
  I8,
  I16,
  I32,
  I64,
  F16,
  BF16,
  F32,
  F64,
  C64,
  C128,
  U16,
  U32,
  U64,
  F8E4M3FN,
  F8E5M2,
};
constexpr ElementType kLastElementType = ElementType::F8E5M2;  // for loops over every type

const char* mlir_name(ElementType t);    // "f32", "i64", "ui8", "i1", "complex<f32>"
const char* short_name(ElementType t);   // "float32", "int64", ... (PyTorch's spelling)
int64_t byte_size(ElementType t);
bool is_float(ElementType t);            // f8 (e4m3fn, e5m2), f16, bf16, f32, f64
bool is_complex(ElementType t);
bool is_integral(ElementType t);         // signed or unsigned ints, not bool
bool is_unsigned(ElementType t);         // bool and u*
bool is_signed_int(ElementType t);

using Shape = std::vector<int64_t>;

struct TensorType {
  ElementType dtype = ElementType::F32;
  Shape shape;

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const;
  int64_t nbytes() const { return numel() * byte_size(dtype); }
  std::string str() const;  // "tensor<2x3xf32>"
  void append_key(std::string& s) const;  // appends str()
  bool operator==(const TensorType& o) const {
    return dtype == o.dtype && shape == o.shape;
  }
  bool operator!=(const TensorType& o) const { return !(*this == o); }
};

std::string shape_str(const Shape& s);  // "[2, 3]" for messages

}  // namespace torch_tpu::hlo
