// Strict mode's cache hit, without going through a flush. A strict op is a
// graph of one node, flushed as soon as it is recorded -- or of the op and
// nodes recorded just before it into a graph that waits for it (strict's
// waiting index checks, run together at a read: runtime/index_flags.h).
// When the op has no destination and every input base is materialized,
// everything the graph machinery would work out has one answer: the
// riders' graph parameters come first, then each distinct base of the op
// not among them, in order; every result someone holds is live (the
// caller holds all of the op's); nothing is donated (each input's storage, or the check chain, still holds
// its buffer -- checked here). So the program key follows from the riders'
// graph key and the op's signature (appended_node_key spells launch_key's
// text for that graph), and when the program is cached it is launched here
// at once: no node appended, no live scan of the op, no donation pairing,
// no deferred results. Anything else -- a miss, in-place writes, pending or
// failed inputs, a capture, another mode -- takes the general path
// (recorder.cpp, flush.cpp, launch.cpp), which also fills the cache this
// path reads.
#include <algorithm>

#include "lowering/index_range.h"
#include "runtime/device_memory.h"
#include "runtime/executor_internal.h"
#include "runtime/failure_scope.h"
#include "runtime/profiler_events.h"

namespace torch_tpu::runtime::executor {

namespace {

bool materialized(const std::vector<std::shared_ptr<DeviceBuffer>>& buffers) {
  for (const auto& b : buffers)
    if (b->state() != DeviceBuffer::State::Materialized) return false;
  return true;
}

bool holds(const std::vector<std::shared_ptr<DeviceBuffer>>& buffers, const std::shared_ptr<DeviceBuffer>& b) {
  return std::find(buffers.begin(), buffers.end(), b) != buffers.end();
}

// The graph recorded before this op on its device, when it holds only
// index checks fused with it (OpCall::fuse_with_next) whose parameters
// are materialized and none of which the launch would donate; null when
// there is no graph. False when the op must take the general path.
bool riders_of(const OpCall& call, const Prepared& p, std::shared_ptr<Graph>& riders) {
  auto it = current.find(call.device);
  if (it == current.end()) return true;
  const Graph& g = *it->second;
  if (g.capturing || g.cut_due) return false;
  for (const Node& n : g.nodes)
    if (n.lowering != &lowering::kIndexOutOfRange) return false;
  if (!materialized(g.params)) return false;
  // launch.cpp donates a parameter that only the graph holds.
  for (const auto& b : g.params)
    if (b.use_count() - (holds(p.bases.buffers, b) ? 1 : 0) <= 1) return false;
  riders = it->second;
  return true;
}

bool takes_hit_path(const OpCall& call, const Prepared& p, std::shared_ptr<Graph>& riders) {
  if (mode != EagerMode::Strict || capture_graph || call.fuse_with_next) return false;
  // Launches go in order: while the worker has some, this one queues there.
  if (!in_flight.empty() && !settle_finished_locked()) return false;
  for (const auto& d : call.destinations)
    if (d) return false;
  if (!materialized(p.bases.buffers)) return false;  // also: none is a rider's result
  for (const auto& b : p.bases.buffers)
    if (b.use_count() <= 1) return false;  // only this op holds it: the general path donates it
  return riders_of(call, p, riders) && !rejecting_for_test();
}

std::vector<std::shared_ptr<DeviceBuffer>> failed(const std::vector<hlo::TensorType>& types, int device,
                                                  const std::string& message, ErrorKind kind) {
  std::vector<std::shared_ptr<DeviceBuffer>> results(types.size());
  for (size_t j = 0; j < types.size(); ++j) results[j] = DeviceBuffer::error(types[j], message, device, kind);
  return results;
}

// The launch's parameters, the riders' live results and their (node,
// result) ids, gathered per op; cleared on the way out so that no buffer
// is held past the op.
struct Scratch {
  LocalBases params;
  std::vector<std::shared_ptr<DeviceBuffer>> rider_live;
  std::vector<std::pair<int, int>> live_ids;
  std::string links, key;
  void release() {
    params.buffers.clear();
    rider_live.clear();
  }
};

// The key of the riders' graph (or of none) with the op appended; fills
// the launch's parameters and live results.
void hit_key(const OpCall& call, const Prepared& p, const Graph* riders, Scratch& s) {
  s.links.clear();
  s.live_ids.clear();
  int node = 0;
  if (riders) {
    s.params.buffers = riders->params;
    live_results(*riders, s.rider_live, s.live_ids);
    node = static_cast<int>(riders->nodes.size());
  }
  for (const auto& b : p.bases.buffers) append_param_link(s.links, s.params.index_of(b));
  for (size_t j = 0; j < p.node.types->results.size(); ++j) s.live_ids.emplace_back(node, static_cast<int>(j));
  appended_node_key(s.key, riders ? &riders->key : nullptr, p.sig, s.links, s.live_ids,
                    static_cast<int>(s.params.buffers.size()), call.device);
}

}  // namespace

std::optional<std::vector<std::shared_ptr<DeviceBuffer>>> strict_hit(const OpCall& call, Prepared& p) {
  std::shared_ptr<Graph> riders;
  if (!takes_hit_path(call, p, riders)) return std::nullopt;
  Runtime& rt = Runtime::get();
  const std::vector<hlo::TensorType>& types = p.node.types->results;
  thread_local Scratch scratch;
  struct Release {
    ~Release() { scratch.release(); }
  } release;
  hit_key(call, p, riders.get(), scratch);
  std::shared_ptr<CompiledProgram> program = rt.lookup(scratch.key, false);
  if (!program || !program->ready.load(std::memory_order_acquire)) return std::nullopt;  // compiling
  int64_t new_bytes = 0;
  for (const auto& t : types) new_bytes += t.nbytes();
  for (const auto& b : scratch.rider_live) new_bytes += b->type().nbytes();
  std::vector<std::shared_ptr<DeviceBuffer>>& rider_live = scratch.rider_live;
  // From here on the riders' graph is flushed, whatever happens.
  if (riders) {
    riders->flushed = true;
    current.erase(call.device);
    riders->nodes.push_back(std::move(p.node));
  }
  const std::span<const Node> nodes = riders ? std::span<const Node>(riders->nodes)
                                             : std::span<const Node>(&p.node, 1);
  static const Counter flushes("flush.strict"), outputs("graph_outputs");
  flushes.add();
  outputs.add(static_cast<int64_t>(rider_live.size() + types.size()));
  auto fail_all = [&](const std::string& what, ErrorKind kind) {
    const std::string message = failure_message(nodes, what);
    poison(rider_live, message, kind);
    if (riders) riders->params.clear();
    return failed(types, call.device, message, kind);
  };
  CompileJob job;
  job.program = program;
  job.device = call.device;
  feed_arguments(scratch.params.buffers, nodes, call.device, *program, job);  // none failed: materialized
  try {
    check_allocation(call.device, new_bytes, [&] { return "tpu op " + describe(nodes.back()); });
  } catch (const Error& e) {
    return fail_all(e.what(), e.kind());
  }
  std::string injected;
  if (rt.take_injected_failure(&injected)) return fail_all("on the device: " + injected, ErrorKind::Runtime);
  if (tracing()) job.label = program_label(nodes);
  else job.label.correlation = current_correlation();
  job.run();
  if (!job.error.empty()) return fail_all(job.error, job.error_kind);
  for (size_t k = 0; k < rider_live.size(); ++k) rider_live[k]->fulfil(std::move(job.outs[k]));
  if (riders) riders->params.clear();
  std::vector<std::shared_ptr<DeviceBuffer>> results(types.size());
  for (size_t j = 0; j < types.size(); ++j)
    results[j] = DeviceBuffer::produced(types[j], std::move(job.outs[rider_live.size() + j]),
                                        nodes.back().lowering->name, call.device);
  return results;
}

}  // namespace torch_tpu::runtime::executor
