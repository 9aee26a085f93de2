#include "common/fork_guard.h"

#include <pthread.h>

#include <atomic>
#include <mutex>

#include "common/error.h"

namespace torch_tpu {

namespace {
std::atomic<bool> started{false};
std::atomic<bool> bad_fork{false};
std::once_flag armed;

void on_fork_child() {
  if (started.load()) bad_fork.store(true);
}
}  // namespace

void arm_fork_guard() {
  std::call_once(armed, [] { pthread_atfork(nullptr, nullptr, &on_fork_child); });
  started.store(true);
}

bool in_bad_fork() { return bad_fork.load(std::memory_order_relaxed); }

void check_not_forked() {
  TPU_CHECK(!in_bad_fork(), ErrorKind::Runtime,
            "Cannot re-initialize the tpu runtime in a forked subprocess: the parent process "
            "had started it, and its PJRT client does not survive fork. To use tpu with "
            "multiprocessing, you must use the 'spawn' start method "
            "(multiprocessing.set_start_method('spawn') or a 'spawn' context; DataLoader: "
            "multiprocessing_context='spawn')");
}

}  // namespace torch_tpu
