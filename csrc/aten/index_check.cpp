// Debug mode checks indices. On the device an out-of-range index cannot
// raise (XLA's gather clamps it, its scatter drops the update), so strict and
// defer_and_fuse do that; debug mode, which waits for every op anyway, reads
// the indices of the indexing ops back and raises IndexError naming the op,
// as the CPU would.
#include "aten/index_check.h"

#include <map>

namespace torch_tpu::aten {

namespace {

void check_range(const std::string& op, const at::Tensor& index, int64_t size, int64_t dim) {
  if (!index.defined() || index.numel() == 0) return;
  if (index.scalar_type() == c10::kBool || index.scalar_type() == c10::kByte) return;  // masks
  at::Tensor host = index.to(c10::kCPU, c10::kLong);
  int64_t lo = host.min().item<int64_t>(), hi = host.max().item<int64_t>();
  int64_t bad = hi >= size ? hi : (lo < -size ? lo : 0);
  TORCH_CHECK_INDEX(lo >= -size && hi < size, op, ": index ", bad,
                    " is out of bounds for dimension ", dim, " with size ", size,
                    " (tpu debug mode; strict and defer_and_fuse clamp reads and drop writes)");
}

int64_t dim_arg(const std::vector<c10::IValue>& v, size_t i, const at::Tensor& self) {
  return c10::maybe_wrap_dim(v[i].toInt(), std::max<int64_t>(self.dim(), 1));
}

int64_t size_at(const at::Tensor& t, int64_t dim) { return t.dim() == 0 ? 1 : t.size(dim); }

// Per op: which argument holds indices into which dimension of which tensor.
using Checker = void (*)(const std::string& op, const std::vector<c10::IValue>& v);

const std::map<std::string, Checker>& checkers() {
  static const std::map<std::string, Checker> table = {
      {"aten::_index_put_impl_",
       [](const std::string& op, const auto& v) { check_list(op, v[0].toTensor(), v[1]); }},
      {"aten::embedding",
       [](const std::string& op, const auto& v) {
         check_range(op, v[1].toTensor(), v[0].toTensor().size(0), 0);
       }},
      {"aten::gather",
       [](const std::string& op, const auto& v) {
         const at::Tensor& self = v[0].toTensor();
         int64_t d = dim_arg(v, 1, self);
         check_range(op, v[2].toTensor(), size_at(self, d), d);
       }},
      {"aten::index.Tensor",
       [](const std::string& op, const auto& v) { check_list(op, v[0].toTensor(), v[1]); }},
      {"aten::index_put",
       [](const std::string& op, const auto& v) { check_list(op, v[0].toTensor(), v[1]); }},
      {"aten::index_put_",
       [](const std::string& op, const auto& v) { check_list(op, v[0].toTensor(), v[1]); }},
      {"aten::index_select",
       [](const std::string& op, const auto& v) {
         const at::Tensor& self = v[0].toTensor();
         int64_t d = dim_arg(v, 1, self);
         check_range(op, v[2].toTensor(), size_at(self, d), d);
       }},
  };
  return table;
}

}  // namespace

void check_list(const std::string& op, const at::Tensor& self, const c10::IValue& indices) {
  int64_t d = 0;
  for (const c10::IValue& e : indices.toListRef()) {
    if (e.isTensor() && e.toTensor().defined()) check_range(op, e.toTensor(), size_at(self, d), d);
    ++d;
  }
}

void check_indices(const std::string& op, const std::vector<c10::IValue>& values) {
  auto it = checkers().find(op);
  if (it != checkers().end()) it->second(op, values);
}

}  // namespace torch_tpu::aten
