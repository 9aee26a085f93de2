// Routing: which lowering an ATen overload runs, and as which variant. A
// functional op runs its own lowering. An in-place op (`add_`, `__ilshift__`)
// or an out= op (`add.out`) runs the lowering of its functional twin -- the
// overload whose arguments are the same, none written, possibly followed by
// defaulted ones (out= factories' dtype, layout, ...) -- and writes the
// result into its argument. An op that returns results and also writes
// arguments (batch norm's running statistics) is Mutating: its own lowering
// returns the new values after the results. Routes are computed once per
// overload, keyed by the schema's address.
#include "aten/op_route.h"

#include <mutex>
#include <unordered_map>

namespace torch_tpu::aten {

namespace {

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
  r.op_name = full_name(schema.operator_name());
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

}  // namespace

std::string full_name(const c10::OperatorName& n) {
  return n.overload_name.empty() ? n.name : n.name + "." + n.overload_name;
}

// Keyed by the schema's address, which the dispatcher keeps for the life of
// the operator: no string is built on the hot path.
const Route& route_of(const c10::OperatorHandle& op) {
  static std::mutex mu;
  static auto& routes = *new std::unordered_map<const void*, Route>;  // never destroyed: used during exit
  std::lock_guard<std::mutex> lock(mu);
  const void* key = &op.schema();
  auto it = routes.find(key);
  if (it == routes.end()) it = routes.emplace(key, compute_route(op)).first;
  return it->second;
}

const Route& route_for_call(const Route& given, const std::vector<c10::IValue>& values, Route& twin) {
  auto defined = [&](int i) { return values[i].isTensor() && values[i].toTensor().defined(); };
  if (!(given.training_twin && values[5].toBool() && defined(3) && defined(4))) return given;
  twin = given;
  twin.lowering = given.training_twin;
  twin.variant = Variant::Mutating;
  twin.written = {3, 4};
  return twin;
}

}  // namespace torch_tpu::aten
