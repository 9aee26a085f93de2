#include "runtime/memory_stats.h"

#include <algorithm>
#include <mutex>
#include <vector>

namespace torch_tpu::runtime {

namespace {
std::mutex mu;
std::vector<MemoryStats>& table(int device) {
  static std::vector<MemoryStats> t;
  if (static_cast<int>(t.size()) <= device) t.resize(device + 1);
  return t;
}
}  // namespace

void record_alloc(int device, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu);
  MemoryStats& s = table(device)[device];
  s.allocated += bytes;
  s.peak = std::max(s.peak, s.allocated);
  ++s.num_allocs;
}

void record_free(int device, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu);
  MemoryStats& s = table(device)[device];
  s.allocated -= bytes;
  ++s.num_frees;
}

MemoryStats memory_stats(int device) {
  std::lock_guard<std::mutex> lock(mu);
  return table(device)[device];
}

void reset_peak(int device) {
  std::lock_guard<std::mutex> lock(mu);
  MemoryStats& s = table(device)[device];
  s.peak = s.allocated;
}

}  // namespace torch_tpu::runtime
