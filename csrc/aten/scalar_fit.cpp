// The CPU kernels of some ops convert a Scalar argument to the element type
// with c10::Scalar::to<T>(), which checks the range: torch.full((2,), 300,
// dtype=torch.int8) raises there. A lowering bakes the number into a program
// of that element type, and the device wraps it (300 -> 44) or saturates it
// (1e40 -> inf) without a word. So before an op in this table runs, each of
// its listed Scalar arguments goes through the same Scalar::to<T>() for the
// type the CPU converts it to, raising the CPU's own error. Ops whose CPU
// kernels wrap too (add, mul: a Scalar operand becomes a wrapped tensor) are
// not listed, so they wrap alike.
#include "aten/scalar_fit.h"

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>

namespace torch_tpu::aten {

namespace {

// Where the element type a Scalar is converted to comes from.
enum class Target {
  Self,        // the `self` tensor (fill_, masked_fill...)
  Dtype,       // the `dtype` argument, when given (factories; torch.where's
               // Scalar operand becomes a scalar_tensor of the tensor's type)
};

struct Rule {
  std::vector<std::string> scalars;
  Target target;
};

// Keyed by the op's base name (in-place and out= forms share it). Sorted.
const std::map<std::string, Rule>& rules() {
  static const std::map<std::string, Rule> table = {
      {"addcdiv", {{"value"}, Target::Self}},
      {"addcmul", {{"value"}, Target::Self}},
      {"clamp", {{"min", "max"}, Target::Self}},
      {"clamp_max", {{"max"}, Target::Self}},
      {"clamp_min", {{"min"}, Target::Self}},
      {"fill", {{"value"}, Target::Self}},
      {"full", {{"fill_value"}, Target::Dtype}},
      {"index_fill", {{"value"}, Target::Self}},
      {"lerp", {{"weight"}, Target::Self}},
      {"linspace", {{"start", "end"}, Target::Dtype}},
      {"masked_fill", {{"value"}, Target::Self}},
      {"scalar_tensor", {{"s"}, Target::Dtype}},
      {"scatter", {{"value"}, Target::Self}},
      {"threshold", {{"threshold", "value"}, Target::Self}},
  };
  return table;
}

void check_fits(const c10::Scalar& s, at::ScalarType type) {
  switch (type) {
#define TORCH_TPU_CHECK_FIT(ctype, name) \
  case at::ScalarType::name:             \
    (void)s.to<ctype>();                 \
    return;
    AT_FORALL_SCALAR_TYPES_WITH_COMPLEX(TORCH_TPU_CHECK_FIT)
#undef TORCH_TPU_CHECK_FIT
    default:
      return;  // the CPU's kernels do not take Scalars of the other types either
  }
}

// The op's rule, nullptr if none: looked up once per op (keyed by its
// schema's address, which the dispatcher keeps), as every lowered op asks.
const Rule* rule_of(const c10::FunctionSchema& schema) {
  thread_local std::unordered_map<const c10::FunctionSchema*, const Rule*> known;
  auto [it, fresh] = known.try_emplace(&schema, nullptr);
  if (fresh) {
    std::string name = schema.name();
    if (name.rfind("aten::", 0) == 0) name = name.substr(6);
    if (!name.empty() && name.back() == '_') name.pop_back();
    auto rule = rules().find(name);
    if (rule != rules().end()) it->second = &rule->second;
  }
  return it->second;
}

// The element type the CPU converts the Scalars to; Undefined: none (a
// factory given no dtype infers one the value fits).
at::ScalarType target_type(const Rule& rule, const c10::FunctionSchema& schema,
                           const std::vector<c10::IValue>& values) {
  const auto& args = schema.arguments();
  for (size_t i = 0; i < args.size() && i < values.size(); ++i) {
    const c10::IValue& v = values[i];
    if (rule.target == Target::Dtype) {
      if (args[i].name() == "dtype" && v.isInt()) return v.toScalarType();
    } else if (v.isTensor() && v.toTensor().defined()) {
      return v.toTensor().scalar_type();
    }
  }
  return at::ScalarType::Undefined;
}

}  // namespace

void check_scalars_fit(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& values) {
  const Rule* rule = rule_of(schema);
  if (rule == nullptr) return;
  const at::ScalarType type = target_type(*rule, schema, values);
  if (type == at::ScalarType::Undefined) return;
  const auto& args = schema.arguments();
  for (size_t i = 0; i < args.size() && i < values.size(); ++i) {
    if (values[i].isScalar() &&
        std::find(rule->scalars.begin(), rule->scalars.end(), args[i].name()) != rule->scalars.end())
      check_fits(values[i].toScalar(), type);
  }
}

}  // namespace torch_tpu::aten
