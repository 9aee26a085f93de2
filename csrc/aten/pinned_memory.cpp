// Pinned host memory for `tpu`: what pin_memory(), is_pinned() and
// DataLoader(pin_memory=True) use (through the PrivateUse1 hooks).
//
// A block is page-aligned host memory, page-locked with mlock() where the
// process's RLIMIT_MEMLOCK allows it (when it does not, the block is still
// ours and still read directly by PJRT; only the OS may page it out). Every
// block is in a registry of address ranges, so is_pinned() answers for any
// pointer into a block, as CUDA's does.
//
// Lifetime rule: a copy to the device with non_blocking=True from a pinned
// tensor hands PJRT the tensor's memory and returns before PJRT has read it
// (kImmutableUntilTransferCompletes). PJRT signals an event once it no
// longer needs the bytes. The block keeps those events, and when its tensor
// dies first the free waits for them on the release thread, so the memory is
// never reused while a transfer reads it. Writing into the pinned tensor
// before the copy has finished races with it, as on CUDA;
// torch.tpu.synchronize() waits for every such read.
#include "aten/pinned_memory.h"

#include <ATen/core/CachingHostAllocator.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "common/error.h"
#include "common/release_queue.h"

namespace torch_tpu::aten {

namespace {

struct Block {
  void* data = nullptr;
  size_t size = 0;
  bool locked = false;
  std::vector<std::unique_ptr<pjrt::Event>> readers;  // uploads still reading it
};

std::mutex mu;
std::map<uintptr_t, Block*> blocks;  // by start address

constexpr size_t kPage = 4096;

bool done(const pjrt::Event& e) {
  try {
    return e.ready();
  } catch (const Error&) {
    return true;  // a failed transfer reads nothing any more
  }
}

void drop_done(Block* b) {
  auto& r = b->readers;
  r.erase(std::remove_if(r.begin(), r.end(), [](const auto& e) { return done(*e); }), r.end());
}

void release(Block* b) {
  for (auto& e : b->readers) {
    try {
      e->await();
    } catch (const Error&) {
    }
  }
  if (b->locked) munlock(b->data, b->size);
  std::free(b->data);
  delete b;
}

void free_block(void* ctx) {
  auto* b = static_cast<Block*>(ctx);
  {
    std::lock_guard<std::mutex> lock(mu);
    blocks.erase(reinterpret_cast<uintptr_t>(b->data));
    drop_done(b);
  }
  if (b->readers.empty()) return release(b);
  release_later([b] { release(b); }, b->size);
}

Block* find(const void* p) {
  auto a = reinterpret_cast<uintptr_t>(p);
  auto it = blocks.upper_bound(a);
  if (it == blocks.begin()) return nullptr;
  --it;
  Block* b = it->second;
  return a < it->first + std::max<size_t>(b->size, 1) ? b : nullptr;
}

// A HostAllocator (registered for PrivateUse1 below), because
// torch.accelerator.empty_host_cache() and host memory stats reach it through
// that interface; a plain c10::Allocator there is called through the wrong
// vtable (a segfault, e.g. in vLLM's shutdown). Nothing is cached: a block is
// freed when its tensor dies, so emptying the cache has nothing to do.
class PinnedAllocator final : public at::HostAllocator {
 public:
  bool record_event(void*, void*, c10::Stream) override { return false; }
  void empty_cache() override {}
  at::HostStats get_stats() override { return {}; }
  void reset_accumulated_stats() override {}
  void reset_peak_stats() override {}

  c10::DataPtr allocate(size_t nbytes) override {
    auto* b = new Block;
    b->size = nbytes;
    size_t rounded = (std::max<size_t>(nbytes, 1) + kPage - 1) / kPage * kPage;
    if (posix_memalign(&b->data, kPage, rounded) != 0) {
      delete b;
      TORCH_CHECK_WITH(OutOfMemoryError, false, "tpu: cannot allocate ", nbytes,
                       " bytes of pinned host memory");
    }
    b->locked = nbytes > 0 && mlock(b->data, nbytes) == 0;
    {
      std::lock_guard<std::mutex> lock(mu);
      blocks[reinterpret_cast<uintptr_t>(b->data)] = b;
    }
    return {b->data, b, &free_block, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
  void copy_data(void* dst, const void* src, std::size_t n) const override {
    default_copy_data(dst, src, n);
  }
};

PinnedAllocator allocator;
REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &allocator)

}  // namespace

c10::Allocator* pinned_allocator() { return &allocator; }

bool is_pinned(const void* p) {
  if (p == nullptr) return false;
  std::lock_guard<std::mutex> lock(mu);
  return find(p) != nullptr;
}

void keep_until_read(const void* p, std::unique_ptr<pjrt::Event> host_done) {
  if (!host_done) return;
  std::lock_guard<std::mutex> lock(mu);
  Block* b = find(p);
  TPU_CHECK(b, ErrorKind::Runtime, "keep_until_read: not pinned memory");
  drop_done(b);
  b->readers.push_back(std::move(host_done));
}

int64_t pending_pinned_reads() {
  std::lock_guard<std::mutex> lock(mu);
  int64_t n = 0;
  for (auto& [start, b] : blocks) {
    drop_done(b);
    n += static_cast<int64_t>(b->readers.size());
  }
  return n;
}

void wait_for_pinned_reads() {
  {
    // Under the lock no block is freed, so every event is still owned.
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [start, b] : blocks) {
      for (auto& e : b->readers) {
        try {
          e->await();
        } catch (const Error&) {
        }
      }
      b->readers.clear();
    }
  }
  drain_releases();  // blocks whose tensors died while a read was running
}

}  // namespace torch_tpu::aten
