#include "runtime/index_flags.h"

#include <algorithm>
#include <deque>
#include <map>

#include "common/error.h"
#include "lowering/index_range.h"
#include "runtime/executor_internal.h"
#include "runtime/dynamic_dims.h"

namespace torch_tpu::runtime {

namespace {

const hlo::TensorType kStateType{hlo::ElementType::I32, {}};

struct Check {
  IndexCheckSite site;
  std::vector<std::weak_ptr<DeviceBuffer>> results;
  bool dropped = false;  // its op raised before it was recorded
};

// An index checked lately. Buffers never change value (a write makes a new
// one), so the same buffer, view and range need no second check.
struct Checked {
  std::weak_ptr<DeviceBuffer> index;
  const DeviceBuffer* address = nullptr;  // compared first: locking costs an atomic
  ViewGeometry view;
  std::array<int64_t, 4> range{};
  int64_t number = 0;
};

bool same_view(const ViewGeometry& a, const ViewGeometry& b) {
  return a.sizes == b.sizes && a.strides == b.strides && a.offset == b.offset && a.dtype == b.dtype;
}

// The state a graph's checks end in: the newest state of a chain of checks
// that starts at check number `chain` of its device and runs through the
// graph's last check. The graph's own checks start at number `begin`.
struct Entry {
  std::shared_ptr<DeviceBuffer> state;
  int64_t begin = 0, chain = 0, end = 0;  // its checks: [begin, end)
};

constexpr size_t kRemembered = 16;

// A strict check waiting for the next read. It holds the index's buffer:
// its value is read then (buffers never change value), and a held buffer
// is never donated to a later op.
struct Waiting {
  std::shared_ptr<DeviceBuffer> index;
  ViewGeometry view;
  bool padded = false;
  std::array<int64_t, 4> range{};
  int64_t number = 0;
};
// Strict runs its waiting checks as one program at the next read, or
// once this many wait or the indices they hold reach kMaxWaitingBytes.
constexpr size_t kMaxWaiting = 64;
constexpr int64_t kMaxWaitingBytes = int64_t{64} << 20;

// A device's checks not read yet. checks[i] is check number read + i.
struct Chain {
  explicit Chain(int device) : storage(kStateType.nbytes(), device), start(kStateType.nbytes(), device) {
    start.base = DeviceBuffer::deferred_zeros(kStateType, device);
  }
  Storage storage;  // base: the newest state, input of the next check of its graph
  // base: a state of 0 (no check yet), the input of a chain's first check.
  // A first check with a state input compiles like any other, so a graph
  // whose chain starts (after a read, say) is the program of the graph
  // whose chain goes on. Held here, it is never donated.
  Storage start;
  std::vector<Entry> entries;
  std::deque<Check> checks;
  int64_t recorded = 0, read = 0;
  bool restart = false;  // a failure was read: the next check starts a chain
  std::string failure;   // the message of the failure read last
  // The newest kRemembered, a ring written at `next_checked`; an empty
  // slot's address is null.
  std::array<Checked, kRemembered> checked;
  size_t next_checked = 0;
  std::vector<Waiting> waiting;  // strict's checks, in order of their numbers
  int64_t waiting_bytes = 0;
  void forget_checked() {
    for (Checked& k : checked) k = Checked{};
  }

  // Check number `n`, or null once it has been read (it passed, or its
  // failure was raised) or if it was never recorded.
  Check* unread(int64_t n) {
    int64_t at = n - read;
    return at < 0 || at >= static_cast<int64_t>(checks.size()) ? nullptr : &checks[at];
  }
};

// Guarded by executor::mu, like the graphs the checks are recorded into.
// Never destroyed: its buffers must not outlive the plugin at exit.
std::map<int, Chain>& chains = *new std::map<int, Chain>;
// A loop of checked ops that never reads anything back still reads its
// states every so often, so that the host's record of the checks stays small.
constexpr size_t kMaxUnread = 4096;
// A chain's state counts its checks in an i32.
constexpr int64_t kMaxChain = int64_t{1} << 30;
thread_local bool checking = false;  // reading a state is a to_host too

Chain& chain_of(int device) { return chains.try_emplace(device, device).first->second; }

std::string message_of(const IndexCheckSite& s) {
  std::string m = s.op + (s.target ? ": Target is out of bounds (" + std::to_string(s.size) + " classes)"
                                   : ": index is out of bounds for dimension " + std::to_string(s.dim) +
                                         " with size " + std::to_string(s.size));
  m += " (found on the tpu device by its index checks, which TORCH_TPU_CHECK_INDICES=0 turns off";
  m += s.origin ? "; issued at " + *s.origin + ")" : ")";
  return m;
}

bool ran(const Entry& e) {
  return !e.state->graph() && e.state->state() == DeviceBuffer::State::Materialized;
}

// Strict runs ahead of its compiles (runtime/launch.cpp): a state whose
// graph is in flight on the worker is one that strict, op by op, has run
// before this read, so the read waits for it.
void settle_strict_states(int device) {
  std::vector<std::shared_ptr<Graph>> in_flight;
  for (const Entry& e : chains.at(device).entries)
    if (executor::on_worker(*e.state)) in_flight.push_back(e.state->graph());
  for (const auto& g : in_flight) executor::settle_locked(g);
}

// Reads the states whose graphs ran. Returns the message of the first failed
// check, else of the first check left unverified by an earlier failure ("" if
// none).
std::string read_chains() {
  std::string first, unverified;
  std::vector<int> devices;
  {
    std::lock_guard<std::recursive_mutex> lock(executor::mu);
    for (auto& [d, c] : chains) devices.push_back(d);
  }
  for (int d : devices) {
    std::vector<Entry> taken;
    {
      std::lock_guard<std::recursive_mutex> lock(executor::mu);
      if (executor::mode == EagerMode::Strict) settle_strict_states(d);
      Chain& c = chains.at(d);
      auto keep = std::stable_partition(c.entries.begin(), c.entries.end(),
                                        [](const Entry& e) { return !ran(e); });
      taken.assign(std::make_move_iterator(keep), std::make_move_iterator(c.entries.end()));
      c.entries.erase(keep, c.entries.end());
    }
    if (taken.empty()) continue;
    // A chain's newest state covers its older ones: one read per chain.
    struct Read {
      int64_t failed, from, to;  // the failed check; the chain's checks read: [from, to)
    };
    std::vector<Read> reads;
    for (size_t i = 0; i < taken.size(); ++i) {
      const Entry& e = taken[i];
      if (i + 1 < taken.size() && taken[i + 1].chain == e.chain) continue;
      size_t first_of_chain = i;
      while (first_of_chain > 0 && taken[first_of_chain - 1].chain == e.chain) --first_of_chain;
      int32_t state = 0;
      try {
        e.state->to_host(&state);  // outside the lock: it may wait for the device
      } catch (const Error&) {
        continue;  // the graph failed: its own error is what surfaces
      }
      if (int64_t k = lowering::failed_check(state); k >= 0)
        reads.push_back({e.chain + k, taken[first_of_chain].begin, e.end});
    }
    std::lock_guard<std::recursive_mutex> lock(executor::mu);
    Chain& c = chains.at(d);
    for (const Read& r : reads) {
      // A failed state stays failed: later checks of its chain start a new
      // one, and a failed index is checked again wherever it is read.
      c.restart = true;
      c.forget_checked();
      Check* bad = c.unread(r.failed);  // null: raised at an earlier read
      if (bad && !bad->dropped) {
        c.failure = message_of(bad->site);
        for (const auto& b : bad->results)
          if (auto buffer = b.lock()) buffer->set_error(c.failure);
        if (first.empty()) first = c.failure;
      }
      // The checks after the failure in its chain did not count: their ops'
      // results are unverified, and poisoned as a CUDA device-side assert
      // poisons all work after it.
      const std::string unchecked =
          "tpu: not checked for out-of-range indices: an earlier op's failed index check stopped "
          "the device's checks (" + c.failure + ")";
      for (int64_t n = std::max(r.failed + 1, r.from); n < r.to; ++n) {
        Check* later = c.unread(n);
        if (!later || later->dropped) continue;
        for (const auto& b : later->results)
          if (auto buffer = b.lock()) buffer->set_error(unchecked);
        // Values computed from those results before this read are not
        // poisoned: the read itself raises, as at a failure.
        if (unverified.empty()) unverified = unchecked;
      }
    }
    // Checks older than every unread state are done with.
    int64_t oldest = c.recorded;
    for (const Entry& e : c.entries) oldest = std::min(oldest, e.begin);
    int64_t done = std::min<int64_t>(oldest - c.read, static_cast<int64_t>(c.checks.size()));
    if (done > 0) {
      c.checks.erase(c.checks.begin(), c.checks.begin() + done);
      c.read += done;
    }
  }
  return first.empty() ? unverified : first;
}

const Checked* find_checked(const Chain& c, const TensorInput& index, const std::array<int64_t, 4>& range) {
  const auto& buffer = index.storage->base;
  if (!buffer || buffer->state() == DeviceBuffer::State::Error) return nullptr;
  for (const Checked& k : c.checked)
    if (k.address == buffer.get() && k.range == range && same_view(k.view, index.view) &&
        k.index.lock() == buffer)
      return &k;
  return nullptr;
}

// Into an empty slot or one whose index is gone, else the oldest: a loop
// checking a fresh index each step (`arange`'s positions) must not push out
// the indices it reuses (the batch it trains on), or every few steps those
// are checked again and the step's graph, a different program, compiles.
void remember(Chain& c, const TensorInput& index, const std::array<int64_t, 4>& range, int64_t number) {
  size_t slot = c.next_checked;
  for (size_t i = 0; i < kRemembered; ++i)
    if (!c.checked[i].address || c.checked[i].index.expired()) {
      slot = i;
      break;
    }
  if (slot == c.next_checked) c.next_checked = (c.next_checked + 1) % kRemembered;
  c.checked[slot] = {index.storage->base, index.storage->base.get(), index.view, range, number};
}

// A padded index (runtime/dynamic_dims.h) is checked whole, its padding
// read as the range's first value, so one program serves its bucket. Not
// when the range is empty (that value would be out of range too), nor in a
// capture, which would bake the true size into its program.
void read_padded(OpCall& call, const std::array<int64_t, 4>& range) {
  TensorInput& index = *call.inputs[0][0];
  const auto& base = index.storage->base;
  if (index.padded || !base->padded() || range[0] >= range[1] || capturing()) return;
  auto pv = padded_view_of(index);
  if (!pv) return;
  index = TensorInput{index.storage, pv->view, true};
  call.args.resize(5);
  call.inputs.resize(5);
  call.args[3].kind = lowering::Arg::Kind::Int;
  call.args[3].index = 3;
  call.args[3].i = pv->dim;
  call.args[4].kind = lowering::Arg::Kind::Number;
  call.args[4].index = 4;
  call.args[4].number.i = base->padding().size;
}

// The check's node: the index, its range and the state of the check before
// it (the chain's start state of 0, for its first).
OpCall check_call(const TensorInput& index, const std::array<int64_t, 4>& range, int device, Storage& state,
                  bool fuse) {
  OpCall call;
  call.lowering = &lowering::kIndexOutOfRange;
  call.device = device;
  call.fuse_with_next = fuse;
  call.args.resize(3);
  call.inputs.resize(call.args.size());
  call.args[0].kind = lowering::Arg::Kind::Tensor;
  call.inputs[0].emplace_back(index);
  call.args[1].kind = lowering::Arg::Kind::IntList;
  call.args[1].index = 1;
  call.args[1].ints.assign(range.begin(), range.end());
  call.args[2].kind = lowering::Arg::Kind::Tensor;
  call.args[2].index = 2;
  call.inputs[2].emplace_back(TensorInput{&state, whole_view(kStateType), false});
  read_padded(call, range);
  return call;
}

// Records check number `number` of chain `c` into the current graph. With
// `fuse`, it runs in one program with the node recorded next. False when
// its index carries an error (so does its op).
bool emit(Chain& c, const TensorInput& index, const std::array<int64_t, 4>& range, int64_t number,
          const std::shared_ptr<const std::string>& origin, bool fuse) {
  // Checks chain across graphs, so that a read of the newest state that
  // ran answers for all before it: a strict op is a graph of its own, and
  // a state read costs a wait on the device. A graph takes the previous
  // graph's state as an input, which orders it after that graph's checks
  // on the device but never makes the host wait.
  const auto& base = c.storage.base;
  const bool continues = base && !c.restart && base->state() != DeviceBuffer::State::Error &&
                         !c.entries.empty() && c.entries.back().state == base &&
                         c.entries.back().end == number && number - c.entries.back().chain < kMaxChain;
  const bool same_graph = continues && base->graph() && !base->graph()->flushed;
  c.restart = false;
  OpCall call = check_call(index, range, c.storage.device, continues ? c.storage : c.start, fuse);
  call.origin = origin;
  std::shared_ptr<DeviceBuffer> next = run_op(call)[0];
  if (next->state() == DeviceBuffer::State::Error) {
    c.storage.base = nullptr;
    return false;
  }
  c.storage.base = next;
  // One live state per graph: a newer state of the same graph replaces the
  // older one, which is then fused away.
  if (same_graph) {
    c.entries.back().state = next;
    c.entries.back().end = number + 1;
  } else {
    c.entries.push_back({next, number, continues ? c.entries.back().chain : number, number + 1});
  }
  return true;
}

// Strict's waiting checks, as one program (each fused with the next). A
// check whose op raised, or whose index failed since, is left out; the
// chain restarts after it, since a chain's states count its checks.
void run_waiting(Chain& c) {
  std::vector<Waiting> batch;
  batch.swap(c.waiting);
  c.waiting_bytes = 0;
  std::vector<std::pair<const Waiting*, Check*>> kept;
  for (const Waiting& w : batch) {
    Check* k = c.unread(w.number);
    if (k && !k->dropped && w.index->state() != DeviceBuffer::State::Error) {
      kept.emplace_back(&w, k);
      continue;
    }
    if (k) k->dropped = true;
  }
  // emit() orders a check after the one numbered just before it only; a
  // gap left by a dropped check starts a new chain (continues is false).
  for (size_t i = 0; i < kept.size(); ++i) {
    const auto& [w, k] = kept[i];
    Storage held(0, w->index->device());
    held.base = w->index;
    if (!emit(c, TensorInput{&held, w->view, w->padded}, w->range, w->number, k->site.origin, i + 1 < kept.size()))
      k->dropped = true;
  }
}

}  // namespace

bool record_index_check(const IndexCheck& check, const IndexCheckSite& site,
                        std::shared_ptr<const std::string>& origin, OpIndexChecks& into) {
  std::lock_guard<std::recursive_mutex> lock(executor::mu);
  Chain& c = chain_of(check.device);
  into.device = check.device;
  if (const Checked* k = find_checked(c, check.index, check.range)) {
    into.all.push_back(k->number);
    return true;
  }
  const auto& index = check.index.storage->base;
  if (!index || index->state() == DeviceBuffer::State::Error) return false;  // so does the op
  if (!origin) origin = executor::ask_origin();
  const int64_t number = c.recorded;
  // Strict would launch the check with its op, an extra input and output
  // and a reduction in every checked op's program; instead its checks wait
  // for the next read and run together, in one program. defer_and_fuse
  // fuses them into its graph.
  if (executor::mode == EagerMode::Strict) {
    c.waiting.push_back({index, check.index.view, check.index.padded, check.range, number});
    c.waiting_bytes += index->type().nbytes();
  } else if (!emit(c, check.index, check.range, number, origin, true)) {
    return false;
  }
  c.checks.push_back({site, {}});
  c.checks.back().site.origin = origin;
  remember(c, check.index, check.range, number);
  into.all.push_back(number);
  into.own.push_back(number);
  ++c.recorded;
  if (c.waiting.size() >= kMaxWaiting || c.waiting_bytes >= kMaxWaitingBytes) run_waiting(c);
  if (c.checks.size() > kMaxUnread) {
    std::string failed = read_chains();
    if (!failed.empty()) fail(ErrorKind::Index, failed);
  }
  return true;
}

void watch_index_results(const OpIndexChecks& checks, const std::vector<std::weak_ptr<DeviceBuffer>>& results) {
  std::lock_guard<std::recursive_mutex> lock(executor::mu);
  auto it = chains.find(checks.device);
  if (it == chains.end()) return;
  Chain& c = it->second;
  for (int64_t n : checks.all)
    if (Check* k = c.unread(n)) k->results.insert(k->results.end(), results.begin(), results.end());
}

void drop_index_checks(const OpIndexChecks& checks) {
  std::lock_guard<std::recursive_mutex> lock(executor::mu);
  auto it = chains.find(checks.device);
  if (it == chains.end()) return;
  Chain& c = it->second;
  for (int64_t n : checks.own) {
    if (Check* k = c.unread(n)) k->dropped = true;
    // Nobody else may rely on a check whose failure will not be told.
    for (Checked& k : c.checked)
      if (k.address && k.number == n) k = Checked{};
  }
  // Its state ends the chain: should the dropped check fail (its op raised
  // for another reason, an index into an empty dimension say), later
  // checks chained after it would count as stopped by that failure, and
  // their ops' good results would be poisoned.
  if (!checks.own.empty() && checks.own.back() == c.recorded - 1) c.restart = true;
}

void check_index_flags() {
  if (checking) return;
  {
    std::lock_guard<std::recursive_mutex> lock(executor::mu);
    if (chains.empty()) return;
  }
  checking = true;
  struct Reset {
    ~Reset() { checking = false; }
  } reset;
  {
    std::lock_guard<std::recursive_mutex> lock(executor::mu);
    for (auto& [d, c] : chains)
      if (!c.waiting.empty()) run_waiting(c);
  }
  std::string failed = read_chains();
  if (!failed.empty()) fail(ErrorKind::Index, failed);
}

}  // namespace torch_tpu::runtime
