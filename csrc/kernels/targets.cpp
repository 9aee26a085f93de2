#include <string>

#include "common/env.h"
#include "common/error.h"
#include "kernels/kernels.h"
#include "pjrt/ffi_extension.h"

namespace torch_tpu::kernels {

namespace {

const Kernel& find(const std::string& name) {
  std::string names;
  for (const auto& k : table()) {
    if (k.name == name) return k;
    names += (names.empty() ? "" : ", ") + k.name;
  }
  fail(ErrorKind::Value, "torch_tpu: no platform kernel named '", name, "' (there are ", names, ")");
}

}  // namespace

std::string target(const std::string& name, const pjrt::Plugin& plugin, const std::string& client_platform) {
  const Kernel& kernel = find(name);
  TPU_CHECK(env().kernels_error.empty(), ErrorKind::Value, env().kernels_error);
  if (env().composite_kernels) return "";
  std::string platform = pjrt::ffi_platform(plugin, client_platform);
  if (platform.empty()) return "";
  for (const auto& h : kernel.handlers) {
    if (h.platform != platform) continue;
    pjrt::register_ffi_handler(plugin, kernel.target, h.handler, platform);
    return kernel.target;
  }
  return "";
}

}  // namespace torch_tpu::kernels
