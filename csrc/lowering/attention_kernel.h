// Scaled dot-product attention through the fused platform kernel
// (csrc/kernels/sdpa.cpp) where it runs; lowering/attention.cpp keeps the
// composite for everything else, and for where the kernel is not offered.
#pragma once

#include <optional>
#include <vector>

#include "lowering/context.h"

namespace torch_tpu::lowering {

// One SDPA call as the composite read it: q [..., Hq, L, E], k [..., Hk, S,
// E], v [..., Hk, S, Ev] in their own dtype, the caller's mask as given;
// with dropout, the key of its mask's stream (rank-0 u64, attention.cpp's
// dropout_key).
struct SdpaCall {
  hlo::Value q, k, v;
  std::optional<hlo::Value> mask;
  bool causal = false;
  double scale = 1;
  double dropout = 0;
  std::optional<hlo::Value> dropout_key;
};

// (output in q's dtype, logsumexp [..., Hq, L] f32), or nothing where the
// kernel does not run (no handler here, TORCH_TPU_KERNELS=composite, a dtype
// it does not take).
std::optional<std::vector<hlo::Value>> sdpa_kernel_forward(Context& ctx, const SdpaCall& call);

// (dq, dk, dv) in their inputs' dtypes from the output's gradient and the
// forward's output and logsumexp, or nothing where the kernel does not run.
std::optional<std::vector<hlo::Value>> sdpa_kernel_backward(Context& ctx, const SdpaCall& call, hlo::Value grad_out,
                                                            hlo::Value out, hlo::Value logsumexp);

}  // namespace torch_tpu::lowering
