#include "runtime/failure_scope.h"

#include <mutex>
#include <optional>

#include "common/error.h"
#include "common/interrupt.h"
#include "runtime/executor.h"
#include "runtime/memory_stats.h"
#include "runtime/storage.h"

namespace torch_tpu::runtime {

namespace {

std::mutex reject_mu;
std::string& rejected_op = *new std::string;  // never destroyed: used during exit
std::string& rejected_message = *new std::string;

// A storage whose base is `buffer`, to hand a node's input or destination
// to run_op_alone as an op call names them.
std::unique_ptr<Storage> holding(std::shared_ptr<DeviceBuffer> buffer) {
  auto s = std::make_unique<Storage>(buffer->type().nbytes(), buffer->device());
  s->base = std::move(buffer);
  return s;
}

// Runs node `n` of `g` alone; its inputs are `base_of` the node's refs.
// Returns its results, each materialized or in the Error state.
template <typename BaseOf>
std::vector<std::shared_ptr<DeviceBuffer>> rerun(const Graph& g, int n, const BaseOf& base_of) {
  const Node& node = g.nodes[n];
  const auto& types = node.types->results;
  std::vector<std::unique_ptr<Storage>> storages;
  OpCall call;
  call.lowering = node.lowering;
  call.args = node.args;
  call.device = g.device;
  call.default_float = node.default_float;
  call.precision = node.precision;
  call.origin = node.origin;
  call.inputs.resize(node.inputs.size());
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    for (const auto& in : node.inputs[i]) {
      if (!in) {
        call.inputs[i].emplace_back(std::nullopt);
        continue;
      }
      storages.push_back(holding(base_of(in->base)));
      // A node reads a padded base only whole (runtime/dynamic_dims.h).
      bool padded = storages.back()->base->padded();
      call.inputs[i].emplace_back(TensorInput{storages.back().get(), in->view, padded});
    }
  }
  std::vector<Storage*> dest_storage(node.dests.size(), nullptr);
  call.destinations.resize(node.dests.size());
  for (size_t j = 0; j < node.dests.size() && j < types.size(); ++j) {
    const auto& d = node.dests[j];
    if (!d) continue;
    // A write over the whole storage had no old base: any buffer of the
    // new base's size stands for the storage.
    storages.push_back(holding(d->old_base ? base_of(*d->old_base)
                                           : DeviceBuffer::deferred_zeros(types[j], g.device)));
    dest_storage[j] = storages.back().get();
    call.destinations[j] = Destination{TensorInput{dest_storage[j], d->view}, d->check_cast};
  }
  std::vector<std::shared_ptr<DeviceBuffer>> out, results(types.size());
  std::string failed;
  try {
    out = run_op_alone(call);
  } catch (const Error& e) {
    failed = std::string("tpu op ") + g.describe(n) + " failed: " + e.what();
  }
  for (size_t j = 0; j < types.size(); ++j) {
    std::shared_ptr<DeviceBuffer> v;
    if (failed.empty()) v = j < dest_storage.size() && dest_storage[j] ? dest_storage[j]->base : out.at(j);
    if (v) {
      try {
        v->wait();  // an execution failure (out of memory) is known only here
      } catch (const Error&) {
      }
    } else {
      v = DeviceBuffer::error(types[j], failed, g.device);
    }
    results[j] = std::move(v);
  }
  return results;
}

}  // namespace

void split_failed_graph(Graph& g, const std::vector<std::shared_ptr<DeviceBuffer>>& params,
                        const std::string& error, ErrorKind kind) {
  if (g.nodes.size() <= 1) {
    for (auto& node_results : g.results)
      for (auto& weak : node_results)
        if (auto b = weak.lock()) b->set_error(error, kind);
    return;
  }
  NoInterrupts quiet;
  std::optional<OomAlreadyCounted> counted;
  if (kind == ErrorKind::OutOfMemory) counted.emplace();
  std::vector<std::vector<std::shared_ptr<DeviceBuffer>>> values(g.nodes.size());
  auto base_of = [&](const BaseRef& r) -> std::shared_ptr<DeviceBuffer> {
    if (r.param < 0) return values.at(r.node).at(r.result);
    const auto& p = params.at(r.param);
    // A launch that failed after taking a donated buffer leaves nothing to
    // read: the readers fail too, naming why.
    if (p->state() == DeviceBuffer::State::Materialized && p->buffer().is_deleted())
      return DeviceBuffer::error(p->type(), error + " (its input buffer was donated to it)", g.device);
    return p;
  };
  for (size_t n = 0; n < g.nodes.size(); ++n) values[n] = rerun(g, static_cast<int>(n), base_of);
  for (size_t n = 0; n < g.results.size(); ++n)
    for (size_t r = 0; r < g.results[n].size(); ++r)
      if (auto live = g.results[n][r].lock()) live->take_value(*values[n][r]);
}

void reject_op_for_test(std::string op, std::string message) {
  std::lock_guard<std::mutex> lock(reject_mu);
  rejected_op = std::move(op);
  rejected_message = std::move(message);
}

bool rejecting_for_test() {
  std::lock_guard<std::mutex> lock(reject_mu);
  return !rejected_op.empty();
}

void check_rejected_for_test(const Graph& g) {
  std::lock_guard<std::mutex> lock(reject_mu);
  if (rejected_op.empty()) return;
  for (const Node& node : g.nodes)
    TPU_CHECK(node.lowering->name != rejected_op, ErrorKind::Runtime, "compiling ",
              node.lowering->name, " was rejected: ", rejected_message);
}

}  // namespace torch_tpu::runtime
