// Per-thread scheduling priority: Linux keeps a nice value for each thread,
// not only for each process. On XLA's CPU plugin the plugin's worker threads
// run programs on the same cores as the Python threads that prepare the next
// ones; a higher nice value for the workers lets the host side take a core
// when it has work and leaves the programs every cycle it does not use, as an
// accelerator would run beside its host (docs/environment_variables.md,
// TORCH_TPU_DEVICE_THREAD_NICE).
#pragma once

#include <string>
#include <vector>

namespace torch_tpu {

// This process's threads, by kernel thread id, ascending.
std::vector<int> thread_ids();

// The ids of `after` that are not in `before` (both ascending).
std::vector<int> started_between(const std::vector<int>& before, const std::vector<int>& after);

// Sets each thread's nice value (-20..19); threads that ended meanwhile are
// skipped. Returns "" or why the kernel refused: lowering a nice value needs
// privilege.
std::string set_nice(const std::vector<int>& tids, int nice);

}  // namespace torch_tpu
