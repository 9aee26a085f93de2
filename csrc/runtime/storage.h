// The state behind one c10 storage of a `tpu` tensor. The c10 DataPtr points
// at this object, never at device memory. `base` always holds the whole
// storage as one contiguous buffer; tensors are views (sizes, strides,
// offset, dtype) over it, and a write replaces `base`, so every tensor
// sharing the storage sees it.
#pragma once

#include <cstdint>
#include <memory>

#include "runtime/device_buffer.h"

namespace torch_tpu::runtime {

struct Storage {
  Storage(int64_t nbytes, int device)
      : nbytes(nbytes),
        device(device),
        base(DeviceBuffer::deferred_zeros({hlo::ElementType::U8, {nbytes}}, device)) {}

  int64_t nbytes;
  int device;
  std::shared_ptr<DeviceBuffer> base;
};

}  // namespace torch_tpu::runtime
