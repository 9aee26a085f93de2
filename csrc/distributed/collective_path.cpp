#include "distributed/collective_path.h"

#include "runtime/runtime.h"

namespace torch_tpu::distributed {

namespace {

// Platforms whose PJRT plugin runs collectives across processes once its
// client is created with the distributed key-value store.
bool plugin_spans_processes(const std::string& platform) {
  return platform == "tpu" || platform == "cuda" || platform == "rocm";
}

}  // namespace

CollectivePath choose_collective_path() {
  CollectivePath p;
  p.platform = runtime::Runtime::get().client().platform_name();
  // The runtime's client is created without PJRT_Client_Create's key-value
  // callbacks, so it only ever sees this process's devices; a cross-process
  // StableHLO collective has no peers to reach through it.
  const bool client_spans_processes = false;
  if (client_spans_processes && plugin_spans_processes(p.platform)) {
    p.name = "pjrt";
    p.reason = "the PJRT client spans the processes and the " + p.platform +
               " plugin runs collectives across them";
    return p;
  }
  p.name = "host_gloo";
  if (!plugin_spans_processes(p.platform)) {
    p.reason = "the " + p.platform +
               " PJRT plugin runs StableHLO collectives only among the devices of one client in "
               "one process (its client takes no key-value store), so collectives between "
               "processes are staged through host memory and run by Gloo";
  } else {
    p.reason = "the runtime's PJRT client is local to this process (created without the "
               "distributed key-value store), so collectives are staged through host memory and "
               "run by Gloo";
  }
  return p;
}

}  // namespace torch_tpu::distributed
