// Which sums run the block_sum platform kernel (kernels/block_sum.cpp)
// before XLA's reduce: the table of shape classes, in sum_kernel.cpp,
// written from measurements.
#pragma once

#include <vector>

#include "lowering/common.h"

namespace torch_tpu::lowering {

// The sum of `x` over `dims` (sorted): for f32 over enough leading rows (a
// bias's or a norm weight's gradient), the kernel's sums of blocks of 16
// rows, level after level, and XLA's reduce of the last <= 16; elsewhere, or
// where the kernel does not run, Builder::reduce_sum.
Value sum_by_kernel(Context& ctx, const Value& x, const std::vector<int64_t>& dims);

}  // namespace torch_tpu::lowering
