#include "common/interrupt.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

namespace torch_tpu {

namespace {
std::atomic<bool (*)()> can_hook{nullptr};
std::atomic<void (*)()> check_hook{nullptr};
thread_local int quiet_depth = 0;
}  // namespace

NoInterrupts::NoInterrupts() { ++quiet_depth; }
NoInterrupts::~NoInterrupts() { --quiet_depth; }

void set_interrupt_hooks(InterruptHooks hooks) {
  can_hook = hooks.can_interrupt;
  check_hook = hooks.check;
}

namespace detail {

bool can_interrupt() {
  if (quiet_depth > 0) return false;
  auto f = can_hook.load();
  return f && check_hook.load() && f();
}

void check_interrupt() {
  if (auto f = check_hook.load()) f();
}

void check_interrupt_now_and_then() {
  thread_local auto last = std::chrono::steady_clock::time_point{};
  auto now = std::chrono::steady_clock::now();
  if (now - last < std::chrono::milliseconds(50)) return;
  last = now;
  check_interrupt();
}

void pause(int step) {
  // The first steps only yield the core: most waits (the copy of a result
  // already computed, a short op) end within microseconds, and a sleep,
  // however short, lasts the kernel's timer slack (about 50 us). Then
  // 10 us doubling to 0.5 ms: a short op is seen finished soon after it
  // is, a long one costs a wake-up per 0.5 ms.
  constexpr int kYields = 32;
  if (step < kYields) {
    std::this_thread::yield();
    return;
  }
  step -= kYields;
  std::this_thread::sleep_for(std::chrono::microseconds(std::min(10 << std::min(step, 6), 500)));
}

}  // namespace detail

}  // namespace torch_tpu
