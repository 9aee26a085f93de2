// The c10 allocator of `tpu`: it hands out runtime::Storage objects, never
// device memory (see runtime/storage.h). Device memory is allocated by PJRT
// when a program produces a buffer.
#include "aten/tensor_bridge.h"
#include "runtime/runtime.h"

namespace torch_tpu::aten {

namespace {

void delete_storage(void* ctx) { delete static_cast<runtime::Storage*>(ctx); }

class TpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    int device = current_device();
    auto* storage = new runtime::Storage(static_cast<int64_t>(nbytes), device);
    return {storage, storage, &delete_storage,
            c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device))};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void*, const void*, std::size_t) const override {
    TORCH_CHECK(false, "tpu storages cannot be copied bytewise on the host; use Tensor.copy_");
  }
};

TpuAllocator allocator;

}  // namespace

c10::Allocator* tpu_allocator() { return &allocator; }

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &allocator);

}  // namespace torch_tpu::aten
