// Every TORCH_TPU_* environment variable, declared and documented here and
// read once, at first use. Python's torch_tpu.env_table() lists this table.
#pragma once

#include <string>
#include <vector>

namespace torch_tpu {

struct Env {
  std::string pjrt_plugin;   // TORCH_TPU_PJRT_PLUGIN: path of the PJRT plugin to load
  bool cpu_fallback = false; // TORCH_TPU_CPU_FALLBACK=1: run unsupported ops on the CPU
  bool dump_hlo = false;     // TORCH_TPU_DUMP_HLO=1: print each compiled module to stderr
  bool launch_blocking = false;  // TPU_LAUNCH_BLOCKING=1: wait for each op (debug mode)
};

const Env& env();

struct EnvVarDoc {
  std::string name, meaning, value;
};
std::vector<EnvVarDoc> env_table();

}  // namespace torch_tpu
