#include "aten/tensor_bridge.h"

#include "runtime/runtime.h"

namespace torch_tpu::aten {

using hlo::ElementType;

hlo::ElementType to_hlo(c10::ScalarType t) {
  switch (t) {
    case c10::kBool: return ElementType::Bool;
    case c10::kByte: return ElementType::U8;
    case c10::kChar: return ElementType::I8;
    case c10::kShort: return ElementType::I16;
    case c10::kInt: return ElementType::I32;
    case c10::kLong: return ElementType::I64;
    case c10::kHalf: return ElementType::F16;
    case c10::kBFloat16: return ElementType::BF16;
    case c10::kFloat: return ElementType::F32;
    case c10::kDouble: return ElementType::F64;
    case c10::kComplexFloat: return ElementType::C64;
    case c10::kComplexDouble: return ElementType::C128;
    case c10::kUInt16: return ElementType::U16;
    case c10::kUInt32: return ElementType::U32;
    case c10::kUInt64: return ElementType::U64;
    case c10::kFloat8_e4m3fn: return ElementType::F8E4M3FN;
    case c10::kFloat8_e5m2: return ElementType::F8E5M2;
    default:
      TORCH_CHECK_TYPE(false, "tpu: dtype ", t,
                       " cannot be held by the PJRT plugin (supported: bool, uint8-64, int8-64, "
                       "float8_e4m3fn, float8_e5m2, float16, bfloat16, float32, float64, complex64, complex128)");
  }
}

c10::ScalarType to_aten(hlo::ElementType t) {
  switch (t) {
    case ElementType::Bool: return c10::kBool;
    case ElementType::U8: return c10::kByte;
    case ElementType::I8: return c10::kChar;
    case ElementType::I16: return c10::kShort;
    case ElementType::I32: return c10::kInt;
    case ElementType::I64: return c10::kLong;
    case ElementType::F16: return c10::kHalf;
    case ElementType::BF16: return c10::kBFloat16;
    case ElementType::F32: return c10::kFloat;
    case ElementType::F64: return c10::kDouble;
    case ElementType::C64: return c10::kComplexFloat;
    case ElementType::C128: return c10::kComplexDouble;
    case ElementType::U16: return c10::kUInt16;
    case ElementType::U32: return c10::kUInt32;
    case ElementType::U64: return c10::kUInt64;
    case ElementType::F8E4M3FN: return c10::kFloat8_e4m3fn;
    case ElementType::F8E5M2: return c10::kFloat8_e5m2;
  }
  TORCH_CHECK(false, "unknown element type");
}

runtime::Storage* storage_of(const at::Tensor& t) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "expected a tpu tensor, got ",
              t.device());
  auto* s = static_cast<runtime::Storage*>(t.storage().data_ptr().get_context());
  TORCH_CHECK(s != nullptr, "tpu tensor without device storage");
  return s;
}

runtime::ViewGeometry geometry_of(const at::Tensor& t) {
  runtime::ViewGeometry g;
  g.sizes.assign(t.sizes().begin(), t.sizes().end());
  g.strides.assign(t.strides().begin(), t.strides().end());
  g.offset = t.storage_offset();
  g.dtype = to_hlo(t.scalar_type());
  return g;
}

runtime::TensorInput input_of(const at::Tensor& t) { return {storage_of(t), geometry_of(t)}; }

namespace {
thread_local int current = 0;
}

int current_device() { return current; }
void set_current_device(int index) { current = index; }

at::Tensor wrap_buffer(std::shared_ptr<runtime::DeviceBuffer> buffer, int device) {
  int saved = current_device();
  set_current_device(device);
  const hlo::TensorType type = buffer->logical_type();
  std::vector<int64_t> sizes(type.shape.begin(), type.shape.end());
  at::Tensor t = at::detail::empty_generic(sizes, tpu_allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                           to_aten(type.dtype), std::nullopt);
  set_current_device(saved);
  storage_of(t)->base = std::move(buffer);
  return t;
}

void assign_base(const at::Tensor& t, std::shared_ptr<runtime::DeviceBuffer> buffer) {
  storage_of(t)->base = std::move(buffer);
}

}  // namespace torch_tpu::aten
