// Copies between the devices of one client (tpu:i -> tpu:j): the plugin
// moves the bytes itself (PJRT_Buffer_CopyToDevice), never through the host.
#pragma once

#include <memory>

#include "runtime/device_buffer.h"
#include "runtime/executor.h"

namespace torch_tpu::runtime {

// `src` (read through its view, as a contiguous array) as a new buffer on
// `device`. Asynchronous like an op: the host returns once the copy is
// enqueued. A failed source gives an Error buffer carrying its message, so
// the failure surfaces at the next use as for any op.
std::shared_ptr<DeviceBuffer> copy_to_device(const TensorInput& src, int device);

// The addressable device the plugin placed `b`'s PJRT buffer on (running the
// op that produces it first), for tests and diagnostics.
int placement_of(DeviceBuffer& b);

}  // namespace torch_tpu::runtime
