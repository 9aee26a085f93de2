// Which PJRT plugin to load: TORCH_TPU_PJRT_PLUGIN, else libtpu when a TPU is
// present, else XLA's CUDA plugin when an NVIDIA GPU is present, else the CPU
// plugin from xla-cpu-pjrt. Python packages are looked up under the
// site-packages folders the caller passes (Python knows them, C++ does not).
#pragma once

#include <string>
#include <vector>

#include "pjrt/plugin.h"

namespace torch_tpu::pjrt {

// Throws torch_tpu::Error listing everything that was looked for.
PluginChoice discover_plugin(const std::string& override_path,
                             const std::vector<std::string>& package_roots);

}  // namespace torch_tpu::pjrt
