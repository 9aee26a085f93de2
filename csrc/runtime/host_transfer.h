// Host -> device uploads that do not wait for the copy (non_blocking=True
// from pinned memory). The plugin reads the host memory after the call
// returns, so its owner must keep it alive and unchanged until `host_done`
// is ready (aten/pinned_memory.cpp holds pinned blocks until then).
#pragma once

#include <memory>

#include "hlo/types.h"
#include "pjrt/client.h"
#include "runtime/device_buffer.h"

namespace torch_tpu::runtime {

std::shared_ptr<DeviceBuffer> upload_async(const void* data, const hlo::TensorType& type,
                                           int device, std::unique_ptr<pjrt::Event>* host_done);

}  // namespace torch_tpu::runtime
