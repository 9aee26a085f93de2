// Launching a flushed graph, and settling it. A launch first takes the
// results of parameters still being produced on the worker, then pairs
// donatable parameters with outputs, which with the live results completes
// the program key. A cached program is launched at once; a new one is built
// from the graph's nodes (runtime/graph.h) and compiled. Its arguments are
// the graph's buffers, then its Numbers (one shared device buffer per
// distinct value) and generator states. In defer_and_fuse the job goes to
// the compile workers and the graph stays in flight until a result is
// needed (settle_locked). Strict sends a new program there too without
// waiting, and every op after it while anything is in flight (launches keep
// their order; an input still being produced is fed on the worker); debug
// waits for what it sends.
#include <algorithm>
#include <unordered_map>

#include "common/error.h"
#include "lowering/index_range.h"
#include "runtime/device_memory.h"
#include "runtime/executor_internal.h"
#include "runtime/failure_scope.h"
#include "runtime/number_bytes.h"
#include "runtime/profiler_events.h"

namespace torch_tpu::runtime::executor {

using hlo::ElementType;
using hlo::TensorType;
using hlo::Value;
using lowering::Arg;

// never destroyed: used during exit
std::vector<std::shared_ptr<Graph>>& in_flight = *new std::vector<std::shared_ptr<Graph>>;

std::unique_ptr<pjrt::Buffer> rng_state_buffer(uint64_t seed, uint64_t offset, int device) {
  uint64_t state[2] = {seed, offset};
  return Runtime::get().client().from_host(state, {ElementType::U64, {2}}, device);
}

std::vector<std::unique_ptr<pjrt::Buffer>> execute(const pjrt::Executable& exe,
                                                   const std::vector<const pjrt::Buffer*>& args,
                                                   const std::vector<bool>& donated, int device,
                                                   LaunchLabel label) {
  std::unique_ptr<pjrt::Event> finished;
  auto outs = exe.execute(args, donated, device, &finished);
  Runtime& rt = Runtime::get();
  note_launch_timing(finished.get(), device, std::move(label));
  rt.note_launch(std::move(finished));
  static const Counter launches("launches"), donations("donated_buffers");
  launches.add();
  donations.add(std::count(donated.begin(), donated.end(), true));
  return outs;
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
  // never destroyed: used during exit
  static auto& cache = *new std::unordered_map<std::string, std::shared_ptr<pjrt::Buffer>>;
  std::lock_guard<std::mutex> lock(cache_mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  if (cache.size() >= 4096) cache.clear();  // bounded: values like step counts never repeat
  std::shared_ptr<pjrt::Buffer> buf =
      Runtime::get().client().from_host(bytes, hlo::scalar_type(t), device);
  cache.emplace(key, buf);
  return buf;
}

// ---------------------------------------------------------------- failures and labels

std::string failure_message(std::span<const Node> nodes, const std::string& what) {
  if (nodes.size() == 1) return "tpu op " + describe(nodes[0]) + " failed: " + what;
  return "tpu graph of " + std::to_string(nodes.size()) + " ops (first " + describe(nodes.front()) +
         ", last " + describe(nodes.back()) + ") failed: " + what;
}

std::string failure_message(const Graph& g, const std::string& what) {
  return failure_message(g.nodes, what);
}

void poison(const std::vector<std::shared_ptr<DeviceBuffer>>& live, const std::string& message,
            ErrorKind kind) {
  for (const auto& b : live) b->set_error(message, kind);
}

ProgramLabel program_label(const Graph& g) { return program_label(g.nodes); }

ProgramLabel program_label(std::span<const Node> nodes) {
  // Index checks (runtime/index_flags.h) ride along with their ops: a strict
  // op's program is named after the op alone.
  std::vector<const Node*> ops;
  ops.reserve(nodes.size());
  for (const Node& n : nodes)
    if (n.lowering != &lowering::kIndexOutOfRange) ops.push_back(&n);
  if (ops.empty())
    for (const Node& n : nodes) ops.push_back(&n);
  ProgramLabel l;
  l.ops = static_cast<int>(ops.size());
  if (ops.empty()) return l;
  const std::string first = node_name(*ops.front());
  l.name = l.ops == 1 ? first
                      : "graph of " + std::to_string(l.ops) + " ops: " + first + " .. " +
                            node_name(*ops.back());
  if (ops.front()->origin) l.origin = *ops.front()->origin;
  l.correlation = current_correlation();
  return l;
}

// ---------------------------------------------------------------- launching

namespace {

// A parameter still being produced on the worker becomes a PendingArg of
// `job`, which must then launch there too, after its producer. False when
// `p` is not in flight.
bool feed_pending(const std::shared_ptr<DeviceBuffer>& p, CompileJob& job) {
  if (!on_worker(*p)) return false;
  const std::shared_ptr<CompileJob>& producer = p->graph()->job;
  for (size_t k = 0; k < producer->live.size(); ++k) {
    if (producer->live[k].lock() == p) {
      job.pending.push_back({job.args.size(), producer, k});
      job.args.push_back(nullptr);
      return true;
    }
  }
  return false;
}

}  // namespace

DeviceBuffer* feed_arguments(const std::vector<std::shared_ptr<DeviceBuffer>>& params,
                             std::span<const Node> nodes, int device,
                             const CompiledProgram& program, CompileJob& job) {
  job.args.reserve(params.size() + program.numbers.size());
  for (const auto& p : params) {
    if (p->state() == DeviceBuffer::State::Error) return p.get();
    if (!feed_pending(p, job)) job.args.push_back(&p->buffer());
  }
  for (const NumberParam& np : program.numbers) {
    const Arg& a = nodes[np.node].args[np.arg];
    if (np.rng) {
      job.states.push_back(rng_state_buffer(a.rng_seed, a.rng_offset, device));
      job.args.push_back(job.states.back().get());
    } else {
      job.numbers.push_back(number_buffer(number_of(a, np), np.type, device));
      job.args.push_back(job.numbers.back().get());
    }
  }
  return nullptr;
}

namespace {

// Donation: a parameter only this graph still holds may be overwritten by
// an output of the same type (in-place updates, optimizer steps). Its own
// new value -- the output that replaced it in its storage -- is paired
// with it first: XLA then updates the buffer in place, where pairing it
// with an unrelated output makes XLA copy the parameter before the write.
// Returns, per parameter, the live output it is aliased to or -1; `taken`
// marks the outputs that reuse a parameter's buffer.
std::vector<int> pair_donations(const Graph& g, const std::vector<std::shared_ptr<DeviceBuffer>>& live,
                                const std::vector<std::pair<int, int>>& live_ids,
                                std::vector<bool>& taken) {
  std::vector<int> alias(g.params.size(), -1);
  taken.assign(live.size(), false);
  // A parameter still being produced on the worker (strict) is donated as it
  // would be once produced, so that its program is the one later launches
  // with it at hand will look up; so is a fresh storage's, which its feeding
  // makes a buffer of its own.
  auto donatable = [&](size_t p, size_t k) {
    const auto& buf = g.params[p];
    const bool produced = buf->state() == DeviceBuffer::State::Materialized || on_worker(*buf) ||
                          buf->fresh_zeros();
    return alias[p] < 0 && !taken[k] && buf.use_count() - buf->job_holds() == 1 && produced &&
           live[k]->type() == buf->type();
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
  return alias;
}

// Builds the program of a graph not in the cache: its live results are the
// outputs, its donated parameters aliased to theirs. Returns its text.
std::string build_program(Graph& g, const std::vector<std::pair<int, int>>& live_ids,
                          const std::vector<int>& alias, CompiledProgram& program,
                          std::vector<TensorType>& out_types) {
  hlo::Builder b;
  std::vector<Value> param_values;
  auto results = build_graph(b, g, param_values, program.numbers);
  std::vector<Value> outs;
  for (const auto& [n, r] : live_ids) {
    outs.push_back(results[n][r]);
    out_types.push_back(results[n][r].type);
  }
  program.donated.assign(g.params.size(), false);
  for (size_t p = 0; p < alias.size(); ++p) {
    if (alias[p] < 0) continue;
    b.alias_parameter(param_values[p], alias[p]);
    program.donated[p] = true;
  }
  return b.module(outs);
}


// A job's error names the graph's ops, formatted only when it failed.
void name_failure(const Graph& g, CompileJob& job) {
  if (!job.error.empty()) job.error = failure_message(g, job.error);
}

// Runs the job: here when its program is compiled, its arguments are at
// hand and nothing launches before it on the worker; else on the worker,
// where the graph stays in flight while this thread records what comes
// next (strict's first steps: the host runs ahead while programs compile
// side by side). Debug mode waits for it at once: a wait can be interrupted
// (Ctrl-C), a compile on this thread could not.
void start(Graph& g, std::vector<std::shared_ptr<DeviceBuffer>>& live, std::shared_ptr<CompileJob> job) {
  const bool compiled = job->program->ready.load(std::memory_order_acquire);
  if (mode == EagerMode::DeferAndFuse || !compiled || !job->pending.empty() || !in_flight.empty()) {
    if (!job->mlir.empty()) Runtime::get().insert(job->key, job->program);
    for (const auto& p : job->params) p->add_job_hold(1);  // released by settle_locked
    job->live.assign(live.begin(), live.end());
    g.job = job;
    in_flight.push_back(g.shared_from_this());
    submit_to_worker(job);
    if (mode == EagerMode::Debug) settle_locked(g.shared_from_this());
    return;
  }
  job->run();
  name_failure(g, *job);
  job->adopt(live);
}

}  // namespace

void launch(Graph& g, std::vector<std::shared_ptr<DeviceBuffer>>& live,
            const std::vector<std::pair<int, int>>& live_ids) {
  Runtime& rt = Runtime::get();
  // Parameters still being produced on the worker are taken first in
  // defer_and_fuse and debug (donation asks which of them are materialized);
  // strict feeds them on the worker instead (feed_arguments).
  settle_finished_locked();
  for (const auto& p : g.params)
    if (p->state() == DeviceBuffer::State::Deferred && p->graph() &&
        !(mode == EagerMode::Strict && on_worker(*p)))
      settle_locked(p->graph());
  std::vector<bool> taken;
  std::vector<int> alias = pair_donations(g, live, live_ids, taken);
  std::string key = launch_key(g, live_ids, alias);

  check_rejected_for_test(g);
  std::shared_ptr<CompiledProgram> program = rt.lookup(key);
  std::string mlir;
  std::vector<TensorType> out_types;
  if (!program) {
    program = std::make_shared<CompiledProgram>();
    program->ready.store(false, std::memory_order_relaxed);  // until compile_step
    mlir = build_program(g, live_ids, alias, *program, out_types);
  }

  // An input that carries an error poisons every result.
  auto job = std::make_shared<CompileJob>();
  if (DeviceBuffer* failed = feed_arguments(g.params, g.nodes, g.device, *program, *job))
    return split_failed_graph(g, g.params, failed->error_message(), failed->error_kind());
  // New device memory: the outputs no donated input turns into.
  int64_t new_bytes = 0;
  for (size_t k = 0; k < live.size(); ++k)
    if (!taken[k]) new_bytes += live[k]->type().nbytes();
  check_allocation(g.device, new_bytes, [&] { return "tpu op " + g.describe(0); });
  rt.take_injected_failure(&job->injected_failure);  // fails when it launches, wherever that is
  job->program = program;
  job->params = g.params;  // kept alive (and donated) until the launch
  job->device = g.device;
  // A strict hit's label is read only by a running trace; compiles (logs)
  // and the worker's launches (a trace may start meanwhile) always name it.
  if (!mlir.empty() || mode == EagerMode::DeferAndFuse || tracing()) job->label = program_label(g);
  else job->label.correlation = current_correlation();
  if (!mlir.empty()) {
    job->key = std::move(key);
    job->mlir = std::move(mlir);
    job->out_types = std::move(out_types);
  }
  start(g, live, std::move(job));
}

void compile_ahead(Graph& g, const std::vector<std::shared_ptr<DeviceBuffer>>& live,
                   const std::vector<std::pair<int, int>>& live_ids) {
  Runtime& rt = Runtime::get();
  std::vector<bool> taken;
  std::vector<int> alias = pair_donations(g, live, live_ids, taken);
  std::string key = launch_key(g, live_ids, alias);
  if (rt.lookup(key, false)) return;
  auto job = std::make_shared<CompileJob>();
  job->program = std::make_shared<CompiledProgram>();
  job->program->ready.store(false, std::memory_order_relaxed);  // until compile_step
  job->mlir = build_program(g, live_ids, alias, *job->program, job->out_types);
  job->device = g.device;
  job->label = program_label(g);
  job->label.name += ", ahead";
  job->key = key;
  job->program->ahead = job;
  rt.insert(key, job->program);
  static const Counter ahead("compiled_ahead");
  ahead.add();
  submit_ahead(std::move(job));
}

namespace {

// A job whose producer failed carries that producer's error, named by its
// graph: the producers (all launched before this job) are settled first,
// and the parameter one poisoned poisons this graph's results (as
// feed_arguments' failed input does).
void settle_failed_input(Graph& g, CompileJob& job) {
  std::vector<std::shared_ptr<DeviceBuffer>> params = std::move(job.params);
  job.params.clear();
  for (const auto& b : params) {
    if (!on_worker(*b)) continue;
    std::shared_ptr<Graph> producer = b->graph();  // settling resets b's
    settle_locked(producer);
  }
  for (const auto& b : params)
    if (b->state() == DeviceBuffer::State::Error)
      return split_failed_graph(g, params, b->error_message(), b->error_kind());
  split_failed_graph(g, params, failure_message(g, job.error), job.error_kind);
}

}  // namespace

void settle_locked(const std::shared_ptr<Graph>& g) {
  if (!g->job) return;
  g->job->wait();  // if interrupted, the graph stays in flight, to be settled later
  std::shared_ptr<CompileJob> job = std::move(g->job);
  in_flight.erase(std::remove(in_flight.begin(), in_flight.end(), g), in_flight.end());
  for (const auto& p : job->params) p->add_job_hold(-1);
  if (job->input_failed) return settle_failed_input(*g, *job);
  name_failure(*g, *job);
  // A device failure (injected: _fail_next_launch) poisons the whole graph;
  // a compile error is split to the op at fault.
  if (!job->error.empty() && g->nodes.size() > 1 && job->injected_failure.empty()) {
    std::vector<std::shared_ptr<DeviceBuffer>> params = std::move(job->params);
    job->params.clear();
    return split_failed_graph(*g, params, job->error, job->error_kind);
  }
  job->adopt_live();
}

bool settle_finished_locked() {
  while (!in_flight.empty()) {
    std::shared_ptr<Graph> oldest = in_flight.front();
    if (!oldest->job->finished()) return false;
    settle_locked(oldest);
  }
  return true;
}

}  // namespace torch_tpu::runtime::executor
