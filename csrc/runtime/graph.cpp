#include "runtime/graph.h"

#include <functional>
#include <mutex>
#include <unordered_map>

#include "common/error.h"
#include "common/release_queue.h"
#include "kernels/kernels.h"
#include "lowering/common.h"
#include "lowering/custom_call.h"
#include "lowering/padded.h"
#include "runtime/runtime.h"

namespace torch_tpu::runtime {

using hlo::ElementType;
using hlo::Value;
using lowering::Arg;

std::shared_ptr<Graph> Graph::create(int device) {
  return std::shared_ptr<Graph>(new Graph(device), [](Graph* g) {
    // Buffers go now: whether anyone else holds one decides donation.
    g->params.clear();
    release_later([g] { delete g; }, 0);
  });
}

int Graph::param_of(const std::shared_ptr<DeviceBuffer>& buffer) {
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i] == buffer) return static_cast<int>(i);
  params.push_back(buffer);
  return static_cast<int>(params.size()) - 1;
}

std::string node_name(const Node& node) {
  // A user kernel is named by its op, not by the lowering all of them share.
  if (node.lowering == &lowering::custom_call_lowering())
    return lowering::custom_module(static_cast<int>(node.args.at(0).i)).op_name;
  if (node.lowering == &lowering::padded_lowering()) return node.args.at(node.args.size() - 4).s + " (padded)";
  return node.lowering->name;
}

std::string describe(const Node& node) {
  std::string s = "'" + node_name(node) + "'";
  if (node.origin) s += " (at " + *node.origin + ")";
  return s;
}

std::string Graph::describe(int n) const { return runtime::describe(nodes[n]); }

namespace {

class NodeContext : public lowering::Context {
 public:
  NodeContext(hlo::Builder& b, const Node& node, int index, std::vector<NumberParam>& numbers,
              bool constant_numbers)
      : Context(b, node.default_float), node_(node), index_(index), numbers_(numbers),
        constant_numbers_(constant_numbers) {}

  Value number(const Arg& a, ElementType t) override {
    TPU_CHECK(a.kind == Arg::Kind::Number, ErrorKind::Type, "argument ", a.index,
              " is not a number");
    // A static value shapes the program (its value is in the signature).
    if (lowering::static_arg(*node_.lowering, static_cast<size_t>(a.index), node_.args.size()) ||
        constant_numbers_)
      return lowering::number_constant(b, a.number, t);
    numbers_.push_back({index_, a.index, t, false, a.element});
    return b.parameter(hlo::scalar_type(t));
  }

  Value rng_state(const Arg& a) override {
    TPU_CHECK(a.kind == Arg::Kind::Rng, ErrorKind::Type, "argument ", a.index,
              " is not a generator");
    numbers_.push_back({index_, a.index, ElementType::U64, true});
    return b.parameter({ElementType::U64, {2}});
  }

  std::string kernel_target(const std::string& name) override {
    const pjrt::Client& client = Runtime::get().client();
    return kernels::target(name, client.plugin(), client.platform_name());
  }

 private:
  const Node& node_;
  int index_;
  std::vector<NumberParam>& numbers_;
  bool constant_numbers_;
};

using Resolver = std::function<Value(const BaseRef&)>;

// Emits one node: reads its inputs through their views, applies the
// lowering, and writes destinations into their storages' bases. Returns the
// node's results and sets `outputs` to the lowering's output types.
std::vector<Value> build_node(hlo::Builder& b, const Node& node, int index, const Resolver& base_value,
                              std::vector<NumberParam>& numbers,
                              std::vector<hlo::TensorType>* outputs, bool constant_numbers = false) {
  lowering::Args args = node.args;
  for (size_t i = 0; i < args.size(); ++i) {
    Arg& a = args[i];
    a.fed = (a.kind == Arg::Kind::Number || a.kind == Arg::Kind::NumberList) &&
            !lowering::static_arg(*node.lowering, i, args.size());
    const auto& ins = node.inputs[i];
    if (a.kind == Arg::Kind::Tensor) {
      a.tensor = read_view(b, base_value(ins[0]->base), ins[0]->view);
    } else if (a.kind == Arg::Kind::TensorList) {
      a.tensors.clear();
      for (const auto& in : ins)
        a.tensors.push_back(in ? std::optional<Value>(read_view(b, base_value(in->base), in->view))
                               : std::nullopt);
    }
  }
  NodeContext ctx(b, node, index, numbers, constant_numbers);
  b.set_float32_precision(node.precision);
  std::vector<Value> out = node.lowering->fn(ctx, args);
  std::vector<Value> results;
  for (size_t j = 0; j < out.size(); ++j) {
    // A result whose byte size overflows int64 (torch.arange(2**62), a huge
    // repeat) would abort the plugin's compiler: refuse it here, as the CPU
    // refuses to allocate it.
    int64_t bytes = hlo::byte_size(out[j].dtype());
    for (int64_t d : out[j].shape())
      TPU_CHECK(!__builtin_mul_overflow(bytes, d, &bytes), ErrorKind::Runtime,
                "Storage size calculation overflowed with sizes=", hlo::shape_str(out[j].shape()));
    if (outputs) outputs->push_back(out[j].type);
    if (j >= node.dests.size() || !node.dests[j]) {
      results.push_back(out[j]);
      continue;
    }
    const NodeDest& d = *node.dests[j];
    Value v = out[j];
    if (d.check_cast) {
      TPU_CHECK(lowering::can_cast(v.dtype(), d.view.dtype), ErrorKind::Runtime, "result type ",
                hlo::short_name(v.dtype()), " can't be cast to the desired output type ",
                hlo::short_name(d.view.dtype));
      TPU_CHECK(v.shape() == d.view.sizes, ErrorKind::Runtime, "output with shape ",
                hlo::shape_str(d.view.sizes), " doesn't match the broadcast shape ",
                hlo::shape_str(v.shape()));
    } else {
      v = lowering::broadcast_to(b, v, d.view.sizes);
    }
    v = lowering::cast(b, v, d.view.dtype);
    results.push_back(d.old_base ? write_view(b, base_value(*d.old_base), d.view, v) : v);
  }
  return results;
}

}  // namespace

std::vector<std::vector<Value>> build_graph(hlo::Builder& b, Graph& g,
                                            std::vector<Value>& param_values,
                                            std::vector<NumberParam>& number_params,
                                            const std::vector<std::optional<lowering::Number>>* literals) {
  param_values.clear();
  for (size_t p = 0; p < g.params.size(); ++p) {
    const hlo::TensorType& type = g.params[p]->type();
    const bool literal = literals && (*literals)[p];
    param_values.push_back(literal ? lowering::number_constant(b, *(*literals)[p], type.dtype)
                                   : b.parameter(type));
  }
  std::vector<std::vector<Value>> results(g.nodes.size());
  Resolver resolve = [&](const BaseRef& r) -> Value {
    return r.param >= 0 ? param_values[r.param] : results[r.node][r.result];
  };
  for (size_t n = 0; n < g.nodes.size(); ++n)
    results[n] = build_node(b, g.nodes[n], static_cast<int>(n), resolve, number_params, nullptr,
                            /*constant_numbers=*/literals != nullptr);
  return results;
}

std::shared_ptr<const NodeTypes> node_types(const std::string& signature, const Node& node,
                                            const std::vector<std::shared_ptr<DeviceBuffer>>& bases) {
  static std::mutex mu;
  // never destroyed: used during exit
  static auto& cache = *new std::unordered_map<std::string, std::shared_ptr<const NodeTypes>>;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(signature);
    if (it != cache.end()) return it->second;
  }
  // Build the node alone, its input bases as parameters: this checks shapes
  // and dtypes (raising like the CPU) and gives the result types.
  hlo::Builder b;
  std::vector<Value> params;
  for (const auto& base : bases) params.push_back(b.parameter(base->type()));
  Resolver resolve = [&](const BaseRef& r) -> Value { return params.at(r.param); };
  std::vector<NumberParam> numbers;
  auto types = std::make_shared<NodeTypes>();
  for (const Value& v : build_node(b, node, 0, resolve, numbers, &types->outputs))
    types->results.push_back(v.type);
  std::lock_guard<std::mutex> lock(mu);
  cache.emplace(signature, types);
  return types;
}

}  // namespace torch_tpu::runtime
