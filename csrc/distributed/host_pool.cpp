#include "distributed/host_pool.h"

namespace torch_tpu::distributed {

namespace {

// Enough for a collective's input and output plus one send in flight; more
// would only pin memory.
constexpr size_t kMaxBuffers = 4;

bool is_free(const at::Tensor& buffer) { return buffer.storage().use_count() == 1; }

}  // namespace

at::Tensor HostPool::take(int64_t nbytes) {
  std::lock_guard<std::mutex> lock(mu_);
  // The smallest free buffer that fits, so large buffers stay for large asks.
  at::Tensor* best = nullptr;
  for (auto& b : buffers_)
    if (b.numel() >= nbytes && is_free(b) && (!best || b.numel() < best->numel())) best = &b;
  if (best) return best->narrow(0, 0, nbytes);

  at::Tensor fresh = at::empty({nbytes}, at::kByte);
  if (buffers_.size() < kMaxBuffers) {
    buffers_.push_back(fresh);
  } else {
    // Replace the smallest free buffer; when all are busy the new one is
    // used once and dropped.
    at::Tensor* smallest = nullptr;
    for (auto& b : buffers_)
      if (is_free(b) && (!smallest || b.numel() < smallest->numel())) smallest = &b;
    if (smallest && smallest->numel() < nbytes) *smallest = fresh;
  }
  return fresh.narrow(0, 0, nbytes);
}

}  // namespace torch_tpu::distributed
