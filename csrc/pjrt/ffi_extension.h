// PJRT's FFI extension: registering XLA FFI handlers (typed custom calls)
// with a plugin, so that a program's `stablehlo.custom_call @target` with
// api_version = 4 runs our C++ (or a user's) inside the compiled program, on
// the plugin's threads, with the program's buffers in place.
//
// The extension is one entry of the plugin's PJRT_Api.extension_start chain.
// The wheel's pjrt_c_api.h declares the chain but not this entry, so its
// layout is declared here, as the plugin (PJRT C API 0.81) defines it: the
// entry holds three calls (type registration, user data, handler
// registration), and a handler's registration takes the target name, the
// XLA_FFI_Handler* and the XLA platform name ("Host" for the CPU plugin,
// "CUDA" for the CUDA one). The plugin's registry is process-wide: a handler
// registered once serves every client the process creates.
#pragma once

#include <cstddef>
#include <string>

#include "pjrt/plugin.h"

namespace torch_tpu::pjrt {

// The XLA platform name that handlers for a client of `client_platform`
// (PJRT's "cpu", "cuda") register under ("Host", "CUDA"), or "" where the
// plugin offers no FFI extension (a TPU's libtpu runs Pallas instead; an
// older plugin has none).
std::string ffi_platform(const Plugin& plugin, const std::string& client_platform);

// Registers `handler` (an XLA_FFI_Handler*) for custom calls to `target`
// on `platform`. Throws torch_tpu::Error naming the plugin when it has no
// FFI extension, and the plugin's message when it refuses.
void register_ffi_handler(const Plugin& plugin, const std::string& target, void* handler,
                          const std::string& platform);

}  // namespace torch_tpu::pjrt
