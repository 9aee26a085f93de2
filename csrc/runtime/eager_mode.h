// The eager mode decides when recorded nodes run (runtime/graph.h):
//  - Strict: each op is flushed as it is recorded; launches are asynchronous.
//  - Debug: like strict, then waits for the op and checks it (errors, and
//    with TORCH_TPU_DEBUG_NANS, NaN/Inf), raising at the op that failed.
//  - DeferAndFuse: ops accumulate; the graph is flushed when a value leaves
//    the device, at synchronization, at TORCH_TPU_FUSE_MAX_OPS ops, at an
//    optimizer step, or when the op sequence since the last cut repeats a
//    graph flushed before (so a training loop's graphs recur and hit the
//    cache). A repeat cut inside an optimizer step is held until the step
//    returns (runtime/executor.h: hold_repeat_cuts).
// The mode is per process: graphs hold buffers of every thread.
#pragma once

namespace torch_tpu::runtime {

enum class EagerMode { Strict, Debug, DeferAndFuse };

EagerMode eager_mode();
// Flushes pending work before switching.
void set_eager_mode(EagerMode mode);
const char* eager_mode_name(EagerMode mode);

}  // namespace torch_tpu::runtime
