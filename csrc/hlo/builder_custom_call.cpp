#include <cmath>

#include "hlo/builder_internal.h"

namespace torch_tpu::hlo {

using internal::bad;

Builder::FfiAttr Builder::FfiAttr::f32(const std::string& name, double v) {
  if (!std::isfinite(v)) bad("custom_call", "attribute '" + name + "' must be finite");
  return {name, literal(v, ElementType::F32) + " : f32"};
}

Builder::FfiAttr Builder::FfiAttr::i64(const std::string& name, int64_t v) {
  return {name, std::to_string(v) + " : i64"};
}

Builder::FfiAttr Builder::FfiAttr::boolean(const std::string& name, bool v) {
  return {name, v ? "true" : "false"};
}

std::vector<Value> Builder::custom_call(const std::string& target, const std::vector<Value>& operands,
                                        const std::vector<TensorType>& results,
                                        const std::vector<FfiAttr>& attrs) {
  if (target.empty()) bad("custom_call", "the target name is empty");
  if (results.empty()) bad("custom_call", "a call to '" + target + "' needs at least one result");
  std::vector<std::string> config;
  for (const auto& a : attrs) config.push_back(a.name + " = " + a.text);
  return op_multi("stablehlo.custom_call", operands, results,
                  "api_version = 4 : i32, backend_config = {" + internal::join(config) +
                      "}, call_target_name = \"" + target + "\"",
                  {});
}

}  // namespace torch_tpu::hlo
