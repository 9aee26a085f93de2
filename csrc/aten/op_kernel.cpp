// The one kernel behind every lowered ATen op. It is registered (boxed) for
// the functional op of each lowering and for that op's in-place and out=
// variants. A call goes: route (op_route.cpp: which lowering, which variant),
// argument reading (arg_reader.cpp: IValues into lowering arguments), the
// destinations an in-place op writes and their overlap checks (here),
// runtime::run_op, then output wrapping (op_results.cpp):
//  - functional: new tensors;
//  - in-place (`add_`): the result is written into `self` through its view,
//    in the same program;
//  - out= (`add.out`): the functional result is copied into `out`, which is
//    resized first when its shape differs, as ATen's resize_output does.
#include "aten/op_kernel.h"

#include <deque>
#include <map>
#include <set>

#include "aten/arg_reader.h"
#include "aten/debug_compare.h"
#include "aten/index_check.h"
#include "aten/matmul_precision.h"
#include "aten/op_results.h"
#include "aten/op_route.h"
#include "aten/scalar_fit.h"
#include "aten/tensor_bridge.h"
#include "common/env.h"
#include "runtime/eager_mode.h"
#include "runtime/index_flags.h"

namespace torch_tpu::aten {

namespace {

// The (schema argument, value) pairs the lowering takes: an out= op's outs
// are left out, and the functional twin's extra arguments take defaults.
std::vector<std::pair<const c10::Argument*, c10::IValue>> lowering_args(
    const c10::FunctionSchema& schema, const Route& route, const std::vector<c10::IValue>& values) {
  size_t n = schema.arguments().size();
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
  return args;
}


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

// In-place and mutating ops write their results into their written
// arguments, through their views, in the op's own program.
void add_destinations(const c10::FunctionSchema& schema, const Route& route,
                      const std::vector<c10::IValue>& values, runtime::OpCall& call) {
  if (route.variant == Variant::Mutating) {
    size_t plain = schema.returns().size() - (has_integer_results(schema.name()) ? 2 : 0);
    call.destinations.assign(plain, std::nullopt);
  }
  // abs of a complex tensor is real: the CPU refuses to write it back.
  TORCH_CHECK(!(route.variant == Variant::InPlace && schema.name() == "aten::abs_" &&
                values[0].toTensor().is_complex()),
              "In-place abs is not supported for complex tensors.");
  if (route.variant != Variant::InPlace && route.variant != Variant::Mutating) return;
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
void check_partial_overlaps(const Route& route, const std::vector<c10::IValue>& values) {
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
}

void run_lowered(const c10::OperatorHandle& op, torch::jit::Stack* stack, const Route& given) {
  const auto& schema = op.schema();
  size_t n = schema.arguments().size();
  std::vector<c10::IValue> values(stack->end() - n, stack->end());
  Route twin;
  const Route& route = route_for_call(given, values, twin);
  check_scalars_fit(schema, values);

  runtime::OpCall call;
  call.lowering = route.lowering;
  call.default_float = to_hlo(at::get_default_dtype_as_scalartype());
  call.precision = matmul_precision();
  ArgReader reader(schema, call);
  reader.read(lowering_args(schema, route, values), route.lowering->implicit_generator);
  call.device = reader.device();
  add_destinations(schema, route, values, call);
  check_partial_overlaps(route, values);

  const bool debug = runtime::eager_mode() == runtime::EagerMode::Debug;
  const std::string& op_name = route.op_name;
  runtime::OpIndexChecks index_checks;
  if (debug) check_indices(route.lowering->name, op_name, values);
  else if (env().check_indices)
    index_checks = record_index_checks(route.lowering->name, op_name, values, call.origin);
  const bool compare = env().debug_compare_cpu && debug;
  std::vector<c10::IValue> host_args;
  if (compare) host_args = host_copies(values);
  std::vector<std::shared_ptr<runtime::DeviceBuffer>> outputs;
  try {
    outputs = translate_errors([&] { return runtime::run_op(call); });
  } catch (...) {
    runtime::drop_index_checks(index_checks);
    throw;
  }
  if (!index_checks.all.empty()) {
    std::vector<std::shared_ptr<runtime::DeviceBuffer>> written = outputs;
    for (const auto& d : call.destinations)
      if (d) written.push_back(d->target.storage->base);
    watch_index_checks(index_checks, written);
  }
  torch::jit::drop(*stack, n);

  std::vector<at::Tensor> results;
  if (route.variant != Variant::InPlace)
    for (auto& buf : outputs)
      if (buf) results.push_back(wrap_buffer(buf, call.device));  // null: written into an argument
  if (route.variant == Variant::InPlace || route.variant == Variant::Out) {
    if (route.variant == Variant::Out) copy_into_outs(schema, route.written, values, results);
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
  push_results(schema, values, results, stack);
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
    static auto& names = *new std::deque<std::string>;  // the library may keep the pointer
    names.push_back(full_name(name).substr(6));
    lib.impl(names.back().c_str(), torch::CppFunction::makeFromBoxedFunction<&lowered_op_kernel>());
  }
}

}  // namespace torch_tpu::aten
