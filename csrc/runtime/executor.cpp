#include "runtime/executor.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>

#include "common/env.h"
#include "common/error.h"
#include "lowering/common.h"
#include "runtime/number_bytes.h"
#include "runtime/runtime.h"

namespace torch_tpu::runtime {

using hlo::ElementType;
using hlo::TensorType;
using hlo::Value;
using lowering::Arg;

// What a cached program needs on each launch, in parameter order, and where
// its results go.
struct ParamSource {
  enum class Kind { Slot, Number, Rng } kind;
  int index;        // slot index, or argument index
  ElementType type;  // Number's parameter type
};

struct ResultSink {
  bool to_destination;
  int index;  // output index
};

struct CompiledProgram {
  std::unique_ptr<pjrt::Executable> exe;
  std::vector<ParamSource> params;
  std::vector<ResultSink> results;
  std::vector<TensorType> output_types;  // per lowering output (before destination casts)
  std::vector<bool> donated;             // per parameter
};

namespace {

struct Slot {
  Storage* storage;
  bool read;  // needed as a parameter
};

int slot_of(std::vector<Slot>& slots, Storage* s, bool read) {
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].storage == s) {
      slots[i].read |= read;
      return static_cast<int>(i);
    }
  }
  slots.push_back({s, read});
  return static_cast<int>(slots.size()) - 1;
}

void append_input(std::string& key, std::vector<Slot>& slots, const TensorInput& in) {
  int slot = slot_of(slots, in.storage, true);
  key += 's';
  key += std::to_string(slot);
  key += in.storage->base->type().str();
  if (is_identity(in.view, in.storage->base->type())) key += '=';
  else in.view.append_key(key);
}

void append_arg(std::string& key, const Arg& a, bool static_numbers) {
  key += static_cast<char>('A' + static_cast<int>(a.kind));
  switch (a.kind) {
    case Arg::Kind::Int: key += std::to_string(a.i); break;
    case Arg::Kind::Float: key += std::to_string(a.f); break;
    case Arg::Kind::Bool: key += a.b ? '1' : '0'; break;
    case Arg::Kind::DType: key += hlo::mlir_name(a.dtype); break;
    case Arg::Kind::String: key += a.s; break;
    case Arg::Kind::IntList:
      for (int64_t v : a.ints) key += std::to_string(v) + ",";
      break;
    case Arg::Kind::FloatList:
      for (double v : a.floats) key += std::to_string(v) + ",";
      break;
    case Arg::Kind::BoolList:
      for (bool v : a.bools) key += v ? '1' : '0';
      break;
    case Arg::Kind::Number:
      key += static_cast<char>('0' + static_cast<int>(a.number.kind));
      if (static_numbers) {
        char buf[64];
        snprintf(buf, sizeof buf, "%.17g/%.17g/%lld", a.number.f, a.number.im,
                 static_cast<long long>(a.number.i));
        key += buf;
      }
      break;
    case Arg::Kind::Tensor:
      if (a.wrapped_number) key += 'w';
      break;
    default: break;
  }
  key += ';';
}

class BuildContext : public lowering::Context {
 public:
  BuildContext(hlo::Builder& b, ElementType default_float, const lowering::Args& args,
               CompiledProgram& program)
      : Context(b, default_float), args_(args), program_(program) {}

  Value number(const Arg& a, ElementType t) override {
    TPU_CHECK(a.kind == Arg::Kind::Number, ErrorKind::Type, "argument ", a.index,
              " is not a number");
    program_.params.push_back({ParamSource::Kind::Number, a.index, t});
    return b.parameter(hlo::scalar_type(t));
  }

  Value rng_state(const Arg& a) override {
    TPU_CHECK(a.kind == Arg::Kind::Rng, ErrorKind::Type, "argument ", a.index,
              " is not a generator");
    program_.params.push_back({ParamSource::Kind::Rng, a.index, ElementType::U64});
    return b.parameter({ElementType::U64, {2}});
  }

 private:
  const lowering::Args& args_;
  CompiledProgram& program_;
};

// Numbers are parameters unless the lowering asked for them statically: then
// they are constants of the program (their values are in the key).
class StaticContext : public BuildContext {
 public:
  using BuildContext::BuildContext;
  Value number(const Arg& a, ElementType t) override {
    TPU_CHECK(a.kind == Arg::Kind::Number, ErrorKind::Type, "argument ", a.index,
              " is not a number");
    if (a.number.kind == lowering::Number::Kind::Int || a.number.kind == lowering::Number::Kind::Bool) {
      return hlo::is_float(t) ? b.constant(static_cast<double>(a.number.i), t)
                              : b.constant_int(a.number.i, t);
    }
    return hlo::is_float(t) ? b.constant(a.number.f, t)
                            : b.constant_int(static_cast<int64_t>(a.number.f), t);
  }
};

std::shared_ptr<CompiledProgram> build(OpCall& call, const std::vector<Slot>& slots,
                                       const std::vector<bool>& full_write,
                                       const std::vector<bool>& donate) {
  auto program = std::make_shared<CompiledProgram>();
  hlo::Builder b;
  std::vector<Value> slot_params(slots.size());
  for (size_t i = 0; i < slots.size(); ++i) {
    if (!slots[i].read) continue;
    slot_params[i] = b.parameter(slots[i].storage->base->type());
    program->params.push_back({ParamSource::Kind::Slot, static_cast<int>(i), ElementType::U8});
  }
  auto slot_index = [&](Storage* s) {
    for (size_t i = 0; i < slots.size(); ++i)
      if (slots[i].storage == s) return static_cast<int>(i);
    fail(ErrorKind::Runtime, "internal: storage without a slot");
  };
  auto param_of = [&](Storage* s) { return slot_params[slot_index(s)]; };
  std::vector<int> donated_slots;

  for (size_t i = 0; i < call.args.size(); ++i) {
    Arg& a = call.args[i];
    const auto& ins = call.inputs[i];
    if (a.kind == Arg::Kind::Tensor) {
      a.tensor = read_view(b, param_of(ins[0]->storage), ins[0]->view);
    } else if (a.kind == Arg::Kind::TensorList) {
      a.tensors.clear();
      for (const auto& in : ins) {
        if (in) a.tensors.push_back(read_view(b, param_of(in->storage), in->view));
        else a.tensors.push_back(std::nullopt);
      }
    }
  }

  std::unique_ptr<BuildContext> ctx;
  if (call.lowering->static_numbers)
    ctx = std::make_unique<StaticContext>(b, call.default_float, call.args, *program);
  else
    ctx = std::make_unique<BuildContext>(b, call.default_float, call.args, *program);
  std::vector<Value> outputs = call.lowering->fn(*ctx, call.args);

  std::vector<Value> results;
  for (size_t j = 0; j < outputs.size(); ++j) {
    program->output_types.push_back(outputs[j].type);
    const std::optional<Destination>* dest =
        j < call.destinations.size() ? &call.destinations[j] : nullptr;
    if (dest == nullptr || !dest->has_value()) {
      program->results.push_back({false, static_cast<int>(j)});
      results.push_back(outputs[j]);
      continue;
    }
    const Destination& d = **dest;
    Value out = outputs[j];
    if (d.check_cast) {
      TPU_CHECK(lowering::can_cast(out.dtype(), d.target.view.dtype), ErrorKind::Runtime,
                "result type ", hlo::short_name(out.dtype()),
                " can't be cast to the desired output type ", hlo::short_name(d.target.view.dtype));
      TPU_CHECK(out.shape() == d.target.view.sizes, ErrorKind::Runtime, "output with shape ",
                hlo::shape_str(d.target.view.sizes), " doesn't match the broadcast shape ",
                hlo::shape_str(out.shape()));
    } else {
      out = lowering::broadcast_to(b, out, d.target.view.sizes);
    }
    out = lowering::cast(b, out, d.target.view.dtype);
    Value new_base = full_write[j] ? out : write_view(b, param_of(d.target.storage), d.target.view, out);
    int result_index = static_cast<int>(results.size());
    if (donate[j]) {
      // Aliasing needs identical types; the plugin then updates in place.
      int slot = slot_index(d.target.storage);
      if (slot_params[slot].valid() && slot_params[slot].type == new_base.type) {
        b.alias_parameter(slot_params[slot], result_index);
        donated_slots.push_back(slot);
      }
    }
    program->results.push_back({true, static_cast<int>(j)});
    results.push_back(new_base);
  }

  program->donated.assign(program->params.size(), false);
  for (size_t p = 0; p < program->params.size(); ++p) {
    const ParamSource& src = program->params[p];
    program->donated[p] = src.kind == ParamSource::Kind::Slot &&
                          std::find(donated_slots.begin(), donated_slots.end(), src.index) !=
                              donated_slots.end();
  }
  std::vector<TensorType> result_types;
  for (const Value& r : results) result_types.push_back(r.type);
  program->exe = Runtime::get().compile(b.module(results), result_types, call.device);
  return program;
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
  static std::mutex mu;
  static std::unordered_map<std::string, std::shared_ptr<pjrt::Buffer>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  if (cache.size() >= 4096) cache.clear();  // bounded: values like step counts never repeat
  std::shared_ptr<pjrt::Buffer> buf = Runtime::get().client().from_host(bytes, hlo::scalar_type(t), device);
  cache.emplace(key, buf);
  return buf;
}

}  // namespace

std::vector<std::shared_ptr<DeviceBuffer>> run_op(OpCall& call) {
  Runtime& rt = Runtime::get();
  const bool static_numbers = call.lowering->static_numbers;
  std::string key;
  key.reserve(256);
  key += call.lowering->name;
  key += '|';
  key += hlo::mlir_name(call.default_float);
  key += '@';
  key += std::to_string(call.device);  // executables are compiled per device
  std::vector<Slot> slots;
  for (size_t i = 0; i < call.args.size(); ++i) {
    append_arg(key, call.args[i], static_numbers);
    for (const auto& in : call.inputs[i]) {
      if (in) append_input(key, slots, *in);
      else key += 'N';
    }
  }
  std::vector<bool> full_write(call.destinations.size(), false), donate(call.destinations.size(), false);
  for (size_t j = 0; j < call.destinations.size(); ++j) {
    if (!call.destinations[j]) continue;
    const TensorInput& t = call.destinations[j]->target;
    full_write[j] = covers_storage(t.view, t.storage->nbytes);
    // A base read by this op and owned by nothing but this storage can be
    // updated in place by the plugin.
    bool is_input = false;
    for (const Slot& s : slots) is_input |= s.storage == t.storage;
    donate[j] = is_input && t.storage->base.use_count() == 1 &&
                t.storage->base->state() == DeviceBuffer::State::Materialized;
    int slot = slot_of(slots, t.storage, !full_write[j]);
    key += "|D";
    key += std::to_string(slot);
    if (!full_write[j]) key += t.storage->base->type().str();
    t.view.append_key(key);
    key += full_write[j] ? 'F' : 'P';
    key += donate[j] ? 'd' : '-';
    key += call.destinations[j]->check_cast ? 'c' : '-';
  }

  std::shared_ptr<CompiledProgram> program = rt.lookup(key);
  if (!program) {
    program = build(call, slots, full_write, donate);
    rt.insert(key, program);
  }

  // Gather parameters; an input that carries an error poisons the outputs.
  std::string poison;
  std::vector<std::shared_ptr<DeviceBuffer>> keep;
  std::vector<std::unique_ptr<pjrt::Buffer>> uploads;
  std::vector<std::shared_ptr<pjrt::Buffer>> numbers;
  std::vector<const pjrt::Buffer*> args;
  for (const ParamSource& p : program->params) {
    if (p.kind == ParamSource::Kind::Slot) {
      std::shared_ptr<DeviceBuffer> base = slots[p.index].storage->base;
      keep.push_back(base);
      if (base->state() == DeviceBuffer::State::Error) {
        poison = base->error_message();
        args.push_back(nullptr);
      } else {
        args.push_back(&base->buffer());
      }
    } else if (p.kind == ParamSource::Kind::Number) {
      numbers.push_back(number_buffer(call.args[p.index].number, p.type, call.device));
      args.push_back(numbers.back().get());
    } else {
      const Arg& a = call.args[p.index];
      uint64_t state[2] = {a.rng_seed, a.rng_offset};
      uploads.push_back(rt.client().from_host(state, {ElementType::U64, {2}}, call.device));
      args.push_back(uploads.back().get());
    }
  }
  std::string injected;
  if (poison.empty() && rt.take_injected_failure(&injected))
    poison = "tpu op '" + call.lowering->name + "' failed on the device: " + injected;

  std::vector<std::shared_ptr<DeviceBuffer>> produced;
  const auto& out_types = program->exe->output_types();
  if (!poison.empty()) {
    for (const auto& t : out_types) produced.push_back(DeviceBuffer::error(t, poison, call.device));
  } else {
    auto buffers = program->exe->execute(args, program->donated, call.device);
    rt.note_execution(static_cast<int>(std::count(program->donated.begin(), program->donated.end(), true)));
    for (auto& buf : buffers)
      produced.push_back(DeviceBuffer::materialized(std::move(buf), call.lowering->name, call.device));
  }

  std::vector<std::shared_ptr<DeviceBuffer>> outputs(program->output_types.size());
  for (size_t r = 0; r < program->results.size(); ++r) {
    const ResultSink& sink = program->results[r];
    if (sink.to_destination) call.destinations[sink.index]->target.storage->base = produced[r];
    else outputs[sink.index] = produced[r];
  }
  if (!produced.empty()) rt.note_launch(produced.back());
  if (env().launch_blocking)
    for (auto& p : produced) p->wait();
  return outputs;
}

std::shared_ptr<DeviceBuffer> upload(const void* data, const TensorType& type, int device) {
  Runtime& rt = Runtime::get();
  rt.check_device(device);
  return DeviceBuffer::materialized(rt.client().from_host(data, type, device), "copy from host",
                                    device);
}

namespace {
std::vector<hlo::Value> identity(lowering::Context&, const lowering::Args& args) {
  return {args[0].as_tensor()};
}
const lowering::Lowering kContiguous{"tpu::contiguous", &identity, false};
}  // namespace

std::shared_ptr<DeviceBuffer> read_contiguous(const TensorInput& input) {
  if (is_identity(input.view, input.storage->base->type())) return input.storage->base;
  OpCall call;
  call.lowering = &kContiguous;
  Arg a;
  a.kind = Arg::Kind::Tensor;
  call.args.push_back(a);
  call.inputs.push_back({input});
  call.device = input.storage->device;
  return run_op(call)[0];
}

void copy_into(const TensorInput& dst, const TensorInput& src) {
  check_writable(dst.view, "copy_");
  if (covers_storage(dst.view, dst.storage->nbytes) && src.view.sizes == dst.view.sizes &&
      src.view.dtype == dst.view.dtype) {
    dst.storage->base = read_contiguous(src);
    return;
  }
  OpCall call;
  call.lowering = &kContiguous;
  Arg a;
  a.kind = Arg::Kind::Tensor;
  call.args.push_back(a);
  call.inputs.push_back({src});
  call.destinations.push_back(Destination{dst, false});
  call.device = dst.storage->device;
  run_op(call);
}

}  // namespace torch_tpu::runtime
