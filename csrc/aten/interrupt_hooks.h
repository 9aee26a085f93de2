#pragma once

namespace torch_tpu::aten {

// Lets long waits of the runtime on Python's main thread raise
// KeyboardInterrupt (common/interrupt.h). Call with the GIL held.
void install_interrupt_hooks();

}  // namespace torch_tpu::aten
