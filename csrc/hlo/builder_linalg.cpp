// The Builder's linear algebra: dot_general, whose result dimensions are
// the batch dimensions, then lhs's and rhs's free dimensions in order.
#include "hlo/builder_internal.h"

namespace torch_tpu::hlo {

using namespace internal;

// ---- linear algebra

const char* precision_name(DotPrecision p) {
  switch (p) {
    case DotPrecision::Default: return "DEFAULT";
    case DotPrecision::High: return "HIGH";
    case DotPrecision::Highest: return "HIGHEST";
  }
  return "HIGHEST";
}

std::string Builder::precision_attr(ElementType t) const {
  if (t != ElementType::F32 && t != ElementType::C64) return "";
  std::string one = std::string("#stablehlo<precision ") + precision_name(float32_precision_) + ">";
  return "precision_config = [" + one + ", " + one + "]";
}

Value Builder::dot_general(Value lhs, Value rhs, const std::vector<int64_t>& lhs_batch,
                           const std::vector<int64_t>& rhs_batch,
                           const std::vector<int64_t>& lhs_contract,
                           const std::vector<int64_t>& rhs_contract, ElementType result) {
  const char* o = "dot_general";
  need(lhs, o);
  need(rhs, o);
  if (lhs.dtype() != rhs.dtype())
    bad(o, "operand element types differ: " + lhs.type.str() + " vs " + rhs.type.str());
  if (lhs_batch.size() != rhs_batch.size() || lhs_contract.size() != rhs_contract.size())
    bad(o, "lhs and rhs need as many batching and contracting dimensions");
  std::vector<int64_t> lhs_all = lhs_batch, rhs_all = rhs_batch;
  lhs_all.insert(lhs_all.end(), lhs_contract.begin(), lhs_contract.end());
  rhs_all.insert(rhs_all.end(), rhs_contract.begin(), rhs_contract.end());
  check_dims(lhs_all, lhs.rank(), o);
  check_dims(rhs_all, rhs.rank(), o);
  for (size_t i = 0; i < lhs_all.size(); ++i)
    if (lhs.shape()[lhs_all[i]] != rhs.shape()[rhs_all[i]])
      bad(o, "dimension " + std::to_string(lhs_all[i]) + " of " + lhs.type.str() +
                 " does not match dimension " + std::to_string(rhs_all[i]) + " of " +
                 rhs.type.str());
  TensorType t{result, {}};
  for (int64_t d : lhs_batch) t.shape.push_back(lhs.shape()[d]);
  for (int64_t d = 0; d < lhs.rank(); ++d)
    if (!contains(lhs_all, d)) t.shape.push_back(lhs.shape()[d]);
  for (int64_t d = 0; d < rhs.rank(); ++d)
    if (!contains(rhs_all, d)) t.shape.push_back(rhs.shape()[d]);
  std::string attrs = "dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = " +
                      list(lhs_batch) + ", rhs_batching_dimensions = " + list(rhs_batch) +
                      ", lhs_contracting_dimensions = " + list(lhs_contract) +
                      ", rhs_contracting_dimensions = " + list(rhs_contract) + ">";
  std::string precision = precision_attr(lhs.dtype());
  if (!precision.empty()) attrs += ", " + precision;
  return op("stablehlo.dot_general", {lhs, rhs}, t, attrs);
}


}  // namespace torch_tpu::hlo
