// Output wrapping: the lowering's results, wrapped as tpu tensors, become
// what the op's schema returns. A functional op returns them as tensors, as
// lists (as long as the matching TensorList argument) or as Python numbers
// (integers computed from the arguments, bools read back from the device).
// An out= op copies them into its out tensors, checking dtype and device as
// ATen's out= kernels do and resizing as resize_output does.
#include "aten/op_results.h"

#include <map>
#include <numeric>

namespace torch_tpu::aten {

namespace {

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
// bucketize/searchsorted: the result is int32 exactly when out_int32 is set.
void check_search_out(const char* op, const at::Tensor& out, const at::Tensor& result) {
  TORCH_CHECK(out.scalar_type() == result.scalar_type(), op,
              ": output tensor's dtype is wrong, it can only be Int(int32) or Long(int64) depending on whether "
              "out_int32 flag is True, but we got output tensor's dtype ",
              out.scalar_type(), " and out_int32 flag is ", result.scalar_type() == at::kInt ? "True" : "False");
}
using OutCheck = void (*)(const char*, const at::Tensor&, const at::Tensor&);
const std::map<std::string, std::pair<const char*, OutCheck>>& out_dtype_checks() {
  static const std::map<std::string, std::pair<const char*, OutCheck>> table = {
      {"aten::adaptive_avg_pool2d", {"adaptive_avg_pool2d", &check_pool_out}},
      {"aten::adaptive_avg_pool3d", {"adaptive_avg_pool3d", &check_pool_out}},
      {"aten::all", {"all", &check_bool_or_byte_out}},
      {"aten::any", {"any", &check_bool_or_byte_out}},
      {"aten::bucketize", {"torch.searchsorted()", &check_search_out}},
      {"aten::complex", {"complex", &check_exact_out}},
      {"aten::conj_physical", {"conj_physical", &check_found_dtype_out}},
      {"aten::isin", {"isin", &check_same_dtype_out}},
      {"aten::norm", {"norm", &check_same_dtype_out}},
      {"aten::polar", {"polar", &check_exact_out}},
      {"aten::searchsorted", {"torch.searchsorted()", &check_search_out}},
  };
  return table;
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

}  // namespace

bool has_integer_results(const std::string& op) { return integer_results().count(op) != 0; }

void copy_into_outs(const c10::FunctionSchema& schema, const std::vector<int>& written,
                    const std::vector<c10::IValue>& values, const std::vector<at::Tensor>& results) {
  for (size_t k = 0; k < written.size() && k < results.size(); ++k) {
    at::Tensor out = values[written[k]].toTensor();
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
}

void push_results(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& values,
                  std::vector<at::Tensor>& results, torch::jit::Stack* stack) {
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

}  // namespace torch_tpu::aten
