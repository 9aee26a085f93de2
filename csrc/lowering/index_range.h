// The device-side index check of TORCH_TPU_CHECK_INDICES (aten/index_check.h).
// Internal to the runtime, like the debug NaN check: not an ATen operator, so
// it is not in the registry.
#pragma once

#include "lowering/registry.h"

namespace torch_tpu::lowering {

// args[0]: an integer index tensor; args[1]: IntList {lo, hi, ignore,
// has_ignore}. One i1 scalar: whether some index lies outside [lo, hi)
// (an index equal to `ignore` is allowed when has_ignore is 1).
extern const Lowering kIndexOutOfRange;

}  // namespace torch_tpu::lowering
