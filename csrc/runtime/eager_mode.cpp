// The process's eager mode (runtime/eager_mode.h): read from the environment
// at start, switched by set_eager_mode, which first flushes what the old
// mode left pending so no graph mixes the two.
#include "common/env.h"
#include "runtime/executor_internal.h"

namespace torch_tpu::runtime {

namespace executor {

EagerMode mode = [] {
  if (env().launch_blocking) return EagerMode::Debug;
  if (env().defer_and_fuse) return EagerMode::DeferAndFuse;
  return EagerMode::Strict;
}();

}  // namespace executor

EagerMode eager_mode() { return executor::mode; }

void set_eager_mode(EagerMode m) {
  std::lock_guard<std::recursive_mutex> lock(executor::mu);
  if (m != executor::mode) flush_all("mode_switch");
  executor::mode = m;
}

const char* eager_mode_name(EagerMode m) {
  switch (m) {
    case EagerMode::Strict: return "strict";
    case EagerMode::Debug: return "debug";
    case EagerMode::DeferAndFuse: return "defer_and_fuse";
  }
  return "?";
}

}  // namespace torch_tpu::runtime
