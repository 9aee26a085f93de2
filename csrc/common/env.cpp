#include "common/env.h"

#include <algorithm>
#include <cstdlib>
#include <optional>

namespace torch_tpu {

namespace {

std::string get(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

int64_t number(const char* name, int64_t fallback) {
  std::string v = get(name);
  if (v.empty()) return fallback;
  try {
    return std::stoll(v);
  } catch (...) {
    return fallback;
  }
}

std::string default_cache_dir() {
  std::string xdg = get("XDG_CACHE_HOME");
  if (!xdg.empty()) return xdg + "/torch_tpu";
  std::string home = get("HOME");
  return (home.empty() ? std::string("/tmp") : home + "/.cache") + "/torch_tpu";
}

// A count of 1 or more, or nullopt: a typo must not quietly become the
// default or a prefix of the value ("4x").
std::optional<int64_t> positive_count(const std::string& v) {
  if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  int64_t n = std::stoll(v);
  if (n < 1) return std::nullopt;
  return n;
}

// TPU_VISIBLE_CHIPS's value: chip indices separated by commas, each once
// ("2,3"), or why it is refused (the whole value, as a count's above).
std::string parse_visible_chips(const std::string& v, std::vector<int64_t>& chips) {
  if (v.empty()) return "TPU_VISIBLE_CHIPS is set but empty: this process was given no chips";
  const std::string got = " (got '" + v + "')";
  size_t start = 0;
  while (true) {
    const size_t end = std::min(v.find(',', start), v.size());
    const std::string item = v.substr(start, end - start);
    if (item.empty() || item.size() > 9 || item.find_first_not_of("0123456789") != std::string::npos)
      return "TPU_VISIBLE_CHIPS must be chip indices separated by commas, as \"0,1\"" + got;
    const int64_t chip = std::stoll(item);
    if (std::find(chips.begin(), chips.end(), chip) != chips.end())
      return "TPU_VISIBLE_CHIPS lists chip " + item + " twice" + got;
    chips.push_back(chip);
    if (end == v.size()) return "";
    start = end + 1;
  }
}

// A nice value (-20..19), or nullopt.
std::optional<int> nice_value(const std::string& v) {
  const size_t sign = !v.empty() && v[0] == '-' ? 1 : 0;
  if (v.size() == sign || v.size() > sign + 2 || v.find_first_not_of("0123456789", sign) != std::string::npos)
    return std::nullopt;
  const int n = std::stoi(v);
  if (n < -20 || n > 19) return std::nullopt;
  return n;
}

std::string joined(const std::vector<int64_t>& values) {
  std::string text;
  for (int64_t v : values) text += (text.empty() ? "" : ",") + std::to_string(v);
  return text;
}

bool flag(const char* name, bool fallback = false) {
  std::string v = get(name);
  if (v.empty()) return fallback;
  return v != "0" && v != "false" && v != "False";
}

}  // namespace

const Env& env() {
  static const Env e = [] {
    Env r;
    r.auto_dynamic = flag("TORCH_TPU_AUTO_DYNAMIC", true);
    r.cache_dir = get("TORCH_TPU_CACHE_DIR");
    if (r.cache_dir.empty()) r.cache_dir = default_cache_dir();
    r.cache_max_bytes = number("TORCH_TPU_CACHE_MAX_BYTES", int64_t{2} << 30);
    r.check_indices = flag("TORCH_TPU_CHECK_INDICES", true);
    r.cpu_fallback = flag("TORCH_TPU_CPU_FALLBACK");
    r.debug_compare_cpu = flag("TORCH_TPU_DEBUG_COMPARE_CPU");
    r.debug_nans = flag("TORCH_TPU_DEBUG_NANS");
    r.defer_and_fuse = flag("TORCH_TPU_DEFER_AND_FUSE");
    if (std::string v = get("TORCH_TPU_DEVICE_THREAD_NICE"); !v.empty()) {
      if (auto n = nice_value(v)) {
        r.device_thread_nice = *n;
      } else {
        r.device_thread_nice_error =
            "TORCH_TPU_DEVICE_THREAD_NICE must be a nice value, a whole number from -20 to 19 (got '" + v + "')";
      }
    }
    r.dump_hlo = flag("TORCH_TPU_DUMP_HLO");
    r.fuse_max_ops = number("TORCH_TPU_FUSE_MAX_OPS", 4096);
    if (std::string k = get("TORCH_TPU_KERNELS"); k == "composite") {
      r.composite_kernels = true;
    } else if (k == "all") {
      r.all_kernels = true;
    } else if (!k.empty() && k != "platform") {
      r.kernels_error =
          "TORCH_TPU_KERNELS must be 'platform' (the default), 'composite' or 'all' (got '" + k + "')";
    }
    r.log = get("TORCH_TPU_LOG");
    r.log_compile = ("," + r.log + ",").find(",compile,") != std::string::npos;
    r.pjrt_plugin = get("TORCH_TPU_PJRT_PLUGIN");
    r.slow_compile_seconds = 5.0;
    try {
      if (!get("TORCH_TPU_SLOW_COMPILE_SECONDS").empty())
        r.slow_compile_seconds = std::stod(get("TORCH_TPU_SLOW_COMPILE_SECONDS"));
    } catch (...) {
    }
    r.launch_blocking = flag("TPU_LAUNCH_BLOCKING");
    r.xla_flags = get("XLA_FLAGS");
    return r;
  }();
  return e;
}

const DeviceEnv& device_env() {
  static const DeviceEnv e = [] {
    DeviceEnv r;
    if (std::string v = get("TORCH_TPU_CPU_DEVICES"); !v.empty()) {
      if (auto n = positive_count(v)) {
        r.cpu_devices = *n;
      } else {
        r.cpu_devices_error = "TORCH_TPU_CPU_DEVICES must be a whole number of devices, 1 or more (got '" +
                              v + "')";
      }
    }
    if (const char* v = std::getenv("TPU_VISIBLE_CHIPS")) {
      std::vector<int64_t> chips;
      r.visible_chips_error = parse_visible_chips(v, chips);
      if (r.visible_chips_error.empty()) r.visible_chips = std::move(chips);
    }
    return r;
  }();
  return e;
}

std::vector<EnvVarDoc> env_table() {
  const Env& e = env();
  const DeviceEnv& d = device_env();
  auto b = [](bool v) { return std::string(v ? "1" : "0"); };
  return {
      {"TORCH_TPU_AUTO_DYNAMIC",
       "0: a dimension whose size varies where tensors are copied to tpu is not padded unless marked",
       b(e.auto_dynamic)},
      {"TORCH_TPU_CACHE_DIR", "folder of the persistent executable cache (default ~/.cache/torch_tpu)",
       e.cache_dir},
      {"TORCH_TPU_CACHE_MAX_BYTES", "size bound of the persistent cache; oldest entries are evicted",
       std::to_string(e.cache_max_bytes)},
      {"TORCH_TPU_CHECK_INDICES",
       "0: strict and defer_and_fuse stop checking indices on the device (default 1: a bad one raises IndexError at the next read)",
       b(e.check_indices)},
      {"TORCH_TPU_CPU_DEVICES",
       "devices asked of XLA's CPU plugin (default 1, as JAX's CPU backend); ignored on other plugins",
       d.cpu_devices_error.empty() ? std::to_string(d.cpu_devices) : get("TORCH_TPU_CPU_DEVICES")},
      {"TORCH_TPU_CPU_FALLBACK", "1: ops without a lowering run on the CPU (one warning per op)",
       b(e.cpu_fallback)},
      {"TORCH_TPU_DEBUG_COMPARE_CPU", "1: debug mode also runs each op on the CPU and reports the first that differs",
       b(e.debug_compare_cpu)},
      {"TORCH_TPU_DEBUG_NANS", "1: debug mode raises at the first op that produces NaN or Inf",
       b(e.debug_nans)},
      {"TORCH_TPU_DEFER_AND_FUSE", "1: start in the defer_and_fuse eager mode", b(e.defer_and_fuse)},
      {"TORCH_TPU_DEVICE_THREAD_NICE",
       "nice value (-20..19) of the plugin's worker threads, which run programs; unset: left as started, except "
       "vLLM on tpu on XLA's CPU plugin with one worker, which sets 5 so that its host work goes first",
       !e.device_thread_nice_error.empty() ? get("TORCH_TPU_DEVICE_THREAD_NICE")
       : e.device_thread_nice              ? std::to_string(*e.device_thread_nice)
                                           : ""},
      {"TORCH_TPU_DUMP_HLO", "1: print every StableHLO module before it is compiled", b(e.dump_hlo)},
      {"TORCH_TPU_FUSE_MAX_OPS", "ops a deferred graph may hold before it is flushed",
       std::to_string(e.fuse_max_ops)},
      {"TORCH_TPU_KERNELS",
       "composite: platform kernels (our FFI handlers inside programs) give way to the computations they replace; "
       "all: kernels run also where this CPU's measurements chose the computation they replace",
       !e.kernels_error.empty() ? get("TORCH_TPU_KERNELS")
       : e.composite_kernels    ? "composite"
       : e.all_kernels          ? "all"
                                : "platform"},
      {"TORCH_TPU_LOG", "comma-separated log channels; compile: one stderr line per compilation",
       e.log},
      {"TORCH_TPU_PJRT_PLUGIN", "path of the PJRT plugin to load instead of discovering one",
       e.pjrt_plugin},
      {"TORCH_TPU_SLOW_COMPILE_SECONDS",
       "compile seconds of one burst after which one line says what is compiling (default 5)",
       std::to_string(e.slow_compile_seconds)},
      {"TPU_LAUNCH_BLOCKING", "1: start in the debug eager mode (wait for every op)",
       b(e.launch_blocking)},
      {"TPU_VISIBLE_CHIPS",
       "the chips this process sees, as tpu:0, tpu:1... (CUDA_VISIBLE_DEVICES for chips; unset: all)",
       d.visible_chips ? joined(*d.visible_chips) : get("TPU_VISIBLE_CHIPS")},
      {"XLA_FLAGS", "XLA's own flags, read by the plugin's compiler; they key the persistent cache",
       e.xla_flags},
  };
}

}  // namespace torch_tpu
