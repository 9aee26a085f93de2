#include "aten/interrupt_hooks.h"

#include <torch/csrc/Exceptions.h>
#include <torch/csrc/utils/pybind.h>

#include "common/interrupt.h"

namespace torch_tpu::aten {

namespace {

unsigned long main_thread = 0;

// Only Python's main thread runs signal handlers.
bool on_main_thread() { return main_thread != 0 && PyThread_get_thread_ident() == main_thread; }

void raise_pending_signal() {
  if (!Py_IsInitialized() || _Py_IsFinalizing()) return;
  pybind11::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() == 0) return;
  // The handler raised (KeyboardInterrupt): carry that exception to the
  // binding, which sets it again in Python.
  python_error e;
  e.persist();
  throw e;
}

}  // namespace

void install_interrupt_hooks() {
  // Import may run on another thread: ask which one is the main one.
  main_thread = pybind11::module::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
  set_interrupt_hooks({&on_main_thread, &raise_pending_signal});
}

}  // namespace torch_tpu::aten
