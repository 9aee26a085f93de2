// torch.compile capture (runtime/executor.h: CapturedProgram). While a
// capture runs, the device's recording graph is the capture graph: ops are
// recorded as in any mode but never flushed (a flush inside it is an error:
// the value is data-dependent). end_capture builds one program from it whose
// parameters are the graph's parameters -- call inputs, or buffers captured
// with it as constants -- and compiles it with each updated input aliased to
// its new value. The program serves one set of values (they are in its key),
// so the graph's numbers and the scalars among its constants are literals,
// which XLA folds: pow(x, 2) becomes x * x. What was recorded only stood for
// the program's values: its buffers are turned into errors, never run.
#include <algorithm>
#include <cstring>

#include "runtime/executor_internal.h"
#include "runtime/profiler_events.h"

namespace torch_tpu::runtime {

using hlo::Value;
using lowering::Arg;

namespace executor {

std::shared_ptr<Graph>& capture_graph = *new std::shared_ptr<Graph>;  // never destroyed: used during exit

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

// The value of a scalar buffer captured as a constant (a number
// AOTAutograd lifted into a tensor), or none for anything else.
std::optional<lowering::Number> scalar_literal(DeviceBuffer& buffer) {
  const hlo::TensorType& t = buffer.type();
  // Materialized only: reading it runs nothing (no flush, no index check).
  if (!t.shape.empty() || buffer.state() != DeviceBuffer::State::Materialized) return std::nullopt;
  uint8_t bytes[8] = {0};
  lowering::Number n;
  auto read = [&](auto v) {
    buffer.buffer().to_host(bytes);
    std::memcpy(&v, bytes, sizeof(v));
    return v;
  };
  switch (t.dtype) {
    case hlo::ElementType::F64: n.kind = lowering::Number::Kind::Float; n.f = read(double()); break;
    case hlo::ElementType::F32: n.kind = lowering::Number::Kind::Float; n.f = read(float()); break;
    case hlo::ElementType::I64: n.i = read(int64_t()); break;
    case hlo::ElementType::I32: n.i = read(int32_t()); break;
    case hlo::ElementType::Bool: n.kind = lowering::Number::Kind::Bool; n.i = read(uint8_t()); break;
    default: return std::nullopt;  // rarer types stay parameters
  }
  return n;
}

}  // namespace
}  // namespace executor

bool capturing() {
  std::lock_guard<std::recursive_mutex> lock(executor::mu);
  return executor::capture_graph != nullptr;
}

void begin_capture(int device) {
  std::lock_guard<std::recursive_mutex> lock(executor::mu);
  Runtime::get().check_device(device);
  TPU_CHECK(!executor::capture_graph, ErrorKind::Runtime, "a torch.compile capture is already running");
  flush_all("capture");
  executor::capture_graph = Graph::create(device);
  executor::capture_graph->capturing = true;
  executor::current[device] = executor::capture_graph;
}

void abort_capture() {
  std::lock_guard<std::recursive_mutex> lock(executor::mu);
  executor::drop_capture();
}

std::shared_ptr<CapturedProgram> end_capture(const std::vector<std::shared_ptr<DeviceBuffer>>& inputs,
                                             const std::vector<std::shared_ptr<DeviceBuffer>>& outputs,
                                             const std::vector<int>& updates) {
  std::lock_guard<std::recursive_mutex> lock(executor::mu);
  TPU_CHECK(executor::capture_graph, ErrorKind::Runtime, "end_capture without begin_capture");
  TPU_CHECK(updates.size() == inputs.size(), ErrorKind::Runtime, "end_capture: ", updates.size(),
            " updates for ", inputs.size(), " inputs");
  std::shared_ptr<Graph> g = executor::capture_graph;
  struct Guard {
    ~Guard() { executor::drop_capture(); }
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
  // Scalar constants are read once: a buffer never changes.
  std::vector<int> input_of(g->params.size(), -1);
  std::vector<std::optional<lowering::Number>> literals(g->params.size());
  for (size_t p = 0; p < g->params.size(); ++p) {
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i] == g->params[p]) input_of[p] = static_cast<int>(i);
    if (input_of[p] < 0) literals[p] = executor::scalar_literal(*g->params[p]);
  }
  auto results = build_graph(b, *g, param_values, numbers, &literals);
  std::vector<Value> outs;
  for (const auto& out : outputs) {
    Value v = out->graph() == g ? results[out->graph_node()][out->graph_result()]
                                : param_values[g->param_of(out)];
    outs.push_back(v);
    program->output_types_.push_back(v.type);
  }
  program->mlir_keep_ = b.module(outs);
  for (size_t p = 0; p < g->params.size(); ++p) {
    if (literals[p]) continue;
    CapturedProgram::Source src;
    src.input = input_of[p];
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
    program->numbers_.push_back({executor::number_of(a, np), np.type, np.rng, count});
  }
  program->label_ = executor::program_label(*g);
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
      states.push_back(executor::rng_state_buffer(seed, offset, device_));
      args.push_back(states.back().get());
    } else {
      numbers.push_back(executor::number_buffer(n.value, n.type, device_));
      args.push_back(numbers.back().get());
    }
  }
  std::vector<std::unique_ptr<pjrt::Buffer>> outs;
  try {
    // The name is read only by a running trace: not copied per call otherwise.
    outs = executor::execute(executable(donating), args, donated, device_,
                             {tracing() ? label_.name : std::string(), label_.ops, "hit",
                              current_correlation()});
  } catch (const Error& e) {
    for (const auto& t : output_types_)
      results.push_back(DeviceBuffer::error(t, std::string("compiled tpu program failed: ") + e.what(), device_));
    return results;
  }
  static const std::string producer = "torch.compile program";
  for (size_t k = 0; k < outs.size(); ++k)
    results.push_back(DeviceBuffer::produced(output_types_[k], std::move(outs[k]), producer, device_));
  return results;
}

}  // namespace torch_tpu::runtime
