// Reductions Gloo cannot do itself (int16, the unsigned types wider than a
// byte, complex PRODUCT, integer AVG): every rank all-gathers the operands as
// bytes and reduces the stacked [world, ...] tensor on the host, in a fixed
// rank order, so all ranks get bit-identical results.
#pragma once

#include "aten/pch.h"

#include <torch/csrc/distributed/c10d/Types.hpp>

namespace torch_tpu::distributed {

// `stacked` is [world_size, ...] in the operands' dtype; returns [...] in the
// same dtype. Throws c10::Error naming the collective for undefined
// combinations (MIN/MAX of complex numbers, bitwise ops on floats).
at::Tensor reduce_stacked(const at::Tensor& stacked, c10d::ReduceOp::RedOpType op,
                          const char* collective);

}  // namespace torch_tpu::distributed
