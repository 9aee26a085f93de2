// The calls of torch_tpu.ffi (python/torch_tpu/kernels/ffi.py) and of the
// platform kernels (kernels/platform.py) into the plugin: which XLA platform
// name the loaded plugin's handlers take, registering one handler, and the
// table of our own kernels (csrc/kernels/kernels.h).
#include <torch/csrc/utils/pybind.h>

#include "aten/tensor_bridge.h"
#include "kernels/kernels.h"
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
  m.def("_platform_kernels", []() {
    py::list out;
    for (const auto& k : kernels::table()) {
      py::dict handlers;
      for (const auto& h : k.handlers) handlers[py::str(h.platform)] = reinterpret_cast<uintptr_t>(h.handler);
      out.append(py::make_tuple(k.name, k.target, k.replaces, handlers));
    }
    return out;
  }, "The platform kernels: (name, custom-call target, what it replaces, {platform: handler address})");
  m.def("_kernel_target", [](const std::string& name) {
    auto& client = runtime::Runtime::get().client();
    return translate_errors([&] { return kernels::target(name, client.plugin(), client.platform_name()); });
  }, "Platform kernel name's custom-call target, its handler registered ('' where its composite runs)");
}

}  // namespace torch_tpu::aten
