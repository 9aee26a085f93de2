// Every TORCH_TPU_* environment variable (and the others we read: XLA_FLAGS),
// declared and documented here and read once, at first use. Python's
// torch_tpu.env_table() lists this table.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace torch_tpu {

struct Env {
  bool auto_dynamic = true;         // TORCH_TPU_AUTO_DYNAMIC=0: no dimension becomes dynamic unmarked
  std::string cache_dir;            // TORCH_TPU_CACHE_DIR: persistent executable cache
  int64_t cache_max_bytes = 0;      // TORCH_TPU_CACHE_MAX_BYTES: its size bound
  bool check_indices = true;        // TORCH_TPU_CHECK_INDICES=0: strict/defer_and_fuse stop checking indices on the device
  bool cpu_fallback = false;        // TORCH_TPU_CPU_FALLBACK=1: run unsupported ops on the CPU
  bool debug_compare_cpu = false;   // TORCH_TPU_DEBUG_COMPARE_CPU=1: debug mode checks each op on the CPU
  bool debug_nans = false;          // TORCH_TPU_DEBUG_NANS=1: debug mode raises at the first NaN/Inf
  bool defer_and_fuse = false;      // TORCH_TPU_DEFER_AND_FUSE=1: start in defer_and_fuse mode
  std::optional<int> device_thread_nice;  // TORCH_TPU_DEVICE_THREAD_NICE: the plugin's worker threads' nice value
  std::string device_thread_nice_error;   //   ... why its value is refused ("" when it is not)
  bool dump_hlo = false;            // TORCH_TPU_DUMP_HLO=1: print each compiled module to stderr
  bool composite_kernels = false;   // TORCH_TPU_KERNELS=composite: no platform kernel, every fallback runs
  bool all_kernels = false;         // TORCH_TPU_KERNELS=all: also where this CPU's measurements chose the fallback
  std::string kernels_error;        //   ... why its value is refused ("" when it is not)
  int64_t fuse_max_ops = 0;         // TORCH_TPU_FUSE_MAX_OPS: size bound of a deferred graph
  std::string log;                  // TORCH_TPU_LOG: comma-separated log channels ("compile")
  bool log_compile = false;         //   ... includes "compile": one stderr line per compilation
  std::string pjrt_plugin;          // TORCH_TPU_PJRT_PLUGIN: path of the PJRT plugin to load
  double slow_compile_seconds = 0;  // TORCH_TPU_SLOW_COMPILE_SECONDS: when to report a compile burst
  bool launch_blocking = false;     // TPU_LAUNCH_BLOCKING=1: start in debug mode
  std::string xla_flags;            // XLA_FLAGS: read by the plugin's XLA; part of cache keys
};

const Env& env();

// The variables that choose the devices, read apart from the others: when the
// runtime creates its client (the first use of tpu), as CUDA reads
// CUDA_VISIBLE_DEVICES, not when this library loads (env() is read then), since
// a launcher such as Ray sets them in a worker that may have imported torch,
// and so loaded torch_tpu, already. Bad values are refused there too, naming
// the variable.
struct DeviceEnv {
  int64_t cpu_devices = 1;          // TORCH_TPU_CPU_DEVICES: devices asked of XLA's CPU plugin
  std::string cpu_devices_error;    //   ... why its value is refused ("" when it is not)
  // TPU_VISIBLE_CHIPS: the plugin devices this process sees, in order, as tpu:0, tpu:1...
  // (CUDA_VISIBLE_DEVICES for chips; runtime/visible_chips.h); unset: all of them.
  std::optional<std::vector<int64_t>> visible_chips;
  std::string visible_chips_error;  //   ... why its value is refused ("" when it is not)
};

const DeviceEnv& device_env();

struct EnvVarDoc {
  std::string name, meaning, value;
};
std::vector<EnvVarDoc> env_table();

}  // namespace torch_tpu
