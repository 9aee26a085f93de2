// The one kernel behind every lowered ATen op. It is registered (boxed) for
// the functional op of each lowering and for that op's in-place and out=
// variants; it reads the schema to turn IValues into lowering arguments,
// runs the op through runtime::run_op, and puts the results back on the stack:
//  - functional: new tensors;
//  - in-place (`add_`): the result is written into `self` through its view,
//    in the same program;
//  - out= (`add.out`): the functional result is copied into `out`, which is
//    resized first when its shape differs, as ATen's resize_output does.
#include "aten/op_kernel.h"

#include <deque>
#include <map>
#include <numeric>
#include <set>
#include <mutex>
#include <unordered_map>

#include "aten/debug_compare.h"
#include "aten/generator.h"
#include "aten/index_check.h"
#include "aten/tensor_bridge.h"
#include "common/env.h"
#include "lowering/registry.h"
#include "runtime/eager_mode.h"
#include "runtime/runtime.h"

namespace torch_tpu::aten {

namespace {

using lowering::Arg;

// Functional: returns new tensors. InPlace: `add_` writes self. Out: `add.out`
// writes kwarg-only outs. Mutating: an op that returns new tensors and also
// updates some arguments (batch norm's running statistics): its lowering
// returns the schema's results followed by the new values of those arguments.
enum class Variant { Functional, InPlace, Out, Mutating };

struct Route {
  const lowering::Lowering* lowering = nullptr;
  Variant variant = Variant::Functional;
  std::vector<int> written;  // schema indices of mutated arguments, in output order
  // Trailing arguments the functional op has and this variant lacks (out=
  // factories: dtype, layout, device, pin_memory); they take their defaults,
  // and `dtype` takes the out tensor's.
  std::vector<c10::Argument> extra;
  // native_batch_norm updates running_mean/var in training although its
  // schema does not say so: then the mutating twin runs instead.
  const lowering::Lowering* training_twin = nullptr;
};

// Integer results a lowering cannot return (it returns tensors): computed
// from the arguments, inserted at their positions in the schema's results.
const std::map<std::string, std::vector<int64_t> (*)(const std::vector<c10::IValue>&)>&
integer_results() {
  static const std::map<std::string, std::vector<int64_t> (*)(const std::vector<c10::IValue>&)>
      table = {
          {"aten::_scaled_dot_product_fused_attention_overrideable",
           [](const std::vector<c10::IValue>& v) -> std::vector<int64_t> {
             return {v[0].toTensor().size(-2), v[1].toTensor().size(-2)};  // max_q, max_k
           }},
      };
  return table;
}

// out= tensors whose dtype the CPU's meta function fixes instead of
// casting into (the functional result is copied into `out` otherwise): each
// entry raises the CPU's error for an `out` it refuses.
void check_bool_or_byte_out(const char* op, const at::Tensor& out, const at::Tensor&) {
  TORCH_CHECK(out.scalar_type() == at::kBool || out.scalar_type() == at::kByte, op,
              " only supports bool tensor for result, got: ", out.scalar_type());
}
void check_same_dtype_out(const char*, const at::Tensor& out, const at::Tensor& result) {
  TORCH_CHECK(out.dtype() == result.dtype(), "Expected out tensor to have dtype ", result.dtype(),
              ", but got ", out.dtype(), " instead");
}
void check_exact_out(const char*, const at::Tensor& out, const at::Tensor& result) {
  TORCH_CHECK(out.scalar_type() == result.scalar_type(), "Expected object of scalar type ",
              result.scalar_type(), " but got scalar type ", out.scalar_type(), " for argument 'out'");
}
void check_pool_out(const char*, const at::Tensor& out, const at::Tensor& result) {
  TORCH_CHECK(out.dtype() == result.dtype(), "expected dtype ", result.dtype(), " for `output` but got dtype ",
              out.dtype());
}
void check_found_dtype_out(const char*, const at::Tensor& out, const at::Tensor& result) {
  TORCH_CHECK(out.scalar_type() == result.scalar_type(), "Found dtype ", out.scalar_type(), " but expected ",
              result.scalar_type());
}
using OutCheck = void (*)(const char*, const at::Tensor&, const at::Tensor&);
const std::map<std::string, std::pair<const char*, OutCheck>>& out_dtype_checks() {
  static const std::map<std::string, std::pair<const char*, OutCheck>> table = {
      {"aten::adaptive_avg_pool2d", {"adaptive_avg_pool2d", &check_pool_out}},
      {"aten::adaptive_avg_pool3d", {"adaptive_avg_pool3d", &check_pool_out}},
      {"aten::all", {"all", &check_bool_or_byte_out}},
      {"aten::any", {"any", &check_bool_or_byte_out}},
      {"aten::complex", {"complex", &check_exact_out}},
      {"aten::conj_physical", {"conj_physical", &check_found_dtype_out}},
      {"aten::isin", {"isin", &check_same_dtype_out}},
      {"aten::norm", {"norm", &check_same_dtype_out}},
      {"aten::polar", {"polar", &check_exact_out}},
  };
  return table;
}

std::string full_name(const c10::OperatorName& n) {
  return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}

bool is_written(const c10::Argument& a) { return a.alias_info() && a.alias_info()->isWrite(); }

const std::unordered_map<std::string, std::vector<c10::OperatorName>>& ops_by_base_name() {
  static const auto index = [] {
    std::unordered_map<std::string, std::vector<c10::OperatorName>> m;
    for (const auto& name : c10::Dispatcher::singleton().getAllOpNames()) m[name.name].push_back(name);
    return m;
  }();
  return index;
}

// The functional twin of an in-place or out= op: among ops named in `bases`,
// the one whose arguments are `inputs` (same names and types, none written),
// optionally followed by arguments that have defaults.
std::optional<std::string> find_twin(const std::vector<std::string>& bases,
                                     const std::vector<const c10::Argument*>& inputs,
                                     std::vector<c10::Argument>* extra) {
  for (const auto& base : bases) {
    auto it = ops_by_base_name().find(base);
    if (it == ops_by_base_name().end()) continue;
    for (const auto& name : it->second) {
      auto op = c10::Dispatcher::singleton().findSchema(name);
      if (!op) continue;
      const auto& args = op->schema().arguments();
      if (args.size() < inputs.size()) continue;
      bool same = true;
      for (size_t i = 0; i < args.size() && same; ++i) {
        if (is_written(args[i])) same = false;
        else if (i < inputs.size())
          same = args[i].name() == inputs[i]->name() && *args[i].type() == *inputs[i]->type();
        else
          same = args[i].default_value().has_value();
      }
      if (!same) continue;
      extra->assign(args.begin() + static_cast<std::ptrdiff_t>(inputs.size()), args.end());
      return full_name(name);
    }
  }
  return std::nullopt;
}

Route compute_route(const c10::OperatorHandle& op) {
  const auto& schema = op.schema();
  Route r;
  for (size_t i = 0; i < schema.arguments().size(); ++i)
    if (is_written(schema.arguments()[i])) r.written.push_back(static_cast<int>(i));
  if (r.written.empty()) {
    r.lowering = lowering::find_lowering(full_name(schema.operator_name()));
    if (schema.name() == "aten::native_batch_norm")
      r.training_twin = lowering::find_lowering("aten::_native_batch_norm_legit_functional");
    return r;
  }
  const std::string& own = schema.name();
  if (!schema.arguments()[r.written[0]].kwarg_only() && !own.empty() && own.back() != '_') {
    r.variant = Variant::Mutating;
    r.lowering = lowering::find_lowering(full_name(schema.operator_name()));
    return r;
  }
  r.variant = schema.arguments()[r.written[0]].kwarg_only() ? Variant::Out : Variant::InPlace;
  // out= lists (_foreach_add.Scalar_out) keep PyTorch's per-tensor kernel:
  // the out= path here resizes and copies into single tensors.
  if (r.variant == Variant::Out &&
      schema.arguments()[r.written[0]].type()->kind() == c10::TypeKind::ListType)
    return r;
  std::vector<const c10::Argument*> inputs;
  for (const auto& a : schema.arguments())
    if (r.variant == Variant::InPlace || !is_written(a)) inputs.push_back(&a);
  std::string base = schema.name();
  std::vector<std::string> bases{base};
  if (r.variant == Variant::InPlace && base.rfind("aten::__i", 0) == 0) {
    // In-place operators are named apart from their functional twins
    // (__ilshift__, __lshift__), not by a trailing underscore.
    bases = {"aten::__" + base.substr(9)};
  } else if (r.variant == Variant::InPlace && !base.empty() && base.back() == '_') {
    base.pop_back();
    // normal_ is the one in-place op whose functional form has another name.
    bases = {base, base + "_functional"};
  }
  if (auto f = find_twin(bases, inputs, &r.extra)) r.lowering = lowering::find_lowering(*f);
  return r;
}

// Keyed by the schema's address, which the dispatcher keeps for the life of
// the operator: no string is built on the hot path.
const Route& route_of(const c10::OperatorHandle& op) {
  static std::mutex mu;
  static std::unordered_map<const void*, Route> routes;
  std::lock_guard<std::mutex> lock(mu);
  const void* key = &op.schema();
  auto it = routes.find(key);
  if (it == routes.end()) it = routes.emplace(key, compute_route(op)).first;
  return it->second;
}

// Turns the schema's IValues into lowering arguments and tensor inputs.
class ArgReader {
 public:
  ArgReader(const c10::FunctionSchema& schema, runtime::OpCall& call)
      : schema_(schema), call_(call) {}

  void read(const std::vector<std::pair<const c10::Argument*, c10::IValue>>& args,
            bool implicit_generator) {
    // Arg is large: growing the vectors one element at a time costs more
    // than the rest of recording a small op. Sized exactly: a request of
    // 1 KiB or more (four Args) makes glibc consolidate its free lists first.
    size_t count = args.size() + (implicit_generator ? 1 : 0);
    call_.args.reserve(count);
    call_.inputs.reserve(count);
    for (const auto& [schema_arg, value] : args) {
      Arg a;
      a.index = static_cast<int>(call_.args.size());
      std::vector<std::optional<runtime::TensorInput>> ins;
      convert(*schema_arg, value, a, ins);
      call_.args.push_back(std::move(a));
      call_.inputs.push_back(std::move(ins));
    }
    if (implicit_generator) {
      // Random ops without a Generator argument (native_dropout) draw from
      // the device's default generator, passed as a last argument.
      Arg a;
      a.index = static_cast<int>(call_.args.size());
      rng(std::nullopt, a);
      call_.args.push_back(std::move(a));
      call_.inputs.emplace_back();
    }
    // Generators reserve values for the op's size: the first tensor's numel.
    for (auto& a : call_.args)
      if (a.kind == Arg::Kind::Rng) {
        auto [seed, offset] = generator_->take(static_cast<uint64_t>(first_numel_));
        a.rng_seed = seed;
        a.rng_offset = offset;
      }
  }

  int device() const { return device_ < 0 ? current_device() : device_; }
  // Keeps uploaded CPU scalars and resolved conjugates alive for the op.
  std::vector<std::unique_ptr<runtime::Storage>> staged;
  std::vector<at::Tensor> resolved;

 private:
  // `name`: the schema argument, named when devices disagree.
  std::optional<runtime::TensorInput> tensor_input(const at::Tensor& given, Arg* a,
                                                   const std::string& name) {
    if (!given.defined()) return std::nullopt;
    // Lazy conjugate/negative views hold the original values: lowerings read
    // storage, so the bits are applied first (a copy on the device).
    at::Tensor t = given;
    if (t.is_conj() || t.is_neg()) {
      t = t.resolve_conj().resolve_neg();
      resolved.push_back(t);
    }
    if (t.device().type() == c10::DeviceType::PrivateUse1) {
      note_device(t.device().index(), t, name);
      if (first_numel_ < 0) first_numel_ = t.numel();
      return input_of(t);
    }
    // CPU 0-dim tensors (Python numbers and scalars) are allowed beside
    // device tensors, as on CUDA; anything else is a device mix-up.
    TORCH_CHECK(t.dim() == 0 && t.device().is_cpu(),
                "Expected all tensors to be on the same device, but found at least two devices, ",
                c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(device())),
                " and ", t.device(), "! (when checking argument for argument ", name, " in method ",
                schema_.name(), ")");
    if (a) a->wrapped_number = t.unsafeGetTensorImpl()->is_wrapped_number();
    hlo::TensorType type{to_hlo(t.scalar_type()), {}};
    auto s = std::make_unique<runtime::Storage>(type.nbytes(), device());
    s->base = translate_errors([&] { return runtime::constant(t.const_data_ptr(), type, device()); });
    runtime::TensorInput in{s.get(), {{}, {}, 0, type.dtype}};
    staged.push_back(std::move(s));
    return in;
  }

  void note_device(int index, const at::Tensor& t, const std::string& name) {
    if (device_ < 0) {
      device_ = index;
      return;
    }
    TORCH_CHECK(device_ == index,
                "Expected all tensors to be on the same device, but found at least two devices, tpu:",
                device_, " and ", t.device(), "! (when checking argument for argument ", name,
                " in method ", schema_.name(), ")");
  }

  void convert(const c10::Argument& arg, const c10::IValue& v, Arg& a,
               std::vector<std::optional<runtime::TensorInput>>& ins) {
    const c10::TypePtr& type = arg.real_type();
    if (v.isNone()) {
      if (type->kind() == c10::TypeKind::OptionalType &&
          type->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::GeneratorType)
        return rng(std::nullopt, a);
      a.kind = Arg::Kind::None;
      return;
    }
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      if (!t.defined()) {
        a.kind = Arg::Kind::None;
        return;
      }
      a.kind = Arg::Kind::Tensor;
      ins.push_back(tensor_input(t, &a, arg.name()));
      return;
    }
    if (v.isTensorList()) {
      // Read in place and sized once: _foreach_ lists are long, and copying
      // their tensors or growing the inputs one by one showed in profiles of
      // optimizer steps.
      a.kind = Arg::Kind::TensorList;
      const auto& list = v.toListRef();
      ins.reserve(list.size());
      for (const c10::IValue& e : list) ins.push_back(tensor_input(e.toTensor(), nullptr, arg.name()));
      return;
    }
    if (v.isList() && type->kind() == c10::TypeKind::ListType) {
      const c10::TypePtr& elem = type->castRaw<c10::ListType>()->getElementType();
      bool optional_tensors = elem->kind() == c10::TypeKind::OptionalType &&
          elem->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::TensorType;
      if (optional_tensors) {  // Tensor?[] (indices)
        a.kind = Arg::Kind::TensorList;
        const auto& list = v.toListRef();
        ins.reserve(list.size());
        for (const c10::IValue& e : list)
          ins.push_back(e.isTensor() ? tensor_input(e.toTensor(), nullptr, arg.name()) : std::nullopt);
        return;
      }
      if (elem->kind() == c10::TypeKind::NumberType) {  // Scalar[]
        Arg n;
        for (const c10::IValue& e : v.toListRef()) {
          number(e.toScalar(), n);
          a.numbers.push_back(n.number);
        }
        a.kind = Arg::Kind::NumberList;
        return;
      }
    }
    c10::TypeKind kind = type->kind();
    if (kind == c10::TypeKind::OptionalType) kind = type->castRaw<c10::OptionalType>()->getElementType()->kind();
    switch (kind) {
      case c10::TypeKind::ScalarTypeType:
        a.kind = Arg::Kind::DType;
        a.dtype = to_hlo(v.toScalarType());
        return;
      case c10::TypeKind::LayoutType:
      case c10::TypeKind::MemoryFormatType:
        a.kind = Arg::Kind::None;
        return;
      case c10::TypeKind::DeviceObjType: {
        c10::Device d = v.toDevice();
        if (d.type() == c10::DeviceType::PrivateUse1 && d.has_index()) device_ = d.index();
        a.kind = Arg::Kind::None;
        return;
      }
      case c10::TypeKind::GeneratorType:
        return rng(v.toGenerator(), a);
      case c10::TypeKind::NumberType:
        return number(v.toScalar(), a);
      default: break;
    }
    if (v.isInt() || v.isSymInt()) {
      a.kind = Arg::Kind::Int;
      a.i = v.isInt() ? v.toInt() : v.toSymInt().expect_int();
    } else if (v.isDouble() && call_.lowering->float_params) {
      number(v.toScalar(), a);
    } else if (v.isDouble()) {
      a.kind = Arg::Kind::Float;
      a.f = v.toDouble();
    } else if (v.isBool()) {
      a.kind = Arg::Kind::Bool;
      a.b = v.toBool();
    } else if (v.isString()) {
      a.kind = Arg::Kind::String;
      a.s = v.toStringRef();
    } else if (v.isScalar()) {
      number(v.toScalar(), a);
    } else if (v.isList()) {
      fill_list(v, a, ins);
    } else {
      TORCH_CHECK_NOT_IMPLEMENTED(false, "tpu: argument '", arg.name(), "' of ", schema_.name(),
                                  " has a type the tpu backend does not handle: ", type->str());
    }
  }

  void fill_list(const c10::IValue& v, Arg& a, std::vector<std::optional<runtime::TensorInput>>& ins) {
    ins.clear();
    if (v.isIntList()) {
      a.kind = Arg::Kind::IntList;
      a.ints = v.toIntVector();
    } else if (v.isDoubleList()) {
      a.kind = Arg::Kind::FloatList;
      a.floats = v.toDoubleVector();
    } else if (v.isBoolList()) {
      a.kind = Arg::Kind::BoolList;
      for (bool b : v.toBoolList()) a.bools.push_back(b);
    } else {
      a.kind = Arg::Kind::IntList;  // SymInt[] arrives as a generic list
      for (const c10::IValue& e : v.toListRef())
        a.ints.push_back(e.isSymInt() ? e.toSymInt().expect_int() : e.toInt());
    }
  }

  void number(const c10::Scalar& s, Arg& a) {
    a.kind = Arg::Kind::Number;
    if (s.isBoolean()) {
      a.number.kind = lowering::Number::Kind::Bool;
      a.number.i = s.toBool();
    } else if (s.isIntegral(false)) {
      a.number.kind = lowering::Number::Kind::Int;
      a.number.i = s.toLong();
    } else if (s.isComplex()) {
      a.number.kind = lowering::Number::Kind::Complex;
      auto c = s.toComplexDouble();
      a.number.f = c.real();
      a.number.im = c.imag();
    } else {
      a.number.kind = lowering::Number::Kind::Float;
      a.number.f = s.toDouble();
    }
  }

  void rng(std::optional<at::Generator> g, Arg& a) {
    a.kind = Arg::Kind::Rng;
    at::Generator gen = g && g->defined() ? *g : default_generator(static_cast<c10::DeviceIndex>(device()));
    generator_ = gen.get<TpuGenerator>();
    generator_holder_ = gen;
  }

  const c10::FunctionSchema& schema_;
  runtime::OpCall& call_;
  int device_ = -1;
  int64_t first_numel_ = -1;
  TpuGenerator* generator_ = nullptr;
  at::Generator generator_holder_;
};

// In-place writes into tensors whose elements alias (expanded views) raise,
// as on the CPU, except for the ops the CPU still allows: those that write
// the same value everywhere (fill_, zero_), and three it allows with a
// deprecation warning.
void check_overlapping_write(const std::string& op, const at::Tensor& t) {
  static const std::set<std::string> allowed = {"aten::fill_", "aten::zero_"};
  static const std::map<std::string, std::string> deprecated = {
      {"aten::_index_put_impl_", "index_put_"},
      {"aten::index_fill_", "index_fill_"},
      {"aten::index_put_", "index_put_"},
      {"aten::masked_fill_", "masked_fill_"},
  };
  if (allowed.count(op)) return;
  if (auto it = deprecated.find(op); it != deprecated.end()) {
    if (at::has_internal_overlap(t) == at::MemOverlap::Yes)
      TORCH_WARN("Use of ", it->second, " on expanded tensors is deprecated. Please clone() the "
                 "tensor before performing this operation.");
    return;
  }
  translate_errors([&] { runtime::check_writable(geometry_of(t), op.c_str()); });
}

// Fused attention's output takes the query's memory layout (dims ordered by
// its strides), as PyTorch's meta function allocates it; compiled graphs
// rely on those strides.
at::Tensor with_layout_of(const at::Tensor& result, const at::Tensor& like) {
  if (like.dim() != result.dim()) return result;
  std::vector<int64_t> order(like.dim());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return like.stride(a) > like.stride(b); });
  std::vector<int64_t> strides(result.dim());
  int64_t s = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    strides[*it] = s;
    s *= result.size(*it);
  }
  if (c10::IntArrayRef(strides) == result.strides()) return result;
  at::Tensor out = at::empty_strided(result.sizes(), strides, result.options());
  out.copy_(result);
  return out;
}

bool needs_host_results(const c10::FunctionSchema& schema) {
  for (const auto& ret : schema.returns()) {
    c10::TypeKind kind = ret.type()->kind();
    if (kind == c10::TypeKind::IntType || kind == c10::TypeKind::SymIntType ||
        kind == c10::TypeKind::BoolType)
      return true;
  }
  return false;
}

bool returns_list(const c10::FunctionSchema& schema) {
  return schema.returns().size() == 1 && schema.returns()[0].type()->kind() == c10::TypeKind::ListType;
}

// Functional variants of list ops return several values, lists among them:
// fused optimizers (_fused_adamw) one list per list they update, the _amp_
// unscale op the unscaled list and found_inf.
bool returns_lists(const c10::FunctionSchema& schema) {
  if (schema.returns().size() < 2) return false;
  for (const auto& r : schema.returns())
    if (r.type()->kind() == c10::TypeKind::ListType) return true;
  return false;
}

// The k-th list returned is as long as the k-th TensorList argument; other
// returns are single tensors.
void push_lists(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& values,
                std::vector<at::Tensor>& results, torch::jit::Stack* stack) {
  std::vector<size_t> sizes;
  for (const c10::IValue& v : values)
    if (v.isTensorList()) sizes.push_back(v.toListRef().size());
  size_t next = 0, lists = 0;
  for (const auto& ret : schema.returns()) {
    bool list = ret.type()->kind() == c10::TypeKind::ListType;
    TORCH_CHECK(!list || lists < sizes.size(), "tpu lowering of ", schema.name(),
                ": more list returns than list arguments");
    size_t n = list ? sizes[lists++] : 1;
    TORCH_CHECK(next + n <= results.size(), "tpu lowering of ", schema.name(), " returned ",
                results.size(), " tensors, fewer than its returns hold");
    if (list)
      stack->push_back(c10::IValue(std::vector<at::Tensor>(results.begin() + next, results.begin() + next + n)));
    else
      stack->push_back(std::move(results[next]));
    next += n;
  }
  TORCH_CHECK(next == results.size(), "tpu lowering of ", schema.name(), " returned ",
              results.size(), " tensors, more than its returns hold");
}

void run_lowered(const c10::OperatorHandle& op, torch::jit::Stack* stack, const Route& given) {
  const auto& schema = op.schema();
  size_t n = schema.arguments().size();
  std::vector<c10::IValue> values(stack->end() - n, stack->end());
  Route twin;
  const Route* selected = &given;
  auto defined = [&](int i) { return values[i].isTensor() && values[i].toTensor().defined(); };
  if (given.training_twin && values[5].toBool() && defined(3) && defined(4)) {
    twin = given;
    twin.lowering = given.training_twin;
    twin.variant = Variant::Mutating;
    twin.written = {3, 4};
    selected = &twin;
  }
  const Route& route = *selected;
  std::vector<std::pair<const c10::Argument*, c10::IValue>> args;
  args.reserve(n + route.extra.size());
  for (size_t i = 0; i < n; ++i) {
    bool skip = route.variant == Variant::Out &&
                std::find(route.written.begin(), route.written.end(), static_cast<int>(i)) !=
                    route.written.end();
    if (!skip) args.emplace_back(&schema.arguments()[i], values[i]);
  }
  for (const auto& extra : route.extra) {
    c10::IValue v = *extra.default_value();
    if (extra.name() == "dtype") v = values[route.written[0]].toTensor().scalar_type();
    args.emplace_back(&extra, v);
  }

  runtime::OpCall call;
  call.lowering = route.lowering;
  call.default_float = to_hlo(at::get_default_dtype_as_scalartype());
  ArgReader reader(schema, call);
  reader.read(args, route.lowering->implicit_generator);
  call.device = reader.device();

  if (route.variant == Variant::Mutating) {
    size_t plain = schema.returns().size() - (integer_results().count(schema.name()) ? 2 : 0);
    call.destinations.assign(plain, std::nullopt);
  }
  // abs of a complex tensor is real: the CPU refuses to write it back.
  TORCH_CHECK(!(route.variant == Variant::InPlace && schema.name() == "aten::abs_" &&
                values[0].toTensor().is_complex()),
              "In-place abs is not supported for complex tensors.");
  if (route.variant == Variant::InPlace || route.variant == Variant::Mutating) {
    auto add_destination = [&](const at::Tensor& t) {
      TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, schema.name(),
                  ": in-place target must be a tpu tensor, got ", t.device());
      check_overlapping_write(schema.name(), t);
      call.destinations.push_back(runtime::Destination{input_of(t), true});
    };
    for (int idx : route.written) {
      if (values[idx].isTensorList()) {  // _foreach_*_: one destination per element
        for (const c10::IValue& e : values[idx].toListRef()) add_destination(e.toTensor());
      } else {
        add_destination(values[idx].toTensor());
      }
    }
  }
  // Like TensorIterator on the CPU: a destination may coincide with an input
  // but not partly overlap one.
  for (int w : route.written) {
    if (values[w].isTensorList()) {
      // Element k is written from element k of the other lists (and from the
      // plain tensors), as PyTorch's per-tensor loop would.
      const auto& dsts = values[w].toListRef();
      for (size_t i = 0; i < values.size(); ++i) {
        if (static_cast<int>(i) == w) continue;
        if (values[i].isTensorList()) {
          const auto& srcs = values[i].toListRef();
          for (size_t k = 0; k < dsts.size() && k < srcs.size(); ++k)
            at::assert_no_partial_overlap(dsts[k].toTensor(), srcs[k].toTensor());
        } else if (values[i].isTensor() && values[i].toTensor().defined()) {
          for (const auto& d : dsts) at::assert_no_partial_overlap(d.toTensor(), values[i].toTensor());
        }
      }
      continue;
    }
    if (!values[w].isTensor()) continue;
    const at::Tensor& dst = values[w].toTensor();
    for (size_t i = 0; i < values.size(); ++i) {
      if (static_cast<int>(i) == w) continue;
      if (values[i].isTensor() && values[i].toTensor().defined())
        at::assert_no_partial_overlap(dst, values[i].toTensor());
    }
  }
  const bool debug = runtime::eager_mode() == runtime::EagerMode::Debug;
  const std::string op_name =
      schema.name() + (schema.overload_name().empty() ? "" : "." + schema.overload_name());
  std::vector<DeviceIndexCheck> index_checks;
  if (debug) check_indices(route.lowering->name, op_name, values);
  else if (env().check_indices) index_checks = record_index_checks(route.lowering->name, op_name, values);
  const bool compare = env().debug_compare_cpu && debug;
  std::vector<c10::IValue> host_args;
  if (compare) host_args = host_copies(values);
  auto outputs = translate_errors([&] { return runtime::run_op(call); });
  if (!index_checks.empty()) {
    std::vector<std::shared_ptr<runtime::DeviceBuffer>> written = outputs;
    for (const auto& d : call.destinations)
      if (d) written.push_back(d->target.storage->base);
    watch_index_checks(index_checks, written);
  }
  torch::jit::drop(*stack, n);

  if (route.variant == Variant::InPlace) {
    for (size_t k = 0; k < schema.returns().size(); ++k) stack->push_back(values[route.written[k]]);
    if (compare) {
      std::vector<at::Tensor> written;
      for (int w : route.written) written.push_back(values[w].toTensor());
      compare_with_cpu(op, std::move(host_args), route.written, written);
    }
    return;
  }
  std::vector<at::Tensor> results;
  for (auto& buf : outputs)
    if (buf) results.push_back(wrap_buffer(buf, call.device));  // null: written into an argument
  if (route.variant == Variant::Out) {
    for (size_t k = 0; k < route.written.size() && k < results.size(); ++k) {
      at::Tensor out = values[route.written[k]].toTensor();
      const at::Tensor& r = results[k];
      // Copying across would hide a device mix-up; ATen's structured kernels refuse it too.
      TORCH_CHECK(out.device() == r.device(), "Expected out tensor to have device ", r.device(), ", but got ",
                  out.device(), " instead");
      if (auto it = out_dtype_checks().find(schema.name()); it != out_dtype_checks().end())
        it->second.second(it->second.first, out, r);
      if (out.sizes() != r.sizes()) at::native::resize_output(out, r.sizes());
      TORCH_CHECK(c10::canCast(r.scalar_type(), out.scalar_type()), "result type ",
                  r.scalar_type(), " can't be cast to the desired output type ", out.scalar_type());
      out.copy_(r);
    }
    for (size_t k = 0; k < schema.returns().size(); ++k) stack->push_back(values[route.written[k]]);
    if (compare) {
      std::vector<at::Tensor> written;
      for (int w : route.written) written.push_back(values[w].toTensor());
      compare_with_cpu(op, std::move(host_args), route.written, written);
    }
    return;
  }
  if (compare && route.variant != Variant::Mutating)
    compare_with_cpu(op, std::move(host_args), {}, results);
  if (returns_list(schema)) {
    stack->push_back(c10::IValue(results));
  } else if (returns_lists(schema)) {
    push_lists(schema, values, results, stack);
  } else if (needs_host_results(schema)) {
    // Results that are Python numbers: integers computed from the arguments
    // (integer_results), bools read back from the lowering's 0-dim tensor.
    std::vector<int64_t> ints;
    if (auto it = integer_results().find(schema.name()); it != integer_results().end()) {
      ints = it->second(values);
      results[0] = with_layout_of(results[0], values[0].toTensor());  // fused attention
    }
    size_t t = 0, i = 0;
    for (const auto& ret : schema.returns()) {
      c10::TypeKind kind = ret.type()->kind();
      if (kind == c10::TypeKind::IntType || kind == c10::TypeKind::SymIntType)
        stack->push_back(c10::IValue(ints.at(i++)));
      else if (kind == c10::TypeKind::BoolType)
        stack->push_back(c10::IValue(results.at(t++).item<bool>()));
      else
        stack->push_back(std::move(results.at(t++)));
    }
  } else {
    TORCH_CHECK(results.size() == schema.returns().size(), "tpu lowering of ", schema.name(),
                " returned ", results.size(), " values; the schema has ", schema.returns().size());
    for (auto& r : results) stack->push_back(std::move(r));
  }
}

}  // namespace

void lowered_op_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const Route& route = route_of(op);
  if (route.lowering == nullptr) return unsupported_op(op, stack);
  run_lowered(op, stack, route);
}

void register_lowered_ops(torch::Library& lib) {
  // Every overload whose functional twin has a lowering: the functional op
  // itself, its in-place form and its out= forms.
  for (const auto& name : c10::Dispatcher::singleton().getAllOpNames()) {
    auto op = c10::Dispatcher::singleton().findSchema(name);
    if (!op || name.name.rfind("aten::", 0) != 0) continue;
    if (route_of(*op).lowering == nullptr) continue;
    // Kernels written by hand in aten/ (copy_, views) take precedence.
    if (op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) continue;
    // An op whose gradient comes only from its CompositeImplicitAutograd
    // decomposition (no autograd kernel of its own: conj_physical, the .vec
    // upsamplers) would lose that gradient to a backend kernel. Its out= and
    // in-place forms are still ours.
    if (op->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) &&
        !op->hasKernelForDispatchKey(c10::DispatchKey::Autograd))
      continue;
    static std::deque<std::string> names;  // the library may keep the pointer
    names.push_back(full_name(name).substr(6));
    lib.impl(names.back().c_str(), torch::CppFunction::makeFromBoxedFunction<&lowered_op_kernel>());
  }
}

}  // namespace torch_tpu::aten
