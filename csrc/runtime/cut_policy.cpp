// The cut policy: when a recording graph is flushed, decided after each node
// is recorded. Strict and debug flush every node. defer_and_fuse keeps
// recording until TORCH_TPU_FUSE_MAX_OPS nodes, or until the graph's rolling
// hash and length equal those of a graph flushed before: the op sequence
// since the last cut repeats, so cutting there makes a training loop's
// graphs recur and hit the program cache. Graphs flushed one op at a time
// and tiny ones are not remembered: they would cut every later graph after
// its first op. Cuts must be deterministic, so only the op sequence decides.
//
// A loop whose results nobody reads (inference over batches, the outputs
// kept in a list) is never flushed by a read, so its first graph holds
// several iterations and no flushed graph ends where an iteration does:
// every block of a different length would compile a program of its own. So
// the recorder also looks for a period in the graph's shapes: a node's
// shape is its signature and its links, parameters unnamed (each iteration
// may read fresh inputs) and earlier nodes by distance. A node shaped like
// the graph's first starts a candidate, checked node by node; once the
// shapes are two equal halves the graph is cut, and the half's shapes are
// remembered, so that a later graph is cut where one iteration ends. Index
// checks are left out of the shapes: a repeated index is checked once, in
// the first iteration only. An iteration reading the one before links
// where the first read parameters; it is left to the other cuts.
//
// While an optimizer step runs, a repeat cut found inside it is held (the
// graph is marked due) until the step returns or the next op is recorded:
// by then the step's temporaries (AdamW's denominators, say) are dead and
// are not outputs of the graph, so XLA fuses them away instead of writing
// them out.
#include <unordered_map>

#include "common/env.h"
#include "lowering/index_range.h"
#include "runtime/executor_internal.h"

namespace torch_tpu::runtime {
namespace executor {
namespace {

// Deferred graphs that ran: rolling hash -> node count.
// never destroyed: used during exit
std::unordered_map<uint64_t, size_t>& flushed_graphs = *new std::unordered_map<uint64_t, size_t>;
// Periods found: the rolling hash of their shapes -> their shape count.
std::unordered_map<uint64_t, size_t>& periods_found = *new std::unordered_map<uint64_t, size_t>;
constexpr size_t kMinRepeatNodes = 8;
// A period is at least this long (a launch costs about as much as
// recording a dozen ops), and this many candidates are verified at once.
constexpr size_t kMinPeriodNodes = 16;
constexpr size_t kMaxPeriods = 4;
constexpr uint64_t kFnvBasis = 1469598103934665603ULL;
bool hold_cuts = false;

uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 1099511628211ULL; }

uint64_t shape_of(const Graph& g, size_t at, const std::string& sig, const std::vector<BaseRef>& links) {
  uint64_t h = fnv(kFnvBasis, sig);
  for (const BaseRef& r : links) {
    const int linked = r.param >= 0 ? -1 : g.shape_at[r.node];
    h = linked < 0 ? mix(h, ~uint64_t{0}) : mix(mix(h, at - linked), r.result);
  }
  return h;
}

void cut(const std::shared_ptr<Graph>& g) {
  if (hold_cuts) g->cut_due = true;
  else flush_locked(g, "repeat");
}

bool ends_known_period(const Graph& g) {
  if (g.shapes.empty()) return false;
  auto it = periods_found.find(g.shape_hashes.back());
  return it != periods_found.end() && it->second == g.shapes.size();
}

}  // namespace

// Every node of a defer_and_fuse graph comes here (a mode switch flushes
// first), so shape_at covers each node a link can name.
void track_period(Graph& g, const OpCall& call, const std::string& sig, const std::vector<BaseRef>& links) {
  if (call.lowering == &lowering::kIndexOutOfRange) {
    g.shape_at.push_back(-1);
    return;
  }
  const size_t n = g.shapes.size();
  g.shape_at.push_back(static_cast<int>(n));
  g.shapes.push_back(shape_of(g, n, sig, links));
  g.shape_hashes.push_back(mix(n ? g.shape_hashes.back() : kFnvBasis, g.shapes.back()));
  if (g.period) return;
  const std::vector<uint64_t>& s = g.shapes;
  for (size_t i = 0; i < g.periods.size();) {
    const size_t p = g.periods[i];
    if (s[n] != s[n - p]) {
      g.periods.erase(g.periods.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (n + 1 == 2 * p) {
      g.period = p;
      g.periods.clear();
      return;
    } else {
      ++i;
    }
  }
  if (n >= kMinPeriodNodes && s[n] == s[0] && g.periods.size() < kMaxPeriods) g.periods.push_back(n);
}

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
      if (static_cast<int64_t>(g->nodes.size()) >= env().fuse_max_ops) {
        flush_locked(g, "size_bound");
      } else if (g->period && !g->cut_due) {
        periods_found[g->shape_hashes[g->period - 1]] = g->period;
        cut(g);
      } else if (auto it = flushed_graphs.find(g->rolling_hash);
                 (it != flushed_graphs.end() && it->second == g->nodes.size()) || ends_known_period(*g)) {
        cut(g);
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
