// Which execution path `tpu_dist` collectives take, and why.
//
// "pjrt": StableHLO collectives compiled by the plugin, the programs of
// distributed/programs/collectives.h (one replica per rank). Across
// processes that needs a PJRT client that spans them: created with the
// distributed key-value store (PJRT_Client_Create's kv_get/kv_put callbacks)
// by a plugin whose collectives reach other processes (libtpu over ICI/DCN,
// the CUDA plugin over NCCL).
//
// "host_gloo": operands staged through host memory, the collective run by a
// ProcessGroupGloo on the same store.
//
// The XLA CPU plugin runs those programs only among the devices of one
// client (created with `cpu_device_count`; the C++ tests do exactly that):
// its PJRT_Client_Create ignores the key-value callbacks and it links only
// the in-process collectives implementation. The runtime also creates its
// client without a key-value store, so on every plugin the client is
// process-local today, and the path is "host_gloo".
#pragma once

#include <string>

namespace torch_tpu::distributed {

struct CollectivePath {
  std::string name;    // "pjrt" or "host_gloo"
  std::string reason;  // one sentence for users and logs
  std::string platform;
};

CollectivePath choose_collective_path();

}  // namespace torch_tpu::distributed
