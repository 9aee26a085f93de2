// thread_ids() and started_between() against a thread this test starts, and
// set_nice() read back from the kernel for that thread alone.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "common/thread_priority.h"

namespace torch_tpu {
namespace {

TEST(ThreadPriority, FindsAStartedThreadAndSetsItsNiceAlone) {
  const std::vector<int> before = thread_ids();
  ASSERT_FALSE(before.empty());
  std::atomic<int> tid{0};
  std::atomic<bool> done{false};
  std::thread t([&] {
    tid = static_cast<int>(gettid());
    while (!done) std::this_thread::yield();
  });
  while (tid == 0) std::this_thread::yield();
  const std::vector<int> started = started_between(before, thread_ids());
  EXPECT_EQ(started, std::vector<int>{tid.load()});

  const int own = getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
  const int target = own < 19 ? own + 1 : own;
  EXPECT_EQ(set_nice(started, target), "");
  EXPECT_EQ(getpriority(PRIO_PROCESS, static_cast<id_t>(tid.load())), target);
  EXPECT_EQ(getpriority(PRIO_PROCESS, static_cast<id_t>(gettid())), own);
  done = true;
  t.join();
  // A thread that has ended is skipped, not an error.
  EXPECT_EQ(set_nice(started, target), "");
}

}  // namespace
}  // namespace torch_tpu
