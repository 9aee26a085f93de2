// Which matrix products run the GEMM platform kernel (kernels/gemm.cpp:
// MKL) instead of XLA's dot: the one table of shape classes, in
// gemm_kernel.cpp, written from measurements.
#pragma once

#include <optional>

#include "lowering/common.h"

namespace torch_tpu::lowering {

// lhs @ rhs ([M, K] @ [K, N], or [B, M, K] @ [B, K, N] when batched) as
// the kernel's custom call, f32 for f32 and bf16 operands (the accumulator
// XLA's dot is given), where the kernel runs here and the table says it
// beats XLA's dot; nullopt elsewhere, and the caller emits the dot.
std::optional<Value> gemm_kernel(Context& ctx, const Value& lhs, const Value& rhs, bool batched);

}  // namespace torch_tpu::lowering
