// c10's device guard for `tpu`: the current device is per thread, like CUDA's.
// There is one stream per device (PJRT orders work on a device itself), so
// stream and event calls are trivial.
#include "aten/tensor_bridge.h"
#include "runtime/runtime.h"

namespace torch_tpu::aten {

namespace {

int checked_count() noexcept {
  try {
    return runtime::Runtime::get().device_count();
  } catch (...) {
    return 0;
  }
}

struct TpuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;

  c10::DeviceType type() const override { return kType; }
  c10::Device exchangeDevice(c10::Device d) const override {
    c10::Device old = getDevice();
    setDevice(d);
    return old;
  }
  c10::Device getDevice() const override {
    return c10::Device(kType, static_cast<c10::DeviceIndex>(current_device()));
  }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kType, "expected a tpu device, got ", d);
    if (d.index() < 0) return;
    translate_errors([&] { runtime::Runtime::get().check_device(d.index()); });
    set_current_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0) set_current_device(d.index());
  }
  c10::Stream getStream(c10::Device d) const override {
    return c10::Stream(c10::Stream::DEFAULT, d);
  }
  c10::Stream exchangeStream(c10::Stream s) const override {
    return c10::Stream(c10::Stream::DEFAULT, s.device());
  }
  c10::DeviceIndex deviceCount() const noexcept override {
    return static_cast<c10::DeviceIndex>(checked_count());
  }
  void record(void**, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag) const override {}
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void*) const override { return true; }
  void destroyEvent(void*, const c10::DeviceIndex) const noexcept override {}
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream& s) const override { synchronizeDevice(s.device_index()); }
  // An event stands for everything issued before it on the one stream.
  void synchronizeEvent(void*) const override { synchronizeDevice(current_device()); }
  void synchronizeDevice(const c10::DeviceIndex index) const override {
    translate_errors([&] { runtime::Runtime::get().synchronize(index < 0 ? current_device() : index); });
  }
};

}  // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, TpuGuardImpl);

}  // namespace torch_tpu::aten
