// The CPU plugin client shared by the GoogleTest suites. ctest sets
// TORCH_TPU_PJRT_PLUGIN to the xla-cpu-pjrt plugin (see CMakeLists.txt).
#pragma once

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "pjrt/client.h"

namespace torch_tpu::testing {

inline std::string plugin_path() {
  const char* env = std::getenv("TORCH_TPU_PJRT_PLUGIN");
  if (env == nullptr || *env == '\0')
    throw std::runtime_error("set TORCH_TPU_PJRT_PLUGIN to the PJRT plugin (ctest does)");
  return env;
}

inline pjrt::Client& client() {
  static pjrt::Client* c =
      new pjrt::Client(pjrt::Plugin::load(pjrt::PluginChoice{plugin_path(), "test"}));
  return *c;
}

}  // namespace torch_tpu::testing
