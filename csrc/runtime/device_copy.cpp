#include "runtime/device_copy.h"

#include "common/error.h"
#include "runtime/counters.h"
#include "runtime/runtime.h"

namespace torch_tpu::runtime {

std::shared_ptr<DeviceBuffer> copy_to_device(const TensorInput& src, int device) {
  Runtime& rt = Runtime::get();
  rt.check_device(device);
  std::shared_ptr<DeviceBuffer> whole = read_contiguous(src);
  const std::string producer = "copy from tpu:" + std::to_string(whole->device());
  if (whole->state() == DeviceBuffer::State::Error)
    return DeviceBuffer::error(whole->type(), whole->error_message(), device);
  const pjrt::Buffer* from = nullptr;
  try {
    from = &whole->buffer();  // runs a pending producer (defer_and_fuse)
  } catch (const Error& e) {
    return DeviceBuffer::error(whole->type(), e.what(), device);
  }
  count("bytes_device_to_device", whole->type().nbytes());
  auto copy = DeviceBuffer::materialized(rt.client().copy_to_device(*from, device), producer, device);
  if (whole->padded()) copy->set_padding(whole->padding().dim, whole->padding().size);
  return copy;
}

int placement_of(DeviceBuffer& b) { return Runtime::get().client().device_of(b.buffer()); }

}  // namespace torch_tpu::runtime
