#include "runtime/memory_stats.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <vector>

namespace torch_tpu::runtime {

namespace {
std::mutex mu;
std::atomic<MemoryObserver> observer{nullptr};
// Not thread-local: a re-run node may launch on the compile worker.
std::atomic<int> oom_counting_paused{0};

MemoryStats& slot(int device) {
  static auto& t = *new std::vector<MemoryStats>;  // never destroyed: used during exit
  if (static_cast<int>(t.size()) <= device) t.resize(device + 1);
  return t[device];
}

void grow(Stat& s, int64_t n) {
  s.current += n;
  s.allocated += n;
  s.peak = std::max(s.peak, s.current);
}

void shrink(Stat& s, int64_t n) {
  s.current -= n;
  s.freed += n;
}
}  // namespace

void record_alloc(int device, int64_t bytes, const void* block) {
  {
    std::lock_guard<std::mutex> lock(mu);
    MemoryStats& s = slot(device);
    grow(s.bytes, bytes);
    grow(s.blocks, 1);
  }
  if (auto f = observer.load()) f(device, block, bytes, true);
}

void record_free(int device, int64_t bytes, const void* block) {
  {
    std::lock_guard<std::mutex> lock(mu);
    MemoryStats& s = slot(device);
    shrink(s.bytes, bytes);
    shrink(s.blocks, 1);
  }
  if (auto f = observer.load()) f(device, block, bytes, false);
}

OomAlreadyCounted::OomAlreadyCounted() { ++oom_counting_paused; }
OomAlreadyCounted::~OomAlreadyCounted() { --oom_counting_paused; }

void record_oom(int device) {
  if (oom_counting_paused.load() > 0) return;
  std::lock_guard<std::mutex> lock(mu);
  ++slot(device).num_ooms;
}

MemoryStats memory_stats(int device) {
  std::lock_guard<std::mutex> lock(mu);
  return slot(device);
}

void reset_peak(int device) {
  std::lock_guard<std::mutex> lock(mu);
  MemoryStats& s = slot(device);
  s.bytes.peak = s.bytes.current;
  s.blocks.peak = s.blocks.current;
}

void reset_accumulated(int device) {
  std::lock_guard<std::mutex> lock(mu);
  MemoryStats& s = slot(device);
  s.bytes.allocated = s.bytes.freed = 0;
  s.blocks.allocated = s.blocks.freed = 0;
  s.num_ooms = 0;
}

void set_memory_observer(MemoryObserver f) { observer.store(f); }

}  // namespace torch_tpu::runtime
