// c10's device guard for `tpu`: the current device is per thread, like CUDA's.
// There is one stream per device (PJRT orders work on a device itself), so
// stream calls are trivial.
//
// Events: record() runs pending deferred work, then marks the device's last
// launched program (runtime/device_timeline.h). The event is reached when that
// program has finished, and its time is the later of that finish and the
// record() itself (an idle device reaches an event at once), so
// elapsed_time() between two events is the device time of the work issued
// between them.
#include "aten/tensor_bridge.h"
#include "runtime/device_timeline.h"
#include "runtime/runtime.h"

namespace torch_tpu::aten {

namespace {

struct TimingMarker {
  int64_t record_ns = 0;
  std::shared_ptr<runtime::LaunchTiming> after;  // null: nothing launched before it

  bool reached() const { return !after || after->done(); }
  int64_t time_ns() const { return after ? std::max(record_ns, after->end_ns.load()) : record_ns; }
};

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
  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag) const override {
    int device = device_index >= 0 ? device_index
                                   : stream.device_index() >= 0 ? stream.device_index()
                                                                : current_device();
    if (!*event) *event = new TimingMarker();
    auto* m = static_cast<TimingMarker*>(*event);
    translate_errors([&] {
      runtime::Runtime::get().check_device(device);
      runtime::flush_all("event_record");
    });
    m->after = runtime::last_launch(device);
    m->record_ns = runtime::now_ns();
  }
  // One stream per device: work recorded before an event already precedes
  // whatever is issued after the wait.
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void* event) const override {
    return !event || static_cast<TimingMarker*>(event)->reached();
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    delete static_cast<TimingMarker*>(event);
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start && end, "Both events must be recorded before calculating elapsed time.");
    auto* a = static_cast<TimingMarker*>(start);
    auto* b = static_cast<TimingMarker*>(end);
    return static_cast<double>(b->time_ns() - a->time_ns()) / 1e6;
  }
  bool queryStream(const c10::Stream&) const override { return true; }
  void synchronizeStream(const c10::Stream& s) const override { synchronizeDevice(s.device_index()); }
  void synchronizeEvent(void* event) const override {
    if (auto* m = static_cast<TimingMarker*>(event); m && m->after) m->after->wait();
  }
  void synchronizeDevice(const c10::DeviceIndex index) const override {
    translate_errors([&] { runtime::Runtime::get().synchronize(index < 0 ? current_device() : index); });
  }
};

}  // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, TpuGuardImpl);

}  // namespace torch_tpu::aten
