// Reusable host memory for the host-staged path. A fresh multi-megabyte host
// tensor costs a page fault per 4 KiB page the first time it is written,
// which on small machines takes longer than the copy itself; staging every
// collective through new memory made tpu_dist several times slower than Gloo
// on the same bytes. The pool keeps a few byte buffers and hands out views of
// them. A buffer is free again once nothing but the pool refers to its
// storage (every view handed out has been released, including any held by a
// Gloo Work still in flight), so a buffer is never reused while in use.
#pragma once

#include <mutex>
#include <vector>

#include "aten/pch.h"

namespace torch_tpu::distributed {

class HostPool {
 public:
  // A flat uint8 CPU tensor of `nbytes`, contents undefined.
  at::Tensor take(int64_t nbytes);

 private:
  std::mutex mu_;
  std::vector<at::Tensor> buffers_;
};

}  // namespace torch_tpu::distributed
