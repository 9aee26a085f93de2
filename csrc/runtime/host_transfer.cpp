#include "runtime/host_transfer.h"

#include "runtime/counters.h"
#include "runtime/runtime.h"

namespace torch_tpu::runtime {

std::shared_ptr<DeviceBuffer> upload_async(const void* data, const hlo::TensorType& type,
                                           int device, std::unique_ptr<pjrt::Event>* host_done) {
  Runtime& rt = Runtime::get();
  rt.check_device(device);
  count("bytes_to_device", type.nbytes());
  auto buffer = rt.client().from_host(data, type, device, host_done);
  return DeviceBuffer::materialized(std::move(buffer), "copy from pinned host memory", device);
}

}  // namespace torch_tpu::runtime
