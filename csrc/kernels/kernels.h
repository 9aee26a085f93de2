// Platform kernels: our own C++ handlers that run inside XLA programs as
// typed-FFI custom calls, where the loaded plugin offers PJRT's FFI extension
// (pjrt/ffi_extension.h). Each has a name, the custom-call target its
// callers emit, and a handler per XLA platform; the computation it replaces
// stays in the project as the fallback (a plugin without FFI, a platform
// without a handler, TORCH_TPU_KERNELS=composite) and as the reference the
// tests compare it with. This table is the one place that says which kernel
// runs where.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace torch_tpu::pjrt {
class Plugin;
}

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

// The rows block_sum sums into one (kernels/block_sum.cpp); its lowering
// (lowering/sum_kernel.cpp) shapes the kernel's result by it.
constexpr int64_t kBlockSumRows = 16;

// Every platform kernel, sorted by name.
const std::vector<Kernel>& table();

// The one way to ask whether kernel `name` runs here (lowerings through
// lowering::Context::kernel_target, Python through kernels/platform.py): its
// custom-call target, with its handler registered with `plugin` for a client
// of `client_platform` (PJRT's "cpu", "cuda"); "" where the composite runs
// (TORCH_TPU_KERNELS=composite, a plugin without FFI, no handler for the
// platform). The plugin's registry is the process's: the first call
// registers, later ones (a restarted client's included) find it registered.
// An unknown name is a ValueError naming the kernels there are.
std::string target(const std::string& name, const pjrt::Plugin& plugin, const std::string& client_platform);

}  // namespace torch_tpu::kernels
