// The device-side index check (aten/index_check.h, runtime/index_flags.h).
// Internal to the runtime, like the debug NaN check: not an ATen operator, so
// it is not in the registry.
#pragma once

#include "lowering/registry.h"

namespace torch_tpu::lowering {

// args[0]: an integer index tensor; args[1]: IntList {lo, hi, ignore,
// has_ignore}; args[2]: the state the chain's previous check returned (0
// for a chain's first check). The state is an i32 scalar: n >= 0 while
// the chain's n checks so far passed, -(k + 1) once its check k (from 0)
// failed, kept from then on so that the first failure is the one named.
// The check's number is counted on the device, not written into the
// program, so that every check compiles to the same program wherever it
// falls in a chain. A check fails when some index lies outside [lo, hi)
// (an index equal to `ignore` is allowed when has_ignore is 1).
extern const Lowering kIndexOutOfRange;

// The check (from 0) a chain's state names as failed, or -1 if none.
inline int64_t failed_check(int32_t state) { return state < 0 ? -static_cast<int64_t>(state) - 1 : -1; }

}  // namespace torch_tpu::lowering
