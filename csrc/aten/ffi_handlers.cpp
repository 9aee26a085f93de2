// torch_tpu.ffi's two calls into the plugin (python/torch_tpu/kernels/ffi.py
// keeps the registry of what was registered): which XLA platform name the
// loaded plugin's handlers take, and registering one handler.
#include <torch/csrc/utils/pybind.h>

#include "aten/tensor_bridge.h"
#include "pjrt/ffi_extension.h"
#include "runtime/runtime.h"

namespace py = pybind11;

namespace torch_tpu::aten {

void bind_ffi(py::module& m) {
  m.def("_ffi_platform", []() {
    auto& client = runtime::Runtime::get().client();
    return translate_errors([&] { return pjrt::ffi_platform(client.plugin(), client.platform_name()); });
  }, "The XLA platform name FFI handlers register under with the loaded plugin ('' without FFI)");
  m.def("_ffi_register_handler", [](const std::string& target, uintptr_t handler, const std::string& platform) {
    auto& client = runtime::Runtime::get().client();
    translate_errors([&] {
      pjrt::register_ffi_handler(client.plugin(), target, reinterpret_cast<void*>(handler), platform);
    });
  }, "Registers an XLA_FFI_Handler* (an address) for custom calls to target on platform");
}

}  // namespace torch_tpu::aten
