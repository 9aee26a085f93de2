// drain_releases() against pushes from another thread: a push that lands
// after the release thread found its queue empty, but before the drainer
// woke, once left both waiting on each other (a synchronize that never
// returned, seen in 3 of 12 benchmark processes).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "common/release_queue.h"

namespace torch_tpu {
namespace {

TEST(ReleaseQueue, DrainReturnsWhenAPushLandsAsItWaits) {
  // Each round: the drainer queues a task and drains; the pusher queues one
  // task a varying moment after the drain began, then nothing until the
  // round is over, so nothing else would wake a release thread that missed it.
  constexpr int kRounds = 20000;
  std::atomic<int> started{0}, finished{0};
  std::atomic<bool> give_up{false};
  std::thread pusher([&] {
    for (int round = 1; round <= kRounds && !give_up; ++round) {
      while (started < round && !give_up) std::this_thread::yield();
      for (std::atomic<int> spin = 0; spin < (round * 7919) % 2000; spin.fetch_add(1)) {
      }
      release_later([] {}, 16);
      while (finished < round && !give_up) std::this_thread::yield();
    }
  });
  std::thread drainer([&] {
    for (int round = 1; round <= kRounds; ++round) {
      release_later([] {}, 16);
      started = round;
      drain_releases();
      finished = round;
    }
  });
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (finished < kRounds && std::chrono::steady_clock::now() < limit)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const int done = finished;
  give_up = true;
  pusher.join();
  if (done < kRounds) {
    drainer.detach();  // stuck in drain_releases(): the failure below says so
    FAIL() << "drain_releases() never returned in round " << done + 1;
  }
  drainer.join();
}

TEST(ReleaseQueue, DrainRunsEveryTaskQueuedBeforeIt) {
  std::atomic<int> ran{0};
  for (int i = 0; i < 10; ++i) release_later([&] { ++ran; }, 1);
  drain_releases();
  EXPECT_EQ(ran.load(), 10);
}

}  // namespace
}  // namespace torch_tpu
