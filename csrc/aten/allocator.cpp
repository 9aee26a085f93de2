// The c10 allocator of `tpu`: it hands out runtime::Storage objects, never
// device memory (see runtime/storage.h). Device memory is allocated by PJRT
// when a program produces a buffer. It is a c10::DeviceAllocator so that
// torch.accelerator.memory.* reads the same statistics (runtime/memory_stats.h)
// as torch.tpu.memory_*.
#include <c10/core/CachingDeviceAllocator.h>

#include "aten/tensor_bridge.h"
#include "common/release_queue.h"
#include "runtime/device_memory.h"
#include "runtime/memory_stats.h"
#include "runtime/runtime.h"

namespace torch_tpu::aten {

namespace {

void delete_storage(void* ctx) { delete static_cast<runtime::Storage*>(ctx); }

void fill(c10::CachingDeviceAllocator::StatArray& a, const runtime::Stat& s) {
  auto& all = a[static_cast<size_t>(c10::CachingDeviceAllocator::StatType::AGGREGATE)];
  all.current = s.current;
  all.peak = s.peak;
  all.allocated = s.allocated;
  all.freed = s.freed;
}

void check_index(c10::DeviceIndex device) {
  translate_errors([&] { runtime::Runtime::get().check_device(device); });
}

class TpuAllocator final : public c10::DeviceAllocator {
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

  // Statistics are valid (zero) before the plugin is loaded.
  bool initialized() override { return true; }
  // There is no cache of ours: PJRT frees a buffer when it is destroyed. What
  // can be returned is the buffers dropped tensors left on the release thread.
  void emptyCache(c10::MempoolId_t) override {
    if (runtime::Runtime::initialized()) drain_releases();
  }
  void recordStream(const c10::DataPtr&, c10::Stream) override {}

  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    check_index(device);
    runtime::MemoryStats s = runtime::memory_stats(device);
    c10::CachingDeviceAllocator::DeviceStats d;
    fill(d.allocated_bytes, s.bytes);
    fill(d.reserved_bytes, s.bytes);
    fill(d.active_bytes, s.bytes);
    fill(d.requested_bytes, s.bytes);
    fill(d.allocation, s.blocks);
    fill(d.segment, s.blocks);
    fill(d.active, s.blocks);
    d.num_ooms = s.num_ooms;
    d.num_device_alloc = s.blocks.allocated;
    d.num_device_free = s.blocks.freed;
    return d;
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override {
    check_index(device);
    runtime::reset_accumulated(device);
  }
  void resetPeakStats(c10::DeviceIndex device) override {
    check_index(device);
    runtime::reset_peak(device);
  }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    return translate_errors([&] {
      runtime::DeviceMemoryInfo m = runtime::device_memory_info(device);
      return std::pair<size_t, size_t>(static_cast<size_t>(m.free), static_cast<size_t>(m.total));
    });
  }
};

TpuAllocator allocator;

}  // namespace

c10::Allocator* tpu_allocator() { return &allocator; }

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &allocator);

}  // namespace torch_tpu::aten
