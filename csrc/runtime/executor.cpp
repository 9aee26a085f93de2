#include "runtime/executor.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <thread>
#include <map>
#include <mutex>
#include <unordered_map>

#include "common/env.h"
#include "common/error.h"
#include "common/interrupt.h"
#include "common/key_text.h"
#include "lowering/common.h"
#include "runtime/device_memory.h"
#include "runtime/device_timeline.h"
#include "runtime/dynamic_dims.h"
#include "runtime/eager_mode.h"
#include "runtime/failure_scope.h"
#include "runtime/memory_stats.h"
#include "runtime/number_bytes.h"
#include "runtime/profiler_events.h"
#include "runtime/runtime.h"

namespace torch_tpu::runtime {

using hlo::ElementType;
using hlo::TensorType;
using hlo::Value;
using lowering::Arg;

// A compiled graph and what each launch must feed it.
struct CompiledProgram {
  std::unique_ptr<pjrt::Executable> exe;
  std::vector<NumberParam> numbers;  // parameters after the graph's buffers
  std::vector<bool> donated;         // per graph buffer parameter
};

namespace {

// ---------------------------------------------------------------- state

std::recursive_mutex mu;                          // guards recording and flushing
std::map<int, std::shared_ptr<Graph>> current;    // the recording graph of each device
// Deferred graphs that ran: rolling hash -> node count. A recording graph
// whose prefix matches one is cut there ("repeat"), so loops recur. Graphs
// flushed one op at a time (strict, debug) and tiny ones are not remembered:
// they would cut every later graph after its first op.
std::unordered_map<uint64_t, size_t> flushed_graphs;
constexpr size_t kMinRepeatNodes = 8;
// While an optimizer step runs, a repeat cut found inside it is held until
// the step returns (or the next op is recorded): by then the step's
// temporaries (AdamW's denominators, say) are dead and are not outputs of
// the graph, so XLA fuses them away instead of writing them out.
bool hold_cuts = false;
OriginProvider origin_provider = nullptr;
EagerMode mode = [] {
  if (env().launch_blocking) return EagerMode::Debug;
  if (env().defer_and_fuse) return EagerMode::DeferAndFuse;
  return EagerMode::Strict;
}();

uint64_t fnv(uint64_t h, const std::string& s) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

// ---------------------------------------------------------------- signatures

// A number's kind always shapes the program; its value only when the
// lowering bakes it in (otherwise it is a parameter).
void append_number(std::string& key, const lowering::Number& n, bool static_numbers) {
  key += static_cast<char>('0' + static_cast<int>(n.kind));
  if (static_numbers) {
    char buf[80];
    snprintf(buf, sizeof buf, "%.17g/%.17g/%lld", n.f, n.im, static_cast<long long>(n.i));
    key += buf;
  }
}

void append_arg(std::string& key, const Arg& a, bool static_numbers) {
  key += static_cast<char>('A' + static_cast<int>(a.kind));
  switch (a.kind) {
    case Arg::Kind::Int: append_int(key, a.i); break;
    case Arg::Kind::Float: {
      char buf[32];
      snprintf(buf, sizeof buf, "%.17g", a.f);
      key += buf;
      break;
    }
    case Arg::Kind::Bool: key += a.b ? '1' : '0'; break;
    case Arg::Kind::DType: key += hlo::mlir_name(a.dtype); break;
    case Arg::Kind::String: key += a.s; break;
    case Arg::Kind::IntList:
      for (int64_t v : a.ints) append_int(key, v, ',');
      break;
    case Arg::Kind::FloatList:
      for (double v : a.floats) key += std::to_string(v) + ",";
      break;
    case Arg::Kind::BoolList:
      for (bool v : a.bools) key += v ? '1' : '0';
      break;
    case Arg::Kind::Number: append_number(key, a.number, static_numbers); break;
    case Arg::Kind::NumberList:
      for (const auto& n : a.numbers) append_number(key, n, static_numbers);
      break;
    case Arg::Kind::Tensor:
      if (a.wrapped_number) key += 'w';
      break;
    default: break;
  }
  key += ';';
}

// The distinct base buffers one op reads or writes, in order of appearance.
struct LocalBases {
  std::vector<std::shared_ptr<DeviceBuffer>> buffers;
  int index_of(const std::shared_ptr<DeviceBuffer>& b) {
    for (size_t i = 0; i < buffers.size(); ++i)
      if (buffers[i] == b) return static_cast<int>(i);
    buffers.push_back(b);
    return static_cast<int>(buffers.size()) - 1;
  }
};

// `local`: the base's index among the op's distinct bases.
void append_view(std::string& key, int local, const TensorType& base, const ViewGeometry& view) {
  key += 's';
  append_int(key, local);
  base.append_key(key);
  if (is_identity(view, base)) key += '=';
  else view.append_key(key);
}

// The value a Number parameter is fed: the argument's, or one element of it.
const lowering::Number& number_of(const Arg& a, const NumberParam& np) {
  return np.element >= 0 ? a.numbers.at(static_cast<size_t>(np.element)) : a.number;
}

// ---------------------------------------------------------------- metrics

void count(const char* what, int64_t n = 1) { Runtime::get().count(what, n); }

// ---------------------------------------------------------------- launching

// A generator state as the ui64[2] parameter random lowerings read.
std::unique_ptr<pjrt::Buffer> rng_state_buffer(uint64_t seed, uint64_t offset, int device) {
  uint64_t state[2] = {seed, offset};
  return Runtime::get().client().from_host(state, {ElementType::U64, {2}}, device);
}

// Every launch goes through here, so that synchronize() knows of it and its
// completion is stamped for timing events and the profiler.
std::vector<std::unique_ptr<pjrt::Buffer>> execute(const pjrt::Executable& exe,
                                                   const std::vector<const pjrt::Buffer*>& args,
                                                   const std::vector<bool>& donated, int device,
                                                   LaunchLabel label) {
  std::unique_ptr<pjrt::Event> finished;
  auto outs = exe.execute(args, donated, device, &finished);
  Runtime& rt = Runtime::get();
  note_launch_timing(finished.get(), device, std::move(label));
  rt.note_launch(std::move(finished));
  rt.count("launches");
  rt.count("donated_buffers", std::count(donated.begin(), donated.end(), true));
  return outs;
}

// ---------------------------------------------------------------- failures

std::string failure_message(const Graph& g, const std::string& what) {
  if (g.nodes.size() == 1) return "tpu op " + g.describe(0) + " failed: " + what;
  return "tpu graph of " + std::to_string(g.nodes.size()) + " ops (first " + g.describe(0) +
         ", last " + g.describe(static_cast<int>(g.nodes.size()) - 1) + ") failed: " + what;
}

void poison(const std::vector<std::shared_ptr<DeviceBuffer>>& live, const std::string& message,
            ErrorKind kind = ErrorKind::Runtime) {
  for (const auto& b : live) b->set_error(message, kind);
}

// A graph's name in traces and logs: its op, or its op count, first and last op.
ProgramLabel program_label(const Graph& g) {
  ProgramLabel l;
  l.ops = static_cast<int>(g.nodes.size());
  if (g.nodes.empty()) return l;
  const std::string first = node_name(g.nodes.front());
  l.name = l.ops == 1 ? first
                      : "graph of " + std::to_string(l.ops) + " ops: " + first + " .. " +
                            node_name(g.nodes.back());
  if (g.nodes.front().origin) l.origin = *g.nodes.front().origin;
  l.correlation = current_correlation();
  return l;
}

// ---------------------------------------------------------------- flushing

std::shared_ptr<pjrt::Buffer> number_buffer(const lowering::Number& n, ElementType t, int device);

}  // namespace

// One launch of a graph: compile (if new) and execute. It runs on the
// calling thread (strict, debug) or, in defer_and_fuse, on the compile
// worker, touching nothing but its own fields; the recording thread then
// adopts its outputs into the graph's live buffers.
struct CompileJob {
  std::shared_ptr<CompiledProgram> program;
  std::string key, mlir, failure;
  std::vector<TensorType> out_types;
  int device = 0;
  std::vector<const pjrt::Buffer*> args;
  std::vector<std::shared_ptr<DeviceBuffer>> params;
  std::vector<std::shared_ptr<pjrt::Buffer>> numbers;
  std::vector<std::unique_ptr<pjrt::Buffer>> states;
  std::vector<std::weak_ptr<DeviceBuffer>> live;  // when run on the worker
  ProgramLabel label;
  // Results of run():
  std::vector<std::unique_ptr<pjrt::Buffer>> outs;
  std::string error;
  ErrorKind error_kind = ErrorKind::Runtime;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;

  void run() {
    Runtime& rt = Runtime::get();
    try {
      if (!mlir.empty()) {
        program->exe = rt.compile(mlir, out_types, device, label);
        rt.insert(key, program);
      }
      outs = execute(*program->exe, args, program->donated, device,
                     {label.name, label.ops, mlir.empty() ? "hit" : "miss", label.correlation});
    } catch (const Error& e) {
      error = failure + e.what();
      error_kind = e.kind();
      if (e.kind() == ErrorKind::OutOfMemory) record_oom(device);
    }
    std::lock_guard<std::mutex> lock(mu);
    done = true;
    cv.notify_all();
  }

  void wait() {
    wait_interruptibly([&] {  // a long compile or launch: Ctrl-C still works
      std::lock_guard<std::mutex> lock(mu);
      return done;
    });
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
  }

  void adopt(const std::vector<std::shared_ptr<DeviceBuffer>>& targets) {
    wait();
    params.clear();
    if (!error.empty()) return poison(targets, error, error_kind);
    for (size_t k = 0; k < targets.size(); ++k) targets[k]->fulfil(std::move(outs[k]));
  }

  void adopt_live() {
    std::vector<std::shared_ptr<DeviceBuffer>> targets;
    std::vector<std::unique_ptr<pjrt::Buffer>> kept;
    targets.reserve(live.size());
    kept.reserve(live.size());
    wait();
    for (size_t k = 0; k < live.size(); ++k) {
      if (auto b = live[k].lock()) {
        targets.push_back(std::move(b));
        kept.push_back(k < outs.size() ? std::move(outs[k]) : nullptr);
      }
    }
    outs = std::move(kept);
    adopt(targets);
  }
};

namespace {

// A single worker: programs compile and launch one at a time, in flush order.
class CompileWorker {
 public:
  CompileWorker() { std::thread([this] { loop(); }).detach(); }
  void submit(std::shared_ptr<CompileJob> job) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(job));
    cv_.notify_one();
  }

 private:
  void loop() {
    for (;;) {
      std::shared_ptr<CompileJob> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return !queue_.empty(); });
        job = std::move(queue_.front());
        queue_.pop_front();
      }
      job->run();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<CompileJob>> queue_;
};

CompileWorker& compile_worker() {
  static CompileWorker* worker = new CompileWorker();  // never joined: it outlives exit
  return *worker;
}

// Graphs whose program is compiling or launching on the worker.
std::vector<std::shared_ptr<Graph>> in_flight;

// Takes the results of a graph whose program ran (or compiled) on the worker.
void settle_locked(const std::shared_ptr<Graph>& g) {
  if (!g->job) return;
  g->job->wait();  // if interrupted, the graph stays in flight, to be settled later
  std::shared_ptr<CompileJob> job = std::move(g->job);
  in_flight.erase(std::remove(in_flight.begin(), in_flight.end(), g), in_flight.end());
  if (!job->error.empty() && g->nodes.size() > 1) {
    std::vector<std::shared_ptr<DeviceBuffer>> params = std::move(job->params);
    job->params.clear();
    return split_failed_graph(*g, params, job->error, job->error_kind);
  }
  job->adopt_live();
}

void launch(Graph& g, std::vector<std::shared_ptr<DeviceBuffer>>& live,
            const std::vector<std::pair<int, int>>& live_ids) {
  Runtime& rt = Runtime::get();
  // Parameters still being produced on the worker are taken first: donation
  // below asks which of them are materialized.
  for (const auto& p : g.params)
    if (p->state() == DeviceBuffer::State::Deferred && p->graph()) settle_locked(p->graph());
  // Donation: a parameter only this graph still holds may be overwritten by
  // an output of the same type (in-place updates, optimizer steps). Its own
  // new value -- the output that replaced it in its storage -- is paired
  // with it first: XLA then updates the buffer in place, where pairing it
  // with an unrelated output makes XLA copy the parameter before the write.
  std::vector<int> alias(g.params.size(), -1);
  std::vector<bool> taken(live.size(), false);
  auto donatable = [&](size_t p, size_t k) {
    const auto& buf = g.params[p];
    return alias[p] < 0 && !taken[k] && buf.use_count() == 1 &&
           buf->state() == DeviceBuffer::State::Materialized && live[k]->type() == buf->type();
  };
  auto pair = [&](size_t p, size_t k) {
    alias[p] = static_cast<int>(k);
    taken[k] = true;
  };
  for (size_t k = 0; k < live.size(); ++k) {
    int p = g.replaced_param[live_ids[k].first][live_ids[k].second];
    if (p >= 0 && donatable(static_cast<size_t>(p), k)) pair(static_cast<size_t>(p), k);
  }
  for (size_t p = 0; p < g.params.size(); ++p)
    for (size_t k = 0; k < live.size() && alias[p] < 0; ++k)
      if (donatable(p, k)) pair(p, k);
  std::string key;
  key.reserve(g.key.size() + 8 * (live_ids.size() + alias.size()) + 32);
  key += g.key;
  key += "|live:";
  for (const auto& [n, r] : live_ids) {
    append_int(key, n, '.');
    append_int(key, r, ',');
  }
  key += "|donate:";
  for (int a : alias) append_int(key, a, ',');
  key += '@';
  append_int(key, g.device);

  check_rejected_for_test(g);
  std::shared_ptr<CompiledProgram> program = rt.lookup(key);
  std::string mlir;
  std::vector<TensorType> out_types;
  if (!program) {
    program = std::make_shared<CompiledProgram>();
    hlo::Builder b;
    std::vector<Value> param_values;
    auto results = build_graph(b, g, param_values, program->numbers);
    std::vector<Value> outs;
    for (const auto& [n, r] : live_ids) {
      outs.push_back(results[n][r]);
      out_types.push_back(results[n][r].type);
    }
    program->donated.assign(g.params.size(), false);
    for (size_t p = 0; p < alias.size(); ++p) {
      if (alias[p] < 0) continue;
      b.alias_parameter(param_values[p], alias[p]);
      program->donated[p] = true;
    }
    mlir = b.module(outs);
  }

  // Parameters: the graph's buffers (an input that carries an error poisons
  // every result), then numbers and generator states.
  auto job = std::make_shared<CompileJob>();
  job->args.reserve(g.params.size() + program->numbers.size());
  for (const auto& p : g.params) {
    if (p->state() == DeviceBuffer::State::Error)
      return split_failed_graph(g, g.params, p->error_message(), p->error_kind());
    job->args.push_back(&p->buffer());
  }
  for (const NumberParam& np : program->numbers) {
    const Arg& a = g.nodes[np.node].args[np.arg];
    if (np.rng) {
      job->states.push_back(rng_state_buffer(a.rng_seed, a.rng_offset, g.device));
      job->args.push_back(job->states.back().get());
    } else {
      job->numbers.push_back(number_buffer(number_of(a, np), np.type, g.device));
      job->args.push_back(job->numbers.back().get());
    }
  }
  // New device memory: the outputs no donated input turns into.
  int64_t new_bytes = 0;
  for (size_t k = 0; k < live.size(); ++k)
    if (!taken[k]) new_bytes += live[k]->type().nbytes();
  check_allocation(g.device, new_bytes, "tpu op " + g.describe(0));
  std::string injected;
  if (rt.take_injected_failure(&injected))
    return poison(live, failure_message(g, "on the device: " + injected));
  job->program = program;
  job->params = g.params;  // kept alive (and donated) until the launch
  job->failure = failure_message(g, "");
  job->device = g.device;
  job->label = program_label(g);
  if (!mlir.empty()) {
    job->key = std::move(key);
    job->mlir = std::move(mlir);
    job->out_types = std::move(out_types);
  }
  if (mode == EagerMode::DeferAndFuse || !job->mlir.empty()) {
    // The program compiles (if new) and launches on the worker thread while
    // this thread records what comes next; its results are taken when first
    // needed. Strict and debug compile there too, and wait at once: a wait
    // can be interrupted (Ctrl-C), a compile on this thread could not.
    job->live.assign(live.begin(), live.end());
    g.job = job;
    in_flight.push_back(g.shared_from_this());
    compile_worker().submit(job);
    if (mode != EagerMode::DeferAndFuse) settle_locked(g.shared_from_this());
    return;
  }
  job->run();
  job->adopt(live);
}

void flush_locked(std::shared_ptr<Graph> g, const char* reason) {
  if (g->flushed) return;
  if (g->cut_due) {
    reason = "repeat";
    // A hold covers one cut: should the step raise (its post hook then never
    // runs), the next op flushes the held graph and so ends the hold.
    hold_cuts = false;
  }
  TPU_CHECK(!g->capturing, ErrorKind::Runtime,
            "torch.compile(backend=\"tpu\"): a value computed inside the compiled graph is needed "
            "before the graph ends (", reason, "); data-dependent ops must run outside the graph");
  g->flushed = true;
  auto it = current.find(g->device);
  bool was_current = it != current.end() && it->second == g;
  if (was_current) current.erase(it);
  count((std::string("flush.") + reason).c_str());
  if (mode == EagerMode::DeferAndFuse && g->nodes.size() >= kMinRepeatNodes)
    flushed_graphs[g->rolling_hash] = g->nodes.size();

  std::vector<std::shared_ptr<DeviceBuffer>> live;
  std::vector<std::pair<int, int>> live_ids;
  live.reserve(g->results.size());
  live_ids.reserve(g->results.size());
  for (size_t n = 0; n < g->results.size(); ++n) {
    for (size_t r = 0; r < g->results[n].size(); ++r) {
      if (auto b = g->results[n][r].lock()) {
        live.push_back(std::move(b));
        live_ids.emplace_back(static_cast<int>(n), static_cast<int>(r));
      }
    }
  }
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

// Debug mode: wait for the op and check its results.
void check_after(const std::vector<std::shared_ptr<DeviceBuffer>>& results, const Graph& g);

// The graph torch.compile records into, while it captures.
std::shared_ptr<Graph> capture_graph;

// ---------------------------------------------------------------- recording

struct Prepared {
  Node node;
  LocalBases bases;
  std::string sig;
};

// The node of `call` as if it were alone: its input bases are local
// parameters. Its signature keys the type cache and, with connectivity, the
// graph key. Takes the call's arguments and views.
void prepare(OpCall& call, Prepared& p) {
  const lowering::Lowering* lowering = call.lowering;
  Node& node = p.node;
  LocalBases& bases = p.bases;
  std::string& sig = p.sig;
  node.lowering = lowering;
  node.default_float = call.default_float;
  sig.reserve(256);
  sig += lowering->name;
  sig += '|';
  sig += hlo::mlir_name(call.default_float);
  auto local_ref = [&](Storage* s) {
    BaseRef r;
    r.param = bases.index_of(s->base);
    return r;
  };
  node.inputs.resize(call.args.size());
  for (size_t i = 0; i < call.args.size(); ++i) {
    append_arg(sig, call.args[i], lowering->static_numbers);
    auto& ins = call.inputs[i];
    auto& node_ins = node.inputs[i];
    node_ins.reserve(ins.size());
    for (auto& in : ins) {
      if (!in) {
        node_ins.emplace_back(std::nullopt);
        sig += 'N';
        continue;
      }
      BaseRef r = local_ref(in->storage);
      append_view(sig, r.param, in->storage->base->type(), in->view);
      node_ins.emplace_back(NodeInput{r, std::move(in->view)});  // the caller is done with it
    }
  }
  node.dests.reserve(call.destinations.size());
  for (size_t j = 0; j < call.destinations.size(); ++j) {
    node.dests.emplace_back(std::nullopt);
    if (!call.destinations[j]) continue;
    const Destination& d = *call.destinations[j];
    NodeDest nd;
    nd.view = d.target.view;
    nd.check_cast = d.check_cast;
    sig += "|D";
    if (!covers_storage(d.target.view, d.target.storage->nbytes)) {
      nd.old_base = local_ref(d.target.storage);
      append_view(sig, nd.old_base->param, d.target.storage->base->type(), nd.view);
    } else {
      d.target.view.append_key(sig);
      sig += 'F';
    }
    sig += d.check_cast ? 'c' : '-';
    node.dests.back() = std::move(nd);
  }
  node.args = std::move(call.args);  // the caller is done with them
  node.types = node_types(sig, node, bases.buffers);
}

// A padded base read any other way than whole (runtime/dynamic_dims.h) is
// made exact first.
void unpad_inputs(OpCall& call) {
  for (auto& ins : call.inputs)
    for (auto& in : ins)
      if (in && !in->padded && in->storage->base->padded()) unpad(*in->storage);
  for (auto& d : call.destinations)
    if (d && d->target.storage->base->padded()) unpad(*d->target.storage);
}

std::vector<std::shared_ptr<DeviceBuffer>> record(OpCall& call) {
  Runtime& rt = Runtime::get();
  rt.check_device(call.device);
  const lowering::Lowering* lowering = call.lowering;
  unpad_inputs(call);
  Prepared prepared;
  prepare(call, prepared);
  Node& node = prepared.node;
  LocalBases& bases = prepared.bases;
  const std::string& sig = prepared.sig;
  node.origin = std::move(call.origin);
  if (!node.origin && origin_provider) node.origin = origin_provider();
  count("ops_recorded");

  const auto& types = node.types->results;
  std::vector<std::shared_ptr<DeviceBuffer>> results(types.size());
  auto finish = [&](std::vector<std::shared_ptr<DeviceBuffer>>& res) {
    std::vector<std::shared_ptr<DeviceBuffer>> outputs(res.size());
    for (size_t j = 0; j < res.size(); ++j) {
      if (j < call.destinations.size() && call.destinations[j])
        call.destinations[j]->target.storage->base = res[j];
      else
        outputs[j] = res[j];
    }
    return outputs;
  };

  // An input that failed poisons this op's results without running it.
  for (const auto& b : bases.buffers) {
    if (b->state() == DeviceBuffer::State::Error) {
      for (size_t j = 0; j < types.size(); ++j)
        results[j] = DeviceBuffer::error(types[j], b->error_message(), call.device, b->error_kind());
      return finish(results);
    }
  }

  if (auto it = current.find(call.device); it != current.end() && it->second->cut_due)
    flush_locked(it->second, "repeat");
  std::shared_ptr<Graph>& slot = current[call.device];
  if (!slot) slot = Graph::create(call.device);
  std::shared_ptr<Graph> g = slot;
  int n = static_cast<int>(g->nodes.size());
  // Local parameters become graph parameters or links to earlier nodes.
  std::vector<BaseRef> global(bases.buffers.size());
  std::string links;
  for (size_t i = 0; i < bases.buffers.size(); ++i) {
    const auto& b = bases.buffers[i];
    BaseRef r;
    if (b->graph() == g) {
      r.node = b->graph_node();
      r.result = b->graph_result();
      links += 'n';
      append_int(links, r.node, '.');
      append_int(links, r.result, ',');
    } else {
      r.param = g->param_of(b);
      links += 'p';
      append_int(links, r.param, ',');
    }
    global[i] = r;
  }
  for (auto& ins : node.inputs)
    for (auto& in : ins)
      if (in) in->base = global[in->base.param];
  for (auto& d : node.dests)
    if (d && d->old_base) d->old_base = global[d->old_base->param];
  // Which graph parameter each destination's storage held before this
  // graph began writing it (through earlier nodes' writes, too).
  std::vector<int> replaced(types.size(), -1);
  for (size_t j = 0; j < call.destinations.size() && j < types.size(); ++j) {
    if (!call.destinations[j]) continue;
    const auto& old = call.destinations[j]->target.storage->base;
    for (size_t i = 0; i < bases.buffers.size(); ++i) {
      if (bases.buffers[i] != old) continue;
      const BaseRef& r = global[i];
      replaced[j] = r.param >= 0 ? r.param : g->replaced_param[r.node][r.result];
      break;
    }
  }
  bases.buffers.clear();  // the graph holds them now; donation counts owners
  g->key += sig;
  g->key += '{';
  g->key += links;
  g->key += '}';
  g->rolling_hash = fnv(fnv(g->rolling_hash, sig), links);
  g->nodes.push_back(std::move(node));
  g->results.emplace_back(types.size());
  g->replaced_param.push_back(std::move(replaced));
  for (size_t j = 0; j < types.size(); ++j) {
    results[j] = DeviceBuffer::pending(types[j], call.device, g, n, static_cast<int>(j),
                                       lowering->name);
    g->results[n][j] = results[j];
  }
  std::vector<std::shared_ptr<DeviceBuffer>> outputs = finish(results);

  if (g->capturing) return outputs;
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
  return outputs;
}

// ---------------------------------------------------------------- debug checks

std::vector<Value> has_nonfinite(lowering::Context& ctx, const lowering::Args& args) {
  hlo::Builder& b = ctx.b;
  Value x = args[0].as_tensor();
  std::vector<int64_t> all(x.rank());
  for (int64_t i = 0; i < x.rank(); ++i) all[i] = i;
  Value bad = b.not_(b.is_finite(x));
  return {x.rank() ? b.reduce_or(bad, all) : bad};
}
const lowering::Lowering kHasNonfinite{"tpu::has_nonfinite", &has_nonfinite, false};

void check_after(const std::vector<std::shared_ptr<DeviceBuffer>>& results, const Graph& g) {
  for (const auto& r : results) r->wait();  // raises the op's error here, at the op
  if (!env().debug_nans) return;
  for (const auto& r : results) {
    const TensorType type = r->logical_type();  // a padded result's padding is not checked
    if (!hlo::is_float(type.dtype) || type.numel() == 0) continue;
    Storage s(type.nbytes(), r->device());
    s.base = r;
    ViewGeometry whole = whole_view(type);
    OpCall call;
    call.lowering = &kHasNonfinite;
    Arg a;
    a.kind = Arg::Kind::Tensor;
    call.args.push_back(a);
    call.inputs.push_back({TensorInput{&s, whole}});
    call.device = r->device();
    EagerMode saved = mode;
    mode = EagerMode::Strict;  // the check itself is not checked
    auto flag = record(call)[0];
    mode = saved;
    uint8_t found = 0;
    flag->to_host(&found);
    TPU_CHECK(!found, ErrorKind::Runtime, "TORCH_TPU_DEBUG_NANS: tpu op ", g.describe(0),
              " produced NaN or Inf");
  }
}

// Numbers repeat (alpha=1, a learning rate, 0.5): their device buffers are
// immutable, so one upload per distinct (type, value) serves every launch.
// They are the runtime's constants, not tensors: memory stats leave them out.
std::shared_ptr<pjrt::Buffer> number_buffer(const lowering::Number& n, ElementType t, int device) {
  uint8_t bytes[16] = {0};
  encode_number(n, t, bytes);
  std::string key(reinterpret_cast<const char*>(bytes), hlo::byte_size(t));
  key += static_cast<char>(t);
  key += static_cast<char>(device);
  static std::mutex cache_mu;
  static std::unordered_map<std::string, std::shared_ptr<pjrt::Buffer>> cache;
  std::lock_guard<std::mutex> lock(cache_mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  if (cache.size() >= 4096) cache.clear();  // bounded: values like step counts never repeat
  std::shared_ptr<pjrt::Buffer> buf =
      Runtime::get().client().from_host(bytes, hlo::scalar_type(t), device);
  cache.emplace(key, buf);
  return buf;
}

std::vector<hlo::Value> identity(lowering::Context&, const lowering::Args& args) {
  return {args[0].as_tensor()};
}
const lowering::Lowering kContiguous{"tpu::contiguous", &identity, false};

// Copies that resolve PyTorch's lazy conjugate / negative bits.
std::vector<hlo::Value> conj_neg(lowering::Context& ctx, const lowering::Args& args) {
  hlo::Builder& b = ctx.b;
  Value x = args[0].as_tensor();
  if ((args[1].i & kCopyConjugate) && hlo::is_complex(x.dtype()))
    x = b.complex(b.real(x), b.neg(b.imag(x)));
  if (args[1].i & kCopyNegate) x = b.neg(x);
  return {x};
}
const lowering::Lowering kConjNeg{"tpu::conj_neg", &conj_neg, false};

}  // namespace

// ---------------------------------------------------------------- public

std::vector<std::shared_ptr<DeviceBuffer>> run_op(OpCall& call) {
  std::lock_guard<std::recursive_mutex> lock(mu);
  std::vector<std::unique_ptr<Storage>> staged;  // boxes cut out of padded inputs
  // A capture bakes Numbers into its program: padded sizes must not be among
  // them, so a capture reads padded tensors exact.
  if (!capture_graph)
    if (auto padded = run_padded(call, staged)) return std::move(*padded);
  return record(call);
}

bool capturing() {
  std::lock_guard<std::recursive_mutex> lock(mu);
  return capture_graph != nullptr;
}

std::vector<hlo::TensorType> result_types(OpCall call) {
  std::lock_guard<std::recursive_mutex> lock(mu);
  Prepared p;
  prepare(call, p);
  return p.node.types->results;
}

std::vector<std::shared_ptr<DeviceBuffer>> run_op_alone(OpCall& call) {
  std::lock_guard<std::recursive_mutex> lock(mu);
  struct Aside {  // the recording graph and the mode, restored on the way out
    int device;
    std::shared_ptr<Graph> recording;
    EagerMode saved = mode;
    ~Aside() {
      mode = saved;
      if (recording) current[device] = std::move(recording);
    }
  } aside{call.device, nullptr};
  if (auto it = current.find(call.device); it != current.end()) {
    aside.recording = std::move(it->second);
    current.erase(it);
  }
  mode = EagerMode::Strict;
  return record(call);
}

void flush_graph(const std::shared_ptr<Graph>& graph, const char* reason) {
  std::lock_guard<std::recursive_mutex> lock(mu);
  flush_locked(graph, reason);
  settle_locked(graph);
}

void flush_all(const char* reason) {
  std::lock_guard<std::recursive_mutex> lock(mu);
  while (!current.empty()) {
    std::shared_ptr<Graph> g = current.begin()->second;  // flushing erases the map's copy
    flush_locked(g, reason);
  }
  while (!in_flight.empty()) settle_locked(in_flight.back());
}

int64_t graphs_in_flight() {
  std::lock_guard<std::recursive_mutex> lock(mu);
  return static_cast<int64_t>(in_flight.size());
}

void set_origin_provider(OriginProvider provider) { origin_provider = provider; }

void hold_repeat_cuts(bool hold) {
  std::lock_guard<std::recursive_mutex> lock(mu);
  hold_cuts = hold;
}

// ---------------------------------------------------------------- capture

namespace {

void drop_capture() {
  if (!capture_graph) return;
  auto it = current.find(capture_graph->device);
  if (it != current.end() && it->second == capture_graph) current.erase(it);
  capture_graph->capturing = false;
  capture_graph->flushed = true;
  // What was recorded only stood for the program's values; it never runs.
  for (auto& node_results : capture_graph->results)
    for (auto& weak : node_results)
      if (auto b = weak.lock())
        b->set_error("a tensor computed while capturing a torch.compile graph has no value");
  capture_graph.reset();
}
}  // namespace

void begin_capture(int device) {
  std::lock_guard<std::recursive_mutex> lock(mu);
  Runtime::get().check_device(device);
  TPU_CHECK(!capture_graph, ErrorKind::Runtime, "a torch.compile capture is already running");
  flush_all("capture");
  capture_graph = Graph::create(device);
  capture_graph->capturing = true;
  current[device] = capture_graph;
}

void abort_capture() {
  std::lock_guard<std::recursive_mutex> lock(mu);
  drop_capture();
}

std::shared_ptr<CapturedProgram> end_capture(const std::vector<std::shared_ptr<DeviceBuffer>>& inputs,
                                             const std::vector<std::shared_ptr<DeviceBuffer>>& outputs,
                                             const std::vector<int>& updates) {
  std::lock_guard<std::recursive_mutex> lock(mu);
  TPU_CHECK(capture_graph, ErrorKind::Runtime, "end_capture without begin_capture");
  TPU_CHECK(updates.size() == inputs.size(), ErrorKind::Runtime, "end_capture: ", updates.size(),
            " updates for ", inputs.size(), " inputs");
  std::shared_ptr<Graph> g = capture_graph;
  struct Guard {
    ~Guard() { drop_capture(); }
  } guard;
  auto program = std::shared_ptr<CapturedProgram>(new CapturedProgram());
  program->device_ = g->device;
  for (const auto& in : inputs) program->input_types_.push_back(in->type());

  // Outputs may be buffers the graph computed or buffers it was given.
  hlo::Builder b;
  std::vector<Value> param_values;
  std::vector<NumberParam> numbers;
  for (const auto& out : outputs)
    if (out->graph() != g) g->param_of(out);
  auto results = build_graph(b, *g, param_values, numbers);
  std::vector<Value> outs;
  for (const auto& out : outputs) {
    Value v = out->graph() == g ? results[out->graph_node()][out->graph_result()]
                                : param_values[g->param_of(out)];
    outs.push_back(v);
    program->output_types_.push_back(v.type);
  }
  program->mlir_keep_ = b.module(outs);
  for (size_t p = 0; p < g->params.size(); ++p) {
    CapturedProgram::Source src;
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i] == g->params[p]) src.input = static_cast<int>(i);
    if (src.input < 0) src.constant = g->params[p];
    int k = src.input < 0 ? -1 : updates[src.input];
    if (k >= 0 && outs[k].type == param_values[p].type) {
      b.alias_parameter(param_values[p], k);
      src.donated = true;
    }
    program->params_.push_back(src);
  }
  for (const NumberParam& np : numbers) {
    const Arg& a = g->nodes[np.node].args[np.arg];
    uint64_t count = 1;
    for (const auto& t : g->nodes[np.node].types->outputs) count = std::max<uint64_t>(count, t.numel());
    program->numbers_.push_back({number_of(a, np), np.type, np.rng, count});
  }
  program->label_ = program_label(*g);
  program->label_.name = "torch.compile " + program->label_.name;
  program->exe_ = Runtime::get().compile(b.module(outs), program->output_types_, g->device,
                                         program->label_);
  count("captured_programs");
  return program;
}

const pjrt::Executable& CapturedProgram::executable(bool donating) const {
  if (donating) return *exe_;
  std::lock_guard<std::mutex> lock(keep_mu_);
  if (!exe_keep_) exe_keep_ = Runtime::get().compile(mlir_keep_, output_types_, device_, label_);
  return *exe_keep_;
}

std::vector<std::shared_ptr<DeviceBuffer>> CapturedProgram::run(
    const std::vector<std::shared_ptr<DeviceBuffer>>& inputs, const std::vector<bool>& exclusive,
    RngSource rng) const {
  TPU_CHECK(inputs.size() == input_types_.size() && exclusive.size() == inputs.size(),
            ErrorKind::Runtime, "compiled tpu program takes ", input_types_.size(), " inputs, got ",
            inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    TPU_CHECK(inputs[i]->type() == input_types_[i], ErrorKind::Runtime, "compiled tpu program input ",
              i, " must be ", input_types_[i].str(), ", got ", inputs[i]->type().str());
  std::vector<const pjrt::Buffer*> args;
  std::vector<bool> donated;
  bool donating = true;
  std::vector<std::shared_ptr<DeviceBuffer>> results;
  for (const Source& s : params_) {
    const auto& buf = s.input >= 0 ? inputs[s.input] : s.constant;
    if (buf->state() == DeviceBuffer::State::Error) {
      for (const auto& t : output_types_)
        results.push_back(DeviceBuffer::error(t, buf->error_message(), device_, buf->error_kind()));
      return results;
    }
    args.push_back(&buf->buffer());
    donated.push_back(s.donated);
    if (s.donated && !exclusive[s.input]) donating = false;
  }
  if (!donating) donated.assign(donated.size(), false);
  std::vector<std::shared_ptr<pjrt::Buffer>> numbers;
  std::vector<std::unique_ptr<pjrt::Buffer>> states;
  for (const Number& n : numbers_) {
    if (n.rng) {
      auto [seed, offset] = rng(device_, n.rng_count);
      states.push_back(rng_state_buffer(seed, offset, device_));
      args.push_back(states.back().get());
    } else {
      numbers.push_back(number_buffer(n.value, n.type, device_));
      args.push_back(numbers.back().get());
    }
  }
  std::vector<std::unique_ptr<pjrt::Buffer>> outs;
  try {
    outs = execute(executable(donating), args, donated, device_,
                   {label_.name, label_.ops, "hit", current_correlation()});
  } catch (const Error& e) {
    for (const auto& t : output_types_)
      results.push_back(DeviceBuffer::error(t, std::string("compiled tpu program failed: ") + e.what(), device_));
    return results;
  }
  for (auto& o : outs)
    results.push_back(DeviceBuffer::materialized(std::move(o), "torch.compile program", device_));
  return results;
}

EagerMode eager_mode() { return mode; }

void set_eager_mode(EagerMode m) {
  std::lock_guard<std::recursive_mutex> lock(mu);
  if (m != mode) flush_all("mode_switch");
  mode = m;
}

const char* eager_mode_name(EagerMode m) {
  switch (m) {
    case EagerMode::Strict: return "strict";
    case EagerMode::Debug: return "debug";
    case EagerMode::DeferAndFuse: return "defer_and_fuse";
  }
  return "?";
}

std::shared_ptr<DeviceBuffer> upload(const void* data, const TensorType& type, int device) {
  Runtime& rt = Runtime::get();
  rt.check_device(device);
  count("bytes_to_device", type.nbytes());
  check_allocation(device, type.nbytes(), "copy from host");
  return DeviceBuffer::materialized(rt.client().from_host(data, type, device), "copy from host",
                                    device);
}

std::shared_ptr<DeviceBuffer> constant(const void* data, const TensorType& type, int device) {
  std::string key(static_cast<const char*>(data), type.nbytes());
  key += type.str();
  key += '@';
  key += std::to_string(device);
  static std::mutex cache_mu;
  static std::unordered_map<std::string, std::shared_ptr<DeviceBuffer>> cache;
  std::lock_guard<std::mutex> lock(cache_mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  if (cache.size() >= 4096) cache.clear();
  Runtime& rt = Runtime::get();
  rt.check_device(device);
  auto buf = DeviceBuffer::materialized(rt.client().from_host(data, type, device), "constant",
                                        device, /*counted=*/false);
  cache.emplace(key, buf);
  return buf;
}

std::shared_ptr<DeviceBuffer> read_contiguous(const TensorInput& input) {
  // A padded base is returned as it is: copies to the host drop its padding.
  if (is_identity(input.view, input.storage->base->logical_type())) return input.storage->base;
  OpCall call;
  call.lowering = &kContiguous;
  Arg a;
  a.kind = Arg::Kind::Tensor;
  call.args.push_back(a);
  call.inputs.push_back({input});
  call.device = input.storage->device;
  return run_op(call)[0];
}

void copy_into(const TensorInput& dst, const TensorInput& src, int transform) {
  check_writable(dst.view, "copy_");
  if (transform == 0 && covers_storage(dst.view, dst.storage->nbytes) &&
      src.view.sizes == dst.view.sizes && src.view.dtype == dst.view.dtype) {
    dst.storage->base = read_contiguous(src);
    return;
  }
  OpCall call;
  call.lowering = transform ? &kConjNeg : &kContiguous;
  Arg a;
  a.kind = Arg::Kind::Tensor;
  call.args.push_back(a);
  if (transform) {
    Arg flags;
    flags.kind = Arg::Kind::Int;
    flags.index = 1;
    flags.i = transform;
    call.args.push_back(flags);
  }
  call.inputs.push_back({src});
  if (transform) call.inputs.emplace_back();
  call.destinations.push_back(Destination{dst, false});
  call.device = dst.storage->device;
  run_op(call);
}

}  // namespace torch_tpu::runtime
