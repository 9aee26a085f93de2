// What the executor's files share (runtime/executor.h is the public face).
// An op's way through them, in order:
//   recorder.cpp       the op becomes a node of its device's recording graph
//                      (strict_hit.cpp: or, a strict op whose program is
//                      cached, launches at once without one);
//   program_key.cpp    the node's signature and, at a launch, the program key;
//   cut_policy.cpp     after each node: flush now (strict, debug, a cut) or keep;
//   flush.cpp          a flush takes the graph's live results and launches it;
//   launch.cpp         the program is found or built, its arguments fed, and it
//                      launches here or on the worker; settling adopts results;
//   compile_worker.cpp the threads that compile side by side and launch in
//                      flush order;
//   debug_checks.cpp   debug mode's wait and NaN/Inf check after an op.
// Beside that path: capture.cpp (torch.compile), eager_mode.cpp (the mode
// and its switch), copies.cpp (uploads, constants and copies through views).
//
// One recursive mutex (`mu`) guards the state below: the entry points that
// record, flush, settle or capture take it first (recursive: reading a
// buffer under it may flush the graph producing it). The compile workers
// never take it: a job touches only itself (and reads its producers'
// published outputs under their own lock).
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/error.h"
#include "runtime/counters.h"
#include "runtime/device_timeline.h"
#include "runtime/eager_mode.h"
#include "runtime/executor.h"
#include "runtime/runtime.h"

namespace torch_tpu::runtime {

// A compiled graph and what each launch must feed it. A new program is in
// the cache from the moment its job is submitted, so that the same graph
// recorded again meanwhile waits for that compile instead of starting its
// own; until the compile ends it is not `ready`, and only the worker, which
// launches in submission order, may launch it.
struct CompileJob;
struct CompiledProgram {
  std::unique_ptr<pjrt::Executable> exe;  // null if the compile failed
  std::vector<NumberParam> numbers;  // parameters after the graph's buffers
  std::vector<bool> donated;         // per graph buffer parameter
  std::atomic<bool> ready{true};
  // Its compile ahead (runtime/dynamic_dims.h) while queued: a launch that
  // needs the program first compiles it itself (CompileJob::claim).
  std::weak_ptr<CompileJob> ahead;
  std::string compile_error;  // when the compile failed
  ErrorKind compile_error_kind = ErrorKind::Runtime;
};

struct CompileJob;
// An argument that an earlier job on the worker produces: its output `out`,
// read when this job launches (the worker launches in submission order).
struct PendingArg {
  size_t arg;
  std::shared_ptr<CompileJob> producer;
  size_t out;
};

// One launch of a graph: compile (if new) and execute. It runs on the
// calling thread or on the compile worker, touching nothing but its own
// fields (and reading its producers' outputs); the recording thread then
// adopts its outputs into the graph's live buffers.
struct CompileJob {
  std::shared_ptr<CompiledProgram> program;
  std::string key, mlir;
  std::vector<hlo::TensorType> out_types;
  int device = 0;
  std::vector<const pjrt::Buffer*> args;
  std::vector<PendingArg> pending;  // args still null: produced on the worker
  std::vector<std::shared_ptr<DeviceBuffer>> params;
  std::vector<std::shared_ptr<pjrt::Buffer>> numbers;
  std::vector<std::unique_ptr<pjrt::Buffer>> states;
  std::vector<std::weak_ptr<DeviceBuffer>> live;  // when run on the worker
  ProgramLabel label;
  std::string injected_failure;  // _fail_next_launch: the launch fails with it
  CompileNote note;  // of compile_step, noted by launch_step (in launch order)
  // Results of run():
  std::vector<std::unique_ptr<pjrt::Buffer>> outs;
  std::vector<const pjrt::Buffer*> out_ptrs;  // outs as produced; adoption moves outs
  std::string error;
  ErrorKind error_kind = ErrorKind::Runtime;
  bool input_failed = false;  // a producer failed: its error is the one to raise
  std::atomic<bool> claimed{false};  // a compile ahead: taken by its thread or a launch
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;

  // run() = compile_step(), launch_step(), finish(); the worker compiles
  // jobs side by side and launches them one at a time, in order, and
  // publishes their outputs (out_ptrs) for the jobs after them.
  void run();
  void compile_step();
  void launch_step();
  void finish(bool publish_outputs);
  // A compile ahead: true for the one thread that is to compile it.
  bool claim() { return !claimed.exchange(true); }
  bool finished();
  void wait();
  // Gives output k to targets[k] (or the error to all of them).
  void adopt(const std::vector<std::shared_ptr<DeviceBuffer>>& targets);
  // adopt() for the live results still held by someone.
  void adopt_live();
};

namespace executor {

// ---- state, guarded by `mu`
extern std::recursive_mutex mu;
extern std::map<int, std::shared_ptr<Graph>>& current;  // the recording graph of each device
extern EagerMode mode;
extern std::shared_ptr<Graph>& capture_graph;  // the graph torch.compile records into
extern std::vector<std::shared_ptr<Graph>>& in_flight;  // compiling or launching on the worker

// ---- recorder.cpp
std::vector<std::shared_ptr<DeviceBuffer>> record(OpCall& call);
// Where the op being recorded was issued, asked of the origin provider.
std::shared_ptr<const std::string> ask_origin();

// ---- program_key.cpp
uint64_t fnv(uint64_t h, const std::string& s);
// An argument's part of a node signature; Numbers by kind only unless the
// lowering bakes their values in (`static_numbers`).
void append_arg(std::string& key, const lowering::Arg& a, bool static_numbers);
// An input or destination view of the op's `local`-th distinct base.
void append_view(std::string& key, int local, const hlo::TensorType& base, const ViewGeometry& view);
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
// The value a Number parameter is fed: the argument's, or one element of it.
const lowering::Number& number_of(const lowering::Arg& a, const NumberParam& np);
// How a node's local base enters the graph key: graph parameter `param`,
// or result `result` of node `node`.
void append_param_link(std::string& links, int param);
void append_node_link(std::string& links, int node, int result);
// A launch's program key: the graph key, which results are live and which
// parameters are donated (to which output), and the device.
std::string launch_key(const Graph& g, const std::vector<std::pair<int, int>>& live_ids,
                       const std::vector<int>& alias);
// launch_key (into `key`) of the graph whose key is `graph_key` (null: an
// empty graph) with the node `sig` appended, its bases linked as `links`,
// the results `live_ids` live and none of the `params` donated.
void appended_node_key(std::string& key, const std::string* graph_key, const std::string& sig,
                       const std::string& links, const std::vector<std::pair<int, int>>& live_ids,
                       int params, int device);

// ---- strict_hit.cpp
// An op prepared by the recorder as if alone: its node, whose inputs name
// its distinct bases (local parameters), and its signature.
struct Prepared {
  Node node;
  LocalBases bases;
  std::string sig;
};
// Strict mode's cache hit without a graph (see strict_hit.cpp): the op's
// results, or nullopt when the op takes the general path.
std::optional<std::vector<std::shared_ptr<DeviceBuffer>>> strict_hit(const OpCall& call, Prepared& p);

// ---- cut_policy.cpp
// Flushes the device's recording graph first when a held repeat cut is due.
void flush_due_cut(int device);
// After a node is recorded: flush at once (strict, debug), at the size bound,
// or at a repeat (held while an optimizer step runs).
void cut_after_record(const std::shared_ptr<Graph>& g,
                      const std::vector<std::shared_ptr<DeviceBuffer>>& results);
// Notes the node of `call` about to be appended to `g` (its signature
// `sig`, its bases `links`) for the period detection; sets g.period when
// the graph's shapes have become two equal halves.
void track_period(Graph& g, const OpCall& call, const std::string& sig, const std::vector<BaseRef>& links);
// A flush of `g` begins: "repeat" when a held cut made it due (which ends
// the hold), else `reason`.
const char* flush_reason(const Graph& g, const char* reason);
// A flushed graph is remembered, so that a recording graph repeating it is cut.
void remember_flushed(const Graph& g);

// ---- flush.cpp
void flush_locked(std::shared_ptr<Graph> g, const char* reason);
// Appends the graph's results someone still holds, and (node, result) of each.
void live_results(const Graph& g, std::vector<std::shared_ptr<DeviceBuffer>>& live,
                  std::vector<std::pair<int, int>>& live_ids);

// ---- launch.cpp
// Every launch goes through here, so that synchronize() knows of it and its
// completion is stamped for timing events and the profiler.
std::vector<std::unique_ptr<pjrt::Buffer>> execute(const pjrt::Executable& exe,
                                                   const std::vector<const pjrt::Buffer*>& args,
                                                   const std::vector<bool>& donated, int device,
                                                   LaunchLabel label);
// A generator state as the ui64[2] parameter random lowerings read.
std::unique_ptr<pjrt::Buffer> rng_state_buffer(uint64_t seed, uint64_t offset, int device);
// A Number parameter's buffer, shared by every launch feeding the same value.
std::shared_ptr<pjrt::Buffer> number_buffer(const lowering::Number& n, hlo::ElementType t, int device);
std::string failure_message(const Graph& g, const std::string& what);
std::string failure_message(std::span<const Node> nodes, const std::string& what);
void poison(const std::vector<std::shared_ptr<DeviceBuffer>>& live, const std::string& message,
            ErrorKind kind = ErrorKind::Runtime);
// A graph's name in traces and logs: its op, or its op count, first and last op.
ProgramLabel program_label(const Graph& g);
ProgramLabel program_label(std::span<const Node> nodes);
// A launch's arguments: `params`, then the numbers and generator states of
// `nodes` the program takes; a parameter still being produced on the worker
// is fed there (job.pending). Returns the first parameter that carries an
// error (then nothing is fed past it), or null.
DeviceBuffer* feed_arguments(const std::vector<std::shared_ptr<DeviceBuffer>>& params,
                             std::span<const Node> nodes, int device,
                             const CompiledProgram& program, CompileJob& job);
// Runs `g`'s program with `live` (result live_ids[k] of the graph) as outputs.
void launch(Graph& g, std::vector<std::shared_ptr<DeviceBuffer>>& live,
            const std::vector<std::pair<int, int>>& live_ids);
// Compiles in the background the program launch() would run for `g`, unless
// it is cached; launches nothing (runtime/dynamic_dims.h: the next bucket).
void compile_ahead(Graph& g, const std::vector<std::shared_ptr<DeviceBuffer>>& live,
                   const std::vector<std::pair<int, int>>& live_ids);
// Takes the results of a graph whose program ran (or compiled) on the worker.
void settle_locked(const std::shared_ptr<Graph>& g);
// settle_locked() for the graphs in flight whose jobs have finished, oldest
// first, stopping at the first still running. Returns whether none is left.
bool settle_finished_locked();
// Whether `b` is a result of a graph handed to the worker, not settled yet.
inline bool on_worker(const DeviceBuffer& b) {
  return b.state() == DeviceBuffer::State::Deferred && b.graph() && b.graph()->job;
}

// ---- compile_worker.cpp
void submit_to_worker(std::shared_ptr<CompileJob> job);
// A compile nothing waits for in order: its own thread compiles it, and a
// launch of its program waits until it is ready (CompileJob::launch_step).
void submit_ahead(std::shared_ptr<CompileJob> job);

// ---- debug_checks.cpp
// Debug mode: wait for the op and check its results.
void check_after(const std::vector<std::shared_ptr<DeviceBuffer>>& results, const Graph& g);

}  // namespace executor
}  // namespace torch_tpu::runtime
