#include "runtime/device_timeline.h"

#include <time.h>

#include <algorithm>
#include <deque>
#include <mutex>
#include <vector>

#include "common/error.h"
#include "runtime/profiler_events.h"

namespace torch_tpu::runtime {

namespace {
constexpr size_t kRecent = 512;  // launches kept per device for busy_fraction
std::mutex mu;
// Never destroyed: the plugin's threads end launches during exit.
// per device
std::vector<std::shared_ptr<LaunchTiming>>& last = *new std::vector<std::shared_ptr<LaunchTiming>>;
std::vector<std::deque<std::shared_ptr<LaunchTiming>>>& recent =
    *new std::vector<std::deque<std::shared_ptr<LaunchTiming>>>;  // per device, oldest first

// Sets `t`'s end unless a later launch already did.
void end_at(LaunchTiming& t, int64_t ns) {
  int64_t unset = 0;
  if (t.end_ns.compare_exchange_strong(unset, std::max(ns, t.launch_ns + 1), std::memory_order_acq_rel))
    t.end_ns.notify_all();
}

void stamp(bool failed, void* arg) {
  auto* held = static_cast<std::shared_ptr<LaunchTiming>*>(arg);
  LaunchTiming& t = **held;
  t.failed.store(failed);
  const int64_t ns = now_ns();
  end_at(t, ns);
  for (auto p = t.previous.lock(); p && !p->done(); p = p->previous.lock()) end_at(*p, ns);
  delete held;
}
}  // namespace

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void LaunchTiming::wait() const {
  for (int64_t v = end_ns.load(std::memory_order_acquire); v == 0;
       v = end_ns.load(std::memory_order_acquire))
    end_ns.wait(0);
}

void note_launch_timing(const pjrt::Event* done, int device, LaunchLabel label) {
  auto t = std::make_shared<LaunchTiming>();
  t->device = device;
  t->name = std::move(label.name);
  t->ops = label.ops;
  t->cache = std::move(label.cache);
  t->correlation = label.correlation;
  t->launch_ns = now_ns();
  {
    std::lock_guard<std::mutex> lock(mu);
    if (static_cast<int>(last.size()) <= device) {
      last.resize(device + 1);
      recent.resize(device + 1);
    }
    t->previous = last[device];
    last[device] = t;
    recent[device].push_back(t);
    if (recent[device].size() > kRecent) recent[device].pop_front();
  }
  if (tracing()) record_launch(t);
  if (!done) {
    end_at(*t, t->launch_ns + 1);
    return;
  }
  auto* held = new std::shared_ptr<LaunchTiming>(t);
  try {
    done->on_ready(&stamp, held);
  } catch (const Error&) {
    delete held;  // never stamped by the plugin: stamp it now, or waiters would hang
    end_at(*t, now_ns());
  }
}

std::shared_ptr<LaunchTiming> last_launch(int device) {
  std::lock_guard<std::mutex> lock(mu);
  return device < static_cast<int>(last.size()) ? last[device] : nullptr;
}

double busy_fraction(int device, double window_s) {
  std::vector<std::shared_ptr<LaunchTiming>> launches;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (device < static_cast<int>(recent.size()))
      launches.assign(recent[device].begin(), recent[device].end());
  }
  int64_t now = now_ns();
  int64_t from = now - static_cast<int64_t>(window_s * 1e9);
  int64_t busy = 0, covered_until = from;
  for (const auto& l : launches) {
    int64_t end = l->done() ? l->end_ns.load() : now;  // still running: busy until now
    int64_t start = std::max(l->launch_ns, covered_until);
    if (end > start) busy += end - start;
    covered_until = std::max(covered_until, end);
  }
  return window_s > 0 ? std::min(1.0, static_cast<double>(busy) / (window_s * 1e9)) : 0.0;
}

}  // namespace torch_tpu::runtime
