// Interruptible waits. While a Python thread waits in C++ (for a launch, a
// compile on the worker, a synchronize) it has released the GIL, and Python
// runs its SIGINT handler only between bytecodes: without help, Ctrl-C would
// wait for the device. aten/ installs hooks so that long waits on the main
// Python thread poll for signals: the wait sleeps in short, growing steps
// and checks about every 50 ms; a pending KeyboardInterrupt is thrown from
// the wait as the Python exception itself. A wait only ever stops waiting --
// the work it waited for goes on, and whoever needs its result waits again
// -- so an interrupt never leaves a result half-written. Other threads wait
// in the plugin as before.
#pragma once

namespace torch_tpu {

struct InterruptHooks {
  bool (*can_interrupt)() = nullptr;  // whether this thread handles signals
  void (*check)() = nullptr;          // throws if a signal is pending
};
void set_interrupt_hooks(InterruptHooks hooks);

// While one is alive on a thread, its waits are not interruptible: for work
// that must finish once begun (re-running a failed graph node by node: a node
// left out would have no value at all).
class NoInterrupts {
 public:
  NoInterrupts();
  ~NoInterrupts();
  NoInterrupts(const NoInterrupts&) = delete;
  NoInterrupts& operator=(const NoInterrupts&) = delete;
};

// Waits until `ready()` holds, polling for interrupts when this thread can
// take them; returns at once otherwise (the caller then blocks as usual).
// Throws what the check throws.
template <typename Ready>
void wait_interruptibly(const Ready& ready);

namespace detail {
bool can_interrupt();
void check_interrupt();
// Checks about every 50 ms of waiting on this thread, counted across waits:
// a synchronize is many short waits, none of which alone lasts 50 ms.
void check_interrupt_now_and_then();
void pause(int step);  // sleeps a little longer with each step
}  // namespace detail

template <typename Ready>
void wait_interruptibly(const Ready& ready) {
  if (!detail::can_interrupt()) return;
  for (int step = 0; !ready(); ++step) {
    detail::pause(step);
    detail::check_interrupt_now_and_then();
  }
}

}  // namespace torch_tpu
