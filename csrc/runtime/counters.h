// Counters for torch_tpu.metrics(): ops recorded, flushes by reason, cache
// hits and misses, compilations and their time, bytes moved...
//
// Every op counts several of them, so a count must cost next to nothing: a
// name is interned once into a slot that lives as long as the process, and
// a count is one relaxed atomic add on it. Hot call sites keep a Counter
// made once (a function-local static); names spelled at run time (flush
// reasons) go through count(), which finds the slot under a lock.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace torch_tpu::runtime {

class Counter {
 public:
  explicit Counter(std::string_view name);
  void add(int64_t n = 1) const { slot_->fetch_add(n, std::memory_order_relaxed); }

 private:
  std::atomic<int64_t>* slot_;
};

void count(std::string_view name, int64_t n = 1);
// The counters counted since start or the last reset (those at zero left out).
std::map<std::string, int64_t> counter_values();
void reset_counters();

}  // namespace torch_tpu::runtime
