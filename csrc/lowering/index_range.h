// The device-side index check (aten/index_check.h, runtime/index_flags.h).
// Internal to the runtime, like the debug NaN check: not an ATen operator, so
// it is not in the registry.
#pragma once

#include "lowering/registry.h"

namespace torch_tpu::lowering {

// args[0]: an integer index tensor; args[1]: IntList {lo, hi, ignore,
// has_ignore, k}: the check's number k (from 1) among its graph's checks;
// args[2], absent for a graph's first check: the state the graph's
// previous check returned. The state is an i32 scalar, kFirstMark - (the
// number of the first failed check), or 0 while none failed: max() keeps
// the first failure. A check fails when some index lies outside [lo, hi)
// (an index equal to `ignore` is allowed when has_ignore is 1).
constexpr int32_t kFirstMark = 1 << 30;
extern const Lowering kIndexOutOfRange;

}  // namespace torch_tpu::lowering
