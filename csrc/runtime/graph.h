// Every ATen op is first a node of a graph. A node names its lowering, its
// arguments, and where each input's storage base comes from: a buffer that
// already exists (a parameter of the graph) or a result of an earlier node.
// Its results are DeviceBuffers in the Deferred state that point back at the
// graph. Flushing the graph builds one StableHLO program from all its nodes,
// compiles it (or finds it in the cache) and launches it; the results that
// are still referenced become its outputs, the others are fused away.
//
// Strict and debug eager modes flush after every node; defer_and_fuse keeps
// recording until a value must leave the device or a cut point is reached
// (runtime/eager_mode.h).
//
// The graph's cache key is the concatenation of its nodes' signatures (op,
// attributes, input base types and views, destinations) with how nodes
// connect (parameter index or producing node), plus which results are live
// and which parameters are donated. Numbers and generator states are program
// parameters, so their values never enter the key.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lowering/registry.h"
#include "runtime/device_buffer.h"
#include "runtime/view.h"

namespace torch_tpu::runtime {

// Where a node reads a storage's base buffer from.
struct BaseRef {
  int param = -1;               // an existing buffer: index into Graph::params
  int node = -1, result = -1;   // or a result of an earlier node
};

struct NodeInput {
  BaseRef base;
  ViewGeometry view;
};

// An output written into an existing storage: the node's result is the
// storage's new base.
struct NodeDest {
  std::optional<BaseRef> old_base;  // absent when the write replaces the whole storage
  ViewGeometry view;
  bool check_cast = true;
};

// Output and result types of a node, cached by its signature so recording a
// known op costs no lowering.
struct NodeTypes {
  std::vector<hlo::TensorType> outputs;  // per lowering output
  std::vector<hlo::TensorType> results;  // output j, or the new base for destination j
};

struct Node {
  const lowering::Lowering* lowering = nullptr;
  lowering::Args args;
  std::vector<std::vector<std::optional<NodeInput>>> inputs;  // per argument
  std::vector<std::optional<NodeDest>> dests;                 // per lowering output
  std::shared_ptr<const NodeTypes> types;
  hlo::ElementType default_float = hlo::ElementType::F32;
  hlo::DotPrecision precision = hlo::DotPrecision::Highest;  // of its float32 products
  std::shared_ptr<const std::string> origin;  // "file.py:42", when known
};

// The op a node runs, as users know it: a user kernel by its op name, an op
// on padded inputs (runtime/dynamic_dims.h) as "aten::cat (padded)".
std::string node_name(const Node& node);
// "'aten::mm' (at model.py:12)", for messages about the node.
std::string describe(const Node& node);

struct CompileJob;  // runtime/executor_internal.h

class Graph : public std::enable_shared_from_this<Graph> {
 public:
  // A spent graph (a step's hundreds of nodes) is freed on the release
  // thread: the last reference drops on the hot path, when its results are
  // taken.
  static std::shared_ptr<Graph> create(int device);

  int device;
  std::vector<Node> nodes;
  std::vector<std::shared_ptr<DeviceBuffer>> params;
  // results[n][r]: the buffer of result r of node n while anyone holds it.
  std::vector<std::vector<std::weak_ptr<DeviceBuffer>>> results;
  // replaced_param[n][r]: the parameter whose storage result r of node n
  // became the new base of (an in-place write), or -1. Donation pairs them.
  std::vector<std::vector<int>> replaced_param;
  std::string key;
  uint64_t rolling_hash = 1469598103934665603ULL;
  // defer_and_fuse's period detection (runtime/cut_policy.cpp): each node's
  // place among the shaped nodes (-1: an index check); each shaped node's
  // shape and the rolling hash of the shapes through it; the periods still
  // being verified, and one found (the shapes are two equal halves).
  std::vector<int> shape_at;
  std::vector<uint64_t> shapes, shape_hashes;
  std::vector<size_t> periods;
  size_t period = 0;
  bool flushed = false;
  bool cut_due = false;  // complete: a held repeat cut (runtime/executor.h)
  bool capturing = false;  // recorded for torch.compile: never flushed, only captured
  // Set while its program compiles or launches on the worker (defer_and_fuse).
  std::shared_ptr<CompileJob> job;

  int param_of(const std::shared_ptr<DeviceBuffer>& buffer);
  // "aten::mm (at model.py:12)" for messages about node n.
  std::string describe(int n) const;

 private:
  explicit Graph(int device) : device(device) {}
};

// Builds the program of a graph into `b`: parameters first (one per external
// buffer), then every node in order. Returns each node's result values.
// Numbers and generator states become parameters as lowerings ask for them;
// `number_params` receives (node, argument, type) of each, in order.
// A program built for one set of values (a torch.compile capture) passes
// `literals`: its numbers become literals, which XLA folds, and so does each
// external buffer that has one there (no parameter is made for it).
struct NumberParam {
  int node, arg;
  hlo::ElementType type;
  bool rng;
  int element = -1;  // of a NumberList argument
};
std::vector<std::vector<hlo::Value>> build_graph(hlo::Builder& b, Graph& g,
                                                 std::vector<hlo::Value>& param_values,
                                                 std::vector<NumberParam>& number_params,
                                                 const std::vector<std::optional<lowering::Number>>*
                                                     literals = nullptr);

// The types of a node's outputs and results; builds the node alone (and
// raises its shape and dtype errors) the first time a signature is seen.
// `bases`: the node's distinct input bases, its local parameters.
std::shared_ptr<const NodeTypes> node_types(const std::string& signature, const Node& node,
                                            const std::vector<std::shared_ptr<DeviceBuffer>>& bases);

}  // namespace torch_tpu::runtime
