// Flushing: a recording graph stops recording and runs. Its results that
// someone still holds are the program's outputs (the rest are fused away);
// the launch (launch.cpp) may finish on the worker, and flush_graph and
// flush_all settle what they flushed. A failure before anything ran
// (building, compiling, the memory guard) is split by the failure scope so
// that only results depending on the op at fault carry it.
#include "runtime/executor_internal.h"
#include "runtime/failure_scope.h"

namespace torch_tpu::runtime {
namespace executor {

void live_results(const Graph& g, std::vector<std::shared_ptr<DeviceBuffer>>& live,
                  std::vector<std::pair<int, int>>& live_ids) {
  live.reserve(g.results.size());
  live_ids.reserve(g.results.size());
  for (size_t n = 0; n < g.results.size(); ++n) {
    for (size_t r = 0; r < g.results[n].size(); ++r) {
      if (auto b = g.results[n][r].lock()) {
        live.push_back(std::move(b));
        live_ids.emplace_back(static_cast<int>(n), static_cast<int>(r));
      }
    }
  }
}

namespace {

// "flush.<reason>", spelled on the stack: every strict op flushes.
void count_flush(const char* reason) {
  std::string_view r(reason);
  char name[64] = "flush.";
  if (r.size() > sizeof name - 6) return count(std::string("flush.") + reason);
  r.copy(name + 6, r.size());
  count(std::string_view(name, 6 + r.size()));
}

}  // namespace

void flush_locked(std::shared_ptr<Graph> g, const char* reason) {
  if (g->flushed) return;
  reason = flush_reason(*g, reason);
  TPU_CHECK(!g->capturing, ErrorKind::Runtime,
            "torch.compile(backend=\"tpu\"): a value computed inside the compiled graph is needed "
            "before the graph ends (", reason, "); data-dependent ops must run outside the graph");
  g->flushed = true;
  auto it = current.find(g->device);
  bool was_current = it != current.end() && it->second == g;
  if (was_current) current.erase(it);
  count_flush(reason);
  remember_flushed(*g);

  std::vector<std::shared_ptr<DeviceBuffer>> live;
  std::vector<std::pair<int, int>> live_ids;
  live_results(*g, live, live_ids);
  count("graph_outputs", static_cast<int64_t>(live.size()));
  if (!live.empty()) {
    try {
      launch(*g, live, live_ids);
    } catch (const Error& e) {
      // Building, compiling or the memory guard failed: nothing ran; only
      // the results that depend on the op at fault carry it.
      split_failed_graph(*g, g->params, failure_message(*g, e.what()), e.kind());
    } catch (...) {
      // Interrupted (Ctrl-C) while waiting for a parameter's producer,
      // before this graph was handed to the worker: nothing of it ran, so it
      // stays pending and is flushed again when a result is needed. Left
      // marked flushed, its results would never be computed.
      if (!g->job) {
        g->flushed = false;
        if (was_current && !current.count(g->device)) current[g->device] = g;
      }
      throw;
    }
  }
  g->params.clear();
}

}  // namespace executor

void flush_graph(const std::shared_ptr<Graph>& graph, const char* reason) {
  std::lock_guard<std::recursive_mutex> lock(executor::mu);
  executor::flush_locked(graph, reason);
  executor::settle_locked(graph);
}

void flush_all(const char* reason, bool settle) {
  std::lock_guard<std::recursive_mutex> lock(executor::mu);
  while (!executor::current.empty()) {
    std::shared_ptr<Graph> g = executor::current.begin()->second;  // flushing erases the map's copy
    executor::flush_locked(g, reason);
  }
  if (settle)
    while (!executor::in_flight.empty()) executor::settle_locked(executor::in_flight.back());
}

int64_t graphs_in_flight() {
  std::lock_guard<std::recursive_mutex> lock(executor::mu);
  return static_cast<int64_t>(executor::in_flight.size());
}

}  // namespace torch_tpu::runtime
