#pragma once

#include "aten/pch.h"

namespace torch_tpu::aten {

// Debug mode with TORCH_TPU_DEBUG_COMPARE_CPU=1: before a tpu op runs, its
// arguments are copied to the host; after, the same op runs on the CPU and
// each result is compared with the tolerance table. The first op that differs
// raises, naming the op, its Python line, and the largest errors.
std::vector<c10::IValue> host_copies(const std::vector<c10::IValue>& values);
// Test hook (see debug_compare.cpp).
void offset_next_reference(double delta);
void compare_with_cpu(const c10::OperatorHandle& op, std::vector<c10::IValue> host_args,
                      const std::vector<int>& written, const std::vector<at::Tensor>& tpu_results);

}  // namespace torch_tpu::aten
