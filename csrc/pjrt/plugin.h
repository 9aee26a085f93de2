// Finds, loads and checks a PJRT plugin. The C ABI comes from the header that
// the xla-cpu-pjrt wheel ships (pjrt_c_api.h); a plugin built against an older
// or newer minor version is accepted because every argument struct carries its
// size, but a different major version is refused.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pjrt_c_api.h"  // shipped by the xla-cpu-pjrt wheel; CMake finds it

namespace torch_tpu::pjrt {

using Api = PJRT_Api;

// The StableHLO versions a plugin's parser reads ("major.minor.patch"), from
// its "stablehlo_minimum_version" and "stablehlo_current_version" attributes.
struct StablehloWindow {
  std::string minimum, current;
};

// Which plugin to load and why (for torch_tpu.platform() and error messages).
struct PluginChoice {
  std::string path;
  std::string reason;  // "TORCH_TPU_PJRT_PLUGIN", "libtpu", "cuda", "xla-cpu-pjrt"
};

class Plugin {
 public:
  // dlopen()s `path`, calls GetPjrtApi and PJRT_Plugin_Initialize. Throws
  // torch_tpu::Error naming the path when it is missing, is not a PJRT plugin,
  // or speaks an incompatible API version.
  static std::shared_ptr<Plugin> load(const PluginChoice& choice);
  ~Plugin();

  const Api* api() const { return api_; }
  const PluginChoice& choice() const { return choice_; }
  int api_major() const;
  int api_minor() const;
  // Key for caches: the plugin path plus its API version.
  std::string identity() const;
  // PJRT_Plugin_Attributes, as text (see named_value_text); empty for a
  // plugin too old to have the call. Read once, at load.
  const std::vector<std::pair<std::string, std::string>>& attributes() const { return attributes_; }
  // The StableHLO window from attributes(); nullopt when the plugin reports
  // neither version.
  std::optional<StablehloWindow> stablehlo_window() const;

 private:
  Plugin() = default;
  void* handle_ = nullptr;
  const Api* api_ = nullptr;
  PluginChoice choice_;
  std::vector<std::pair<std::string, std::string>> attributes_;
};

// A PJRT_NamedValue's value as text: strings as they are, numbers in decimal,
// int64 lists joined by '.' when `dotted` (versions) and ',' otherwise.
std::string named_value_text(const PJRT_NamedValue& v, bool dotted = false);

// Turns a PJRT_Error into torch_tpu::Error (destroying the PJRT_Error).
// `what` names the C call for the message. No-op when error is null.
void check(const Api* api, PJRT_Error* error, const char* what);

}  // namespace torch_tpu::pjrt
