// Collectives inside a tpu program, for callers that capture a whole step
// holding collectives as one program (vLLM's tensor parallelism:
// python/torch_tpu/integrations/vllm/communicator.py).
//
// tpu_dist's own collectives stage through the host between programs
// (process_group_tpu.h), so a step with one all-reduce a layer would be cut
// into a program per piece. Where the plugin's device memory is host memory
// (XLA's CPU plugin, FFI platform "Host"), the program can instead call a
// custom-call handler that hands its buffer to a Gloo group in place: the
// step stays one program, and every rank, running the same program, issues
// the same collectives in the same order. A group is registered once and
// named in the program by the id registration returns.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <c10/util/intrusive_ptr.h>

namespace c10d {
class Backend;
}

namespace torch_tpu::distributed {

// Makes `group` (a host backend: Gloo) callable from programs; the id to
// pass as the custom call's `group` attribute. Registered groups are kept
// for the life of the process.
int64_t register_program_group(c10::intrusive_ptr<c10d::Backend> group);

// The handlers' (custom-call target, XLA_FFI_Handler address) pairs, for
// the platform "Host"; empty where torch_tpu was built without XLA's FFI
// headers.
std::vector<std::pair<std::string, void*>> program_collective_handlers();

}  // namespace torch_tpu::distributed
