// Platform kernels: our own C++ handlers that run inside XLA programs as
// typed-FFI custom calls, where the loaded plugin offers PJRT's FFI extension
// (pjrt/ffi_extension.h). Each has a name, the custom-call target its
// callers emit, and a handler per XLA platform; the computation it replaces
// stays in the project as the fallback (a plugin without FFI, a platform
// without a handler, TORCH_TPU_KERNELS=composite) and as the reference the
// tests compare it with. This table is the one place that says which kernel
// runs where.
#pragma once

#include <string>
#include <vector>

namespace torch_tpu::kernels {

struct Handler {
  std::string platform;  // XLA's platform name: "Host", "CUDA"
  void* handler;         // XLA_FFI_Handler*
};

struct Kernel {
  std::string name;    // "paged_attention"
  std::string target;  // the custom-call target: "torch_tpu_paged_attention"
  std::string replaces;  // where the fallback lives, for docs and messages
  std::vector<Handler> handlers;
};

// Every platform kernel, sorted by name.
const std::vector<Kernel>& table();

}  // namespace torch_tpu::kernels
