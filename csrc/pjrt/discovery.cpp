#include "pjrt/discovery.h"

#include <filesystem>
#include <sstream>

#include "common/error.h"

namespace torch_tpu::pjrt {

namespace fs = std::filesystem;

namespace {

bool exists(const std::string& p) {
  std::error_code ec;
  return fs::exists(p, ec);
}

bool tpu_present() {
  // Cloud TPU VMs expose the chips as /dev/accel* (v4, v5) or /dev/vfio (v5e+).
  for (int i = 0; i < 8; ++i)
    if (exists("/dev/accel" + std::to_string(i))) return true;
  return exists("/dev/vfio/0") || exists("/dev/vfio/1");
}

bool nvidia_gpu_present() { return exists("/dev/nvidia0") || exists("/proc/driver/nvidia/version"); }

std::string find_in(const std::vector<std::string>& roots, const std::vector<std::string>& rel,
                    std::vector<std::string>* looked) {
  for (const auto& root : roots) {
    for (const auto& r : rel) {
      std::string p = (fs::path(root) / r).string();
      looked->push_back(p);
      if (exists(p)) return p;
    }
  }
  return "";
}

}  // namespace

PluginChoice discover_plugin(const std::string& override_path,
                             const std::vector<std::string>& package_roots) {
  if (!override_path.empty()) {
    TPU_CHECK(exists(override_path), ErrorKind::Runtime,
              "TORCH_TPU_PJRT_PLUGIN names '", override_path, "', which does not exist");
    return {override_path, "TORCH_TPU_PJRT_PLUGIN"};
  }
  std::vector<std::string> looked;
  if (tpu_present()) {
    std::string p = find_in(package_roots, {"libtpu/libtpu.so"}, &looked);
    if (!p.empty()) return {p, "libtpu"};
  }
  if (nvidia_gpu_present()) {
    std::string p = find_in(package_roots,
                            {"jax_plugins/xla_cuda13/xla_cuda_plugin.so",
                             "xla_plugins/xla_cuda13/xla_cuda_plugin.so",
                             "jax_plugins/xla_cuda12/xla_cuda_plugin.so"},
                            &looked);
    if (!p.empty()) return {p, "cuda"};
  }
  std::string p = find_in(package_roots, {"xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so"}, &looked);
  if (!p.empty()) return {p, "xla-cpu-pjrt"};
  std::ostringstream msg;
  msg << "no PJRT plugin found. Install one (pip install xla-cpu-pjrt) or set "
         "TORCH_TPU_PJRT_PLUGIN=/path/to/plugin.so. Looked for:";
  for (const auto& l : looked) msg << "\n  " << l;
  fail(ErrorKind::Runtime, msg.str());
}

}  // namespace torch_tpu::pjrt
