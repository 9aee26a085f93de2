// Strict mode's cache hit, without a graph. A strict op is a graph of one
// node, flushed as soon as it is recorded. When that node has no
// destination and all its input bases are materialized, everything the
// graph machinery would work out has one answer: each distinct base is a
// parameter, in order; every result is live (the caller holds them all);
// nothing is donated (each input's storage still holds its buffer). So the
// program key follows from the node's signature alone (single_node_key
// spells launch_key's text for that graph), and when the program is cached
// it is launched here at once: no graph, links, live scan, donation pairing
// or deferred results. Anything else -- a miss, in-place writes, pending or
// failed inputs, an index check riding along, a capture, another mode --
// takes the general path (recorder.cpp, flush.cpp, launch.cpp), which also
// fills the cache this path reads.
#include "runtime/device_memory.h"
#include "runtime/executor_internal.h"
#include "runtime/failure_scope.h"
#include "runtime/profiler_events.h"

namespace torch_tpu::runtime::executor {

namespace {

bool takes_hit_path(const OpCall& call, const Prepared& p) {
  if (mode != EagerMode::Strict || capture_graph || call.fuse_with_next) return false;
  for (const auto& d : call.destinations)
    if (d) return false;
  if (current.count(call.device)) return false;  // an earlier op waits to run with this one
  for (const auto& b : p.bases.buffers)
    if (b->state() != DeviceBuffer::State::Materialized) return false;
  return !rejecting_for_test();
}

std::vector<std::shared_ptr<DeviceBuffer>> failed(const std::vector<hlo::TensorType>& types, int device,
                                                  const std::string& message, ErrorKind kind) {
  std::vector<std::shared_ptr<DeviceBuffer>> results(types.size());
  for (size_t j = 0; j < types.size(); ++j) results[j] = DeviceBuffer::error(types[j], message, device, kind);
  return results;
}

}  // namespace

std::optional<std::vector<std::shared_ptr<DeviceBuffer>>> strict_hit(const OpCall& call, Prepared& p) {
  if (!takes_hit_path(call, p)) return std::nullopt;
  Runtime& rt = Runtime::get();
  const std::vector<hlo::TensorType>& types = p.node.types->results;
  thread_local std::string key;
  single_node_key(key, p.sig, static_cast<int>(p.bases.buffers.size()), static_cast<int>(types.size()),
                  call.device);
  std::shared_ptr<CompiledProgram> program = rt.lookup(key, false);
  if (!program) return std::nullopt;
  count("flush.strict");
  count("graph_outputs", static_cast<int64_t>(types.size()));
  const std::span<const Node> nodes(&p.node, 1);
  CompileJob job;
  job.program = program;
  job.device = call.device;
  feed_arguments(p.bases.buffers, nodes, call.device, *program, job);  // none failed: materialized
  int64_t new_bytes = 0;
  for (const auto& t : types) new_bytes += t.nbytes();
  try {
    check_allocation(call.device, new_bytes, [&] { return "tpu op " + describe(p.node); });
  } catch (const Error& e) {
    return failed(types, call.device, failure_message(nodes, e.what()), e.kind());
  }
  std::string injected;
  if (rt.take_injected_failure(&injected))
    return failed(types, call.device, failure_message(nodes, "on the device: " + injected),
                  ErrorKind::Runtime);
  if (tracing()) job.label = program_label(nodes);
  else job.label.correlation = current_correlation();
  job.run();
  if (!job.error.empty())
    return failed(types, call.device, failure_message(nodes, job.error), job.error_kind);
  std::vector<std::shared_ptr<DeviceBuffer>> results(types.size());
  for (size_t j = 0; j < types.size(); ++j)
    results[j] = DeviceBuffer::produced(types[j], std::move(job.outs[j]), p.node.lowering->name, call.device);
  return results;
}

}  // namespace torch_tpu::runtime::executor
