// Between at::Tensor and the runtime: a `tpu` tensor's DataPtr points at a
// runtime::Storage (see runtime/storage.h); its sizes, strides, offset and
// dtype are the view read from that storage's base buffer.
#pragma once

#include "aten/pch.h"
#include "common/error.h"
#include "hlo/types.h"
#include "runtime/executor.h"

namespace torch_tpu::aten {

hlo::ElementType to_hlo(c10::ScalarType t);
c10::ScalarType to_aten(hlo::ElementType t);

runtime::Storage* storage_of(const at::Tensor& t);
runtime::ViewGeometry geometry_of(const at::Tensor& t);
runtime::TensorInput input_of(const at::Tensor& t);

c10::Allocator* tpu_allocator();
int current_device();
void set_current_device(int index);

// A new contiguous `tpu` tensor whose storage base is `buffer`.
at::Tensor wrap_buffer(std::shared_ptr<runtime::DeviceBuffer> buffer, int device);
// Replaces the whole storage of a contiguous tensor covering its storage.
void assign_base(const at::Tensor& t, std::shared_ptr<runtime::DeviceBuffer> buffer);

// Runs `f`, turning torch_tpu::Error into the matching c10 exception so that
// Python sees RuntimeError, IndexError, TypeError... like on the CPU.
template <typename F>
decltype(auto) translate_errors(F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    switch (e.kind()) {
      case ErrorKind::Index: TORCH_CHECK_INDEX(false, e.what());
      case ErrorKind::Value: TORCH_CHECK_VALUE(false, e.what());
      case ErrorKind::Type: TORCH_CHECK_TYPE(false, e.what());
      case ErrorKind::NotImplemented: TORCH_CHECK_NOT_IMPLEMENTED(false, e.what());
      case ErrorKind::Runtime: TORCH_CHECK(false, e.what());
      case ErrorKind::OutOfMemory: TORCH_CHECK_WITH(OutOfMemoryError, false, e.what());
    }
    throw;
  }
}

}  // namespace torch_tpu::aten
