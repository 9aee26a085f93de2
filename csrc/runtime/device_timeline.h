// When launched programs finish on each device, on the host clock that
// torch's profiler uses (CLOCK_REALTIME, ns).
//
// PJRT gives no device timestamps, only a completion event per execution.
// Each launch registers a callback on that event which stamps the moment it
// became ready. Timing events (torch.tpu.Event) read the stamp of the last
// launch before their record(); the profiler turns the stamps of the
// launches made while it runs into device spans (runtime/profiler_events.h).
// A program's start is not observed: a device runs its programs in launch
// order, so a program starts when it was launched or when the previous one
// on its device finished, whichever is later. For the same reason a stamp
// also ends every earlier launch not stamped yet: the plugin's callbacks
// may run out of order on a busy host, and stamps must not.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "pjrt/client.h"

namespace torch_tpu::runtime {

int64_t now_ns();

struct LaunchTiming {
  int device = 0;
  std::string name;            // the program's ops (profiler event name)
  int ops = 0;
  std::string cache;           // program cache: "hit", "miss" (compiled or loaded from disk first)
  uint64_t correlation = 0;    // profiler correlation id of the op that launched it
  int64_t launch_ns = 0;
  std::atomic<int64_t> end_ns{0};  // 0 until the execution finished
  std::atomic<bool> failed{false};
  std::weak_ptr<LaunchTiming> previous;  // the launch before it on its device

  bool done() const { return end_ns.load(std::memory_order_acquire) != 0; }
  void wait() const;  // until done()
};

struct LaunchLabel {
  std::string name;
  int ops = 0;
  std::string cache;
  uint64_t correlation = 0;
};

// Stamps `done` (null: the plugin gave no event; the launch counts as
// finished now) and makes it the device's last launch.
void note_launch_timing(const pjrt::Event* done, int device, LaunchLabel label);
// The device's most recent launch (null before the first).
std::shared_ptr<LaunchTiming> last_launch(int device);
// Fraction of the last `window_s` seconds during which the device ran
// programs, from its most recent launches (torch.tpu.utilization()).
double busy_fraction(int device, double window_s);

}  // namespace torch_tpu::runtime
