// PrivateUse1 hooks: what torch.accelerator, generators, pinned memory and
// storage resizing ask of the `tpu` backend.
#include "aten/generator.h"
#include "aten/pinned_memory.h"
#include "aten/storage_ops.h"
#include "aten/tensor_bridge.h"
#include "runtime/runtime.h"

namespace torch_tpu::aten {

namespace {

struct TpuHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override {
    try {
      return runtime::Runtime::get().device_count() > 0;
    } catch (...) {
      return false;
    }
  }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  c10::DeviceIndex deviceCount() const override {
    return c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)->deviceCount();
  }
  void setCurrentDevice(c10::DeviceIndex d) const override {
    c10::impl::getDeviceGuardImpl(c10::DeviceType::PrivateUse1)
        ->setDevice(c10::Device(c10::DeviceType::PrivateUse1, d));
  }
  c10::DeviceIndex getCurrentDevice() const override {
    return static_cast<c10::DeviceIndex>(current_device());
  }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    c10::DeviceIndex old = getCurrentDevice();
    setCurrentDevice(d);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override {
    return exchangeDevice(d);
  }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex index) const override {
    return default_generator(index);
  }
  at::Generator getNewGenerator(c10::DeviceIndex index) const override {
    return at::make_generator<TpuGenerator>(index < 0 ? current_device() : index);
  }
  at::Device getDeviceFromPtr(void* data) const override {
    return c10::Device(c10::DeviceType::PrivateUse1,
                       static_cast<c10::DeviceIndex>(static_cast<runtime::Storage*>(data)->device));
  }
  // pin_memory() / is_pinned() / DataLoader(pin_memory=True): see pinned_memory.cpp.
  bool isPinnedPtr(const void* data) const override { return is_pinned(data); }
  c10::Allocator* getPinnedMemoryAllocator() const override { return pinned_allocator(); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    resize_storage_bytes(storage, static_cast<int64_t>(newsize));
  }
};

struct Registerer {
  Registerer() { at::RegisterPrivateUse1HooksInterface(new TpuHooks()); }
} registerer;

}  // namespace

}  // namespace torch_tpu::aten
