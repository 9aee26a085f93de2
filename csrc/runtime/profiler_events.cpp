#include "runtime/profiler_events.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>

namespace torch_tpu::runtime {

namespace {
std::atomic<bool> on{false};
std::mutex mu;
DeviceTrace& trace = *new DeviceTrace;  // never destroyed: launches end during exit
thread_local std::vector<uint64_t> correlations;
}  // namespace

bool tracing() { return on.load(std::memory_order_relaxed); }

void start_trace() {
  std::lock_guard<std::mutex> lock(mu);
  trace = DeviceTrace{};
  on.store(true);
}

DeviceTrace stop_trace() {
  std::lock_guard<std::mutex> lock(mu);
  on.store(false);
  return std::move(trace);
}

void record_launch(std::shared_ptr<LaunchTiming> launch) {
  std::lock_guard<std::mutex> lock(mu);
  if (on.load()) trace.launches.push_back(std::move(launch));
}

void record_compile(CompileSpan span) {
  std::lock_guard<std::mutex> lock(mu);
  if (on.load()) trace.compiles.push_back(std::move(span));
}

void push_correlation(uint64_t id) { correlations.push_back(id); }
void pop_correlation() {
  if (!correlations.empty()) correlations.pop_back();
}
uint64_t current_correlation() { return correlations.empty() ? 0 : correlations.back(); }

std::vector<Span> device_spans(const std::vector<std::shared_ptr<LaunchTiming>>& launches) {
  std::vector<Span> spans;
  spans.reserve(launches.size());
  std::map<int, int64_t> busy_until;  // per device
  for (const auto& l : launches) {
    int64_t end = l->end_ns.load();
    int64_t start = std::min(std::max(l->launch_ns, busy_until[l->device]), end);
    busy_until[l->device] = std::max(busy_until[l->device], end);
    spans.push_back({start, end});
  }
  return spans;
}

}  // namespace torch_tpu::runtime
