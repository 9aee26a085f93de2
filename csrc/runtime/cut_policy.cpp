// The cut policy: when a recording graph is flushed, decided after each node
// is recorded. Strict and debug flush every node. defer_and_fuse keeps
// recording until TORCH_TPU_FUSE_MAX_OPS nodes, or until the graph's rolling
// hash and length equal those of a graph flushed before: the op sequence
// since the last cut repeats, so cutting there makes a training loop's
// graphs recur and hit the program cache. Graphs flushed one op at a time
// and tiny ones are not remembered: they would cut every later graph after
// its first op. Cuts must be deterministic, so only the op sequence decides.
//
// While an optimizer step runs, a repeat cut found inside it is held (the
// graph is marked due) until the step returns or the next op is recorded:
// by then the step's temporaries (AdamW's denominators, say) are dead and
// are not outputs of the graph, so XLA fuses them away instead of writing
// them out.
#include <unordered_map>

#include "common/env.h"
#include "runtime/executor_internal.h"

namespace torch_tpu::runtime {
namespace executor {
namespace {

// Deferred graphs that ran: rolling hash -> node count.
std::unordered_map<uint64_t, size_t> flushed_graphs;
constexpr size_t kMinRepeatNodes = 8;
bool hold_cuts = false;

}  // namespace

void flush_due_cut(int device) {
  if (auto it = current.find(device); it != current.end() && it->second->cut_due)
    flush_locked(it->second, "repeat");
}

void cut_after_record(const std::shared_ptr<Graph>& g,
                      const std::vector<std::shared_ptr<DeviceBuffer>>& results) {
  switch (mode) {
    case EagerMode::Strict: flush_locked(g, "strict"); break;
    case EagerMode::Debug:
      flush_locked(g, "debug");
      check_after(results, *g);
      break;
    case EagerMode::DeferAndFuse:
      if (static_cast<int64_t>(g->nodes.size()) >= env().fuse_max_ops)
        flush_locked(g, "size_bound");
      else if (auto it = flushed_graphs.find(g->rolling_hash);
               it != flushed_graphs.end() && it->second == g->nodes.size()) {
        if (hold_cuts) g->cut_due = true;
        else flush_locked(g, "repeat");
      }
      break;
  }
}

const char* flush_reason(const Graph& g, const char* reason) {
  if (!g.cut_due) return reason;
  // A hold covers one cut: should the step raise (its post hook then never
  // runs), the next op flushes the held graph and so ends the hold.
  hold_cuts = false;
  return "repeat";
}

void remember_flushed(const Graph& g) {
  if (mode == EagerMode::DeferAndFuse && g.nodes.size() >= kMinRepeatNodes)
    flushed_graphs[g.rolling_hash] = g.nodes.size();
}

}  // namespace executor

void hold_repeat_cuts(bool hold) {
  std::lock_guard<std::recursive_mutex> lock(executor::mu);
  executor::hold_cuts = hold;
}

}  // namespace torch_tpu::runtime
