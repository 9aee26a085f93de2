// The recorder: every op enters here (run_op) and becomes a node of its
// device's recording graph. The op is first prepared as if it were alone --
// its distinct input bases are local parameters, and its signature
// (program_key.cpp) finds its result types in a cache, so a known op costs
// no lowering. Then the local parameters are linked into the graph: a base
// this graph produced is a link to its node, any other buffer a graph
// parameter. The node's results are Deferred buffers pointing back at the
// graph; an in-place destination's storage takes its result as its new
// base. Last, the cut policy (cut_policy.cpp) decides whether the graph is
// flushed now. An op whose input carries an error records nothing: its
// results carry the error.
#include "common/key_text.h"
#include "runtime/dynamic_dims.h"
#include "runtime/executor_internal.h"

namespace torch_tpu::runtime {

namespace executor {

std::recursive_mutex mu;
// never destroyed: used during exit
std::map<int, std::shared_ptr<Graph>>& current = *new std::map<int, std::shared_ptr<Graph>>;

namespace {

OriginProvider origin_provider = nullptr;

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
  node.precision = call.precision;
  sig.reserve(256);
  sig += lowering->name;
  sig += '|';
  sig += hlo::mlir_name(call.default_float);
  sig += static_cast<char>('0' + static_cast<int>(call.precision));  // float32 matmul precision
  auto local_ref = [&](Storage* s) {
    BaseRef r;
    r.param = bases.index_of(s->base);
    return r;
  };
  node.inputs.resize(call.args.size());
  for (size_t i = 0; i < call.args.size(); ++i) {
    append_arg(sig, call.args[i], lowering::static_arg(*lowering, i, call.args.size()));
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

// Results written into a destination become its storage's new base (and
// are not returned); the others are the op's outputs.
std::vector<std::shared_ptr<DeviceBuffer>> finish(OpCall& call,
                                                  std::vector<std::shared_ptr<DeviceBuffer>>& res) {
  std::vector<std::shared_ptr<DeviceBuffer>> outputs(res.size());
  for (size_t j = 0; j < res.size(); ++j) {
    if (j < call.destinations.size() && call.destinations[j])
      call.destinations[j]->target.storage->base = res[j];
    else
      outputs[j] = res[j];
  }
  return outputs;
}

// The op's local parameters as graph parameters or links to earlier nodes
// of `g`; `links` spells which, for the graph key.
std::vector<BaseRef> link_bases(Graph& g, const std::vector<std::shared_ptr<DeviceBuffer>>& bases,
                                std::string& links) {
  std::vector<BaseRef> global(bases.size());
  for (size_t i = 0; i < bases.size(); ++i) {
    const auto& b = bases[i];
    BaseRef r;
    if (b->graph().get() == &g) {
      r.node = b->graph_node();
      r.result = b->graph_result();
      append_node_link(links, r.node, r.result);
    } else {
      r.param = g.param_of(b);
      append_param_link(links, r.param);
    }
    global[i] = r;
  }
  return global;
}

// Which graph parameter each destination's storage held before this graph
// began writing it (through earlier nodes' writes, too): donation pairs them.
std::vector<int> replaced_params(const Graph& g, const OpCall& call, size_t n_results,
                                 const std::vector<std::shared_ptr<DeviceBuffer>>& bases,
                                 const std::vector<BaseRef>& global) {
  std::vector<int> replaced(n_results, -1);
  for (size_t j = 0; j < call.destinations.size() && j < n_results; ++j) {
    if (!call.destinations[j]) continue;
    const auto& old = call.destinations[j]->target.storage->base;
    for (size_t i = 0; i < bases.size(); ++i) {
      if (bases[i] != old) continue;
      const BaseRef& r = global[i];
      replaced[j] = r.param >= 0 ? r.param : g.replaced_param[r.node][r.result];
      break;
    }
  }
  return replaced;
}

// Appends the prepared node to `g`; returns its results, Deferred on `g`.
std::vector<std::shared_ptr<DeviceBuffer>> append_node(const std::shared_ptr<Graph>& g, OpCall& call,
                                                       Prepared& prepared) {
  Node& node = prepared.node;
  LocalBases& bases = prepared.bases;
  const std::vector<hlo::TensorType>& types = node.types->results;
  const lowering::Lowering* lowering = call.lowering;
  int n = static_cast<int>(g->nodes.size());
  std::string links;
  std::vector<BaseRef> global = link_bases(*g, bases.buffers, links);
  for (auto& ins : node.inputs)
    for (auto& in : ins)
      if (in) in->base = global[in->base.param];
  for (auto& d : node.dests)
    if (d && d->old_base) d->old_base = global[d->old_base->param];
  std::vector<int> replaced = replaced_params(*g, call, types.size(), bases.buffers, global);
  bases.buffers.clear();  // the graph holds them now; donation counts owners
  g->key += prepared.sig;
  g->key += '{';
  g->key += links;
  g->key += '}';
  // Only the repeat cut reads the rolling hash (runtime/cut_policy.cpp).
  if (mode == EagerMode::DeferAndFuse) {
    g->rolling_hash = fnv(fnv(g->rolling_hash, prepared.sig), links);
    track_period(*g, call, prepared.sig, global);
  }
  std::vector<std::shared_ptr<DeviceBuffer>> results(types.size());
  g->nodes.push_back(std::move(node));
  g->results.emplace_back(types.size());
  g->replaced_param.push_back(std::move(replaced));
  for (size_t j = 0; j < types.size(); ++j) {
    results[j] = DeviceBuffer::pending(types[j], call.device, g, n, static_cast<int>(j),
                                       lowering->name);
    g->results[n][j] = results[j];
  }
  return results;
}

}  // namespace

std::vector<std::shared_ptr<DeviceBuffer>> record(OpCall& call) {
  Runtime& rt = Runtime::get();
  rt.check_device(call.device);
  unpad_inputs(call);
  Prepared prepared;
  prepare(call, prepared);
  Node& node = prepared.node;
  node.origin = std::move(call.origin);
  if (!node.origin) node.origin = ask_origin();
  static const Counter ops_recorded("ops_recorded");
  ops_recorded.add();

  // An input that failed poisons this op's results without running it.
  const auto& types = node.types->results;
  for (const auto& b : prepared.bases.buffers) {
    if (b->state() == DeviceBuffer::State::Error) {
      std::vector<std::shared_ptr<DeviceBuffer>> results(types.size());
      for (size_t j = 0; j < types.size(); ++j)
        results[j] = DeviceBuffer::error(types[j], b->error_message(), call.device, b->error_kind());
      return finish(call, results);
    }
  }

  if (auto results = strict_hit(call, prepared)) return finish(call, *results);
  flush_due_cut(call.device);
  std::shared_ptr<Graph>& slot = current[call.device];
  if (!slot) slot = Graph::create(call.device);
  std::shared_ptr<Graph> g = slot;
  std::vector<std::shared_ptr<DeviceBuffer>> results = append_node(g, call, prepared);
  std::vector<std::shared_ptr<DeviceBuffer>> outputs = finish(call, results);
  if (!g->capturing && !call.fuse_with_next) cut_after_record(g, results);
  return outputs;
}

}  // namespace executor

std::vector<std::shared_ptr<DeviceBuffer>> run_op(OpCall& call) {
  std::lock_guard<std::recursive_mutex> lock(executor::mu);
  std::vector<std::unique_ptr<Storage>> staged;  // boxes cut out of padded inputs
  // A capture bakes Numbers into its program: padded sizes must not be among
  // them, so a capture reads padded tensors exact.
  if (!executor::capture_graph)
    if (auto padded = run_padded(call, staged)) return std::move(*padded);
  return executor::record(call);
}

std::vector<hlo::TensorType> result_types(OpCall call) {
  std::lock_guard<std::recursive_mutex> lock(executor::mu);
  executor::Prepared p;
  executor::prepare(call, p);
  return p.node.types->results;
}

void compile_ahead(OpCall& call) {
  std::lock_guard<std::recursive_mutex> lock(executor::mu);
  if (executor::mode != EagerMode::Strict || executor::capture_graph) return;
  executor::Prepared prepared;
  executor::prepare(call, prepared);
  std::shared_ptr<Graph> g = Graph::create(call.device);  // a graph of its own, never launched
  std::vector<std::shared_ptr<DeviceBuffer>> live = executor::append_node(g, call, prepared);
  std::vector<std::pair<int, int>> live_ids;
  for (size_t j = 0; j < live.size(); ++j) live_ids.emplace_back(0, static_cast<int>(j));
  executor::compile_ahead(*g, live, live_ids);
}

std::vector<std::shared_ptr<DeviceBuffer>> run_op_alone(OpCall& call) {
  using executor::current;
  using executor::mode;
  std::lock_guard<std::recursive_mutex> lock(executor::mu);
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
  return executor::record(call);
}

void set_origin_provider(OriginProvider provider) { executor::origin_provider = provider; }

namespace executor {

std::shared_ptr<const std::string> ask_origin() { return origin_provider ? origin_provider() : nullptr; }

}  // namespace executor

}  // namespace torch_tpu::runtime
