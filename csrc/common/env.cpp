#include "common/env.h"

#include <cstdlib>

namespace torch_tpu {

namespace {

std::string get(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool flag(const char* name) {
  std::string v = get(name);
  return !v.empty() && v != "0" && v != "false" && v != "False";
}

}  // namespace

const Env& env() {
  static const Env e = [] {
    Env r;
    r.pjrt_plugin = get("TORCH_TPU_PJRT_PLUGIN");
    r.cpu_fallback = flag("TORCH_TPU_CPU_FALLBACK");
    r.dump_hlo = flag("TORCH_TPU_DUMP_HLO");
    r.launch_blocking = flag("TPU_LAUNCH_BLOCKING");
    return r;
  }();
  return e;
}

std::vector<EnvVarDoc> env_table() {
  const Env& e = env();
  return {
      {"TORCH_TPU_CPU_FALLBACK", "1: ops without a lowering run on the CPU (one warning per op)",
       e.cpu_fallback ? "1" : "0"},
      {"TORCH_TPU_DUMP_HLO", "1: print every StableHLO module before it is compiled",
       e.dump_hlo ? "1" : "0"},
      {"TORCH_TPU_PJRT_PLUGIN", "path of the PJRT plugin to load instead of discovering one",
       e.pjrt_plugin},
      {"TPU_LAUNCH_BLOCKING", "1: wait for every op to finish (debug eager mode)",
       e.launch_blocking ? "1" : "0"},
  };
}

}  // namespace torch_tpu
