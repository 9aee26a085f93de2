// Bytes held by live device buffers, per device: what memory_allocated() and
// friends report. Only materialized buffers count; deferred ones hold no
// device memory yet.
#pragma once

#include <cstdint>

namespace torch_tpu::runtime {

struct MemoryStats {
  int64_t allocated = 0;
  int64_t peak = 0;
  int64_t num_allocs = 0;
  int64_t num_frees = 0;
};

void record_alloc(int device, int64_t bytes);
void record_free(int device, int64_t bytes);
MemoryStats memory_stats(int device);
void reset_peak(int device);

}  // namespace torch_tpu::runtime
