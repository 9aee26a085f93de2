// Items of a kernel shared between the calling thread and tasks on the XLA
// CPU plugin's intra-op pool, without oversubscribing its cores: items are
// claimed from one counter, the caller works too and then waits only for
// items already claimed, so it never waits on a task that has not started.
// A task that starts late finds no item left and returns before touching
// anything the caller owns.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

#include "xla/ffi/api/ffi.h"

namespace torch_tpu::kernels {

// How many helpers run_items schedules: at most one per `per_helper` items,
// and no more than the pool has threads.
inline int64_t helper_count(xla::ffi::ThreadPool& pool, int64_t items, int64_t per_helper) {
  return std::min<int64_t>(pool.num_threads(), items / std::max<int64_t>(per_helper, 1));
}

// Runs every item 0..items-1 once. `make_worker()` is called by a thread once
// it has claimed its first item, and returns the callable that runs items on
// that thread (so each thread may keep scratch space of its own); at most
// helper_count + 1 threads call it.
template <typename MakeWorker>
void run_items(xla::ffi::ThreadPool& pool, int64_t items, int64_t per_helper, MakeWorker& make_worker) {
  struct Counters {
    std::atomic<int64_t> next{0}, done{0};
  };
  auto counters = std::make_shared<Counters>();
  auto drain = [counters, items, &make_worker] {
    int64_t i = counters->next.fetch_add(1);
    if (i >= items) return;
    auto work = make_worker();
    for (; i < items; i = counters->next.fetch_add(1)) {
      work(i);
      counters->done.fetch_add(1, std::memory_order_release);
    }
  };
  const int64_t helpers = helper_count(pool, items, per_helper);
  for (int64_t h = 0; h < helpers; ++h) pool.Schedule(decltype(drain)(drain));
  drain();
  while (counters->done.load(std::memory_order_acquire) < items) std::this_thread::yield();
}

}  // namespace torch_tpu::kernels
