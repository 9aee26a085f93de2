// Which execution path `tpu_dist` collectives take, and why.
//
// "pjrt": StableHLO collectives (all_reduce, all_gather, ...) compiled by the
// plugin, across processes. That needs a PJRT client that spans the
// processes: created with the distributed key-value store
// (PJRT_Client_Create's kv_get/kv_put callbacks) by a plugin whose collectives
// reach other processes (libtpu over ICI/DCN, the CUDA plugin over NCCL).
//
// "host_gloo": operands staged through host memory, the collective run by a
// ProcessGroupGloo on the same store.
//
// The XLA CPU plugin cannot run the first: its PJRT_Client_Create honours
// only the `cpu_device_count` create option and ignores the key-value
// callbacks, and the only CPU collectives implementation it links is the
// in-process one (collectives among the devices of one client). The runtime
// also creates its client without a key-value store, so on every plugin the
// client is process-local today, and the path is "host_gloo".
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
