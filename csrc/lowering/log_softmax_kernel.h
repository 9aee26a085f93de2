// Which log_softmax calls (and backwards) run the log_softmax platform kernel
// (kernels/log_softmax.cpp: one pass over the data) instead of the composite
// of lowering/normalization.cpp: the shape classes, in log_softmax_kernel.cpp,
// written from measurements.
#pragma once

#include <optional>

#include "lowering/common.h"

namespace torch_tpu::lowering {

// log_softmax of f32 `x` over `dim` as the kernel's custom call, where `dim`
// is the last, the kernel runs here and the table says it beats the
// composite; nullopt elsewhere, and the caller emits the composite.
std::optional<Value> log_softmax_kernel(Context& ctx, const Value& x, int64_t dim);

// grad - exp(out) * sum(grad) over `dim`, likewise, for f32 grad and out.
std::optional<Value> log_softmax_backward_kernel(Context& ctx, const Value& grad, const Value& out, int64_t dim);

}  // namespace torch_tpu::lowering
