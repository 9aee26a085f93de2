// CPU references for ops that only backends define. Debug mode compares each
// op with the CPU by calling the same operator there; an op such as SDPA's
// _scaled_dot_product_fused_attention_overrideable has no CPU kernel, so its
// reference is computed from PyTorch's math path instead.
#pragma once

#include <optional>

#include "aten/pch.h"

namespace torch_tpu::aten {

// The CPU's results for `op` (schema name with overload) on host copies of its
// arguments, in the op's output order (a prefix of them: results it does not
// model are left out, and a dropout draw leaves none); nullopt when no
// reference is known.
std::optional<std::vector<at::Tensor>> backend_only_reference(const std::string& op,
                                                              const std::vector<c10::IValue>& args);

}  // namespace torch_tpu::aten
