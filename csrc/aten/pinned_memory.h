#pragma once

#include <memory>

#include "aten/pch.h"
#include "pjrt/client.h"

namespace torch_tpu::aten {

// The host allocator behind pin_memory() for `tpu` (see pinned_memory.cpp).
c10::Allocator* pinned_allocator();
// Whether `p` points into a block of that allocator.
bool is_pinned(const void* p);
// The pinned block holding `p` is not freed before `host_done` is ready: a
// non_blocking upload is still reading it.
void keep_until_read(const void* p, std::unique_ptr<pjrt::Event> host_done);
// Waits until no upload reads pinned memory any more (synchronize).
void wait_for_pinned_reads();
// Uploads still reading pinned memory (for tests and benchmarks).
int64_t pending_pinned_reads();

}  // namespace torch_tpu::aten
