// Bytes held by live device buffers, per device: the one source of what
// torch.tpu.memory_*, torch.accelerator.memory.* and memory_summary() report.
// Only materialized buffers count; deferred ones hold no device memory yet.
//
// PJRT allocates each buffer itself and frees it when the buffer is
// destroyed; there is no pool of ours in between. So reserved, active and
// allocated bytes are the same figure, and there are no allocation retries.
#pragma once

#include <cstdint>

namespace torch_tpu::runtime {

// current / peak / allocated (cumulative increase) / freed (cumulative decrease)
struct Stat {
  int64_t current = 0, peak = 0, allocated = 0, freed = 0;
};

struct MemoryStats {
  Stat bytes;   // allocated_bytes == reserved_bytes == active_bytes
  Stat blocks;  // allocation == segment == active (one buffer, one block)
  int64_t num_ooms = 0;
};

// `block` identifies the buffer (for the memory history).
void record_alloc(int device, int64_t bytes, const void* block);
void record_free(int device, int64_t bytes, const void* block);
void record_oom(int device);
// While one is alive, record_oom counts nothing: a failed graph that is
// split and run again node by node meets its out-of-memory a second time,
// and the user saw one.
class OomAlreadyCounted {
 public:
  OomAlreadyCounted();
  ~OomAlreadyCounted();
  OomAlreadyCounted(const OomAlreadyCounted&) = delete;
  OomAlreadyCounted& operator=(const OomAlreadyCounted&) = delete;
};
MemoryStats memory_stats(int device);
void reset_peak(int device);
// Zeroes the cumulative figures (allocated, freed, num_ooms); current stays.
void reset_accumulated(int device);

// Called after each alloc/free (outside the statistics' lock) while set: the
// memory history of aten/ records Python stacks with it.
using MemoryObserver = void (*)(int device, const void* block, int64_t bytes, bool alloc);
void set_memory_observer(MemoryObserver observer);

}  // namespace torch_tpu::runtime
