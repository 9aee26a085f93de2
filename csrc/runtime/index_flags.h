// TORCH_TPU_CHECK_INDICES=1: indexing ops check their indices on the device,
// where a CUDA kernel would assert. A device cannot raise, so each check is
// a one-element flag computed beside the op (in its graph, under
// defer_and_fuse) and watched here. Watched flags are read, one byte each,
// when a value next leaves the device (DeviceBuffer::to_host) and at
// synchronize, once the graph computing them has run: a set flag raises
// IndexError naming the op and its Python line, and poisons the op's results
// so that every later use of them raises too. A flag whose graph has not run
// is left for a later read, so checking never flushes pending work.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/device_buffer.h"

namespace torch_tpu::runtime {

void watch_index_flag(std::shared_ptr<DeviceBuffer> flag, std::string message,
                      std::vector<std::weak_ptr<DeviceBuffer>> results);
// Reads the flags that are computed; throws Error(Index) for the first set.
void check_index_flags();

}  // namespace torch_tpu::runtime
