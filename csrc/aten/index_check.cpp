// Index checks. On the device an out-of-range index cannot raise (XLA's
// gather clamps it, its scatter drops the update). Debug mode, which waits for every op anyway, reads
// the indices of the indexing ops back and raises IndexError naming the op,
// as the CPU would. Strict and defer_and_fuse check them on the device
// (unless TORCH_TPU_CHECK_INDICES=0): a small reduction beside the op whose
// result is read later (runtime/index_flags.h). Which values are allowed follows the CPU: take,
// put, index, index_put and index_fill wrap negative indices, the others
// reject them; nll_loss allows its ignore_index.
#include "aten/index_check.h"

#include <map>
#include <unordered_map>

#include "aten/tensor_bridge.h"
#include "runtime/index_flags.h"

namespace torch_tpu::aten {

namespace {

// One index argument and the range its values must lie in.
struct IndexUse {
  at::Tensor index;
  int64_t size = 0, dim = 0;
  bool negative_ok = false;
  std::optional<int64_t> ignore;  // a value allowed anyway (nll_loss's ignore_index)
  bool target = false;            // a class target (nll_loss), not an index
  int64_t lo() const { return negative_ok ? -size : 0; }
};

// `found`: the offending value, when known (the device check only knows
// that there is one).
std::string range_message(const std::string& op, const IndexUse& u, const std::string& found) {
  std::ostringstream m;
  m << op << (u.target ? ": Target " : ": index ") << found << (found.empty() ? "" : " ")
    << "is out of bounds";
  if (u.target) m << " (" << u.size << " classes)";
  else m << " for dimension " << u.dim << " with size " << u.size;
  return m.str();
}

void check_on_host(const std::string& op, const IndexUse& u, const char* note) {
  at::Tensor host = u.index.to(c10::kCPU, c10::kLong).flatten();
  at::Tensor bad = (host < u.lo()).logical_or(host >= u.size);
  if (u.ignore) bad = bad.logical_and(host != *u.ignore);
  if (!bad.any().item<bool>()) return;
  int64_t first = host.masked_select(bad)[0].item<int64_t>();
  TORCH_CHECK_INDEX(false, range_message(op, u, std::to_string(first)), note);
}

bool is_index(const at::Tensor& t) {
  return t.defined() && t.numel() > 0 && t.scalar_type() != c10::kBool && t.scalar_type() != c10::kByte;
}

int64_t dim_arg(const std::vector<c10::IValue>& v, size_t i, const at::Tensor& self) {
  return c10::maybe_wrap_dim(v[i].toInt(), std::max<int64_t>(self.dim(), 1));
}

int64_t size_at(const at::Tensor& t, int64_t dim) { return t.dim() == 0 ? 1 : t.size(dim); }

using Uses = std::vector<IndexUse>;
using Finder = void (*)(const std::vector<c10::IValue>& v, Uses& out);

void add(Uses& out, const at::Tensor& index, int64_t size, int64_t dim, bool negative_ok) {
  if (is_index(index)) out.push_back({index, size, dim, negative_ok, std::nullopt, false});
}

// (self, dim, index, ...): index into self's dimension `dim`.
template <bool NegativeOk>
void along_dim(const std::vector<c10::IValue>& v, Uses& out) {
  const at::Tensor& self = v[0].toTensor();
  int64_t d = dim_arg(v, 1, self);
  add(out, v[2].toTensor(), size_at(self, d), d, NegativeOk);
}

// (self, indices: Tensor?[], ...): advanced indexing of self's leading dims.
void index_list(const std::vector<c10::IValue>& v, Uses& out) {
  const at::Tensor& self = v[0].toTensor();
  int64_t d = 0;
  for (const c10::IValue& e : v[1].toListRef()) {
    if (e.isTensor()) add(out, e.toTensor(), size_at(self, d), d, true);
    ++d;
  }
}

// (self, index, ...): flat positions into self (take, put).
void flat(const std::vector<c10::IValue>& v, Uses& out) {
  add(out, v[1].toTensor(), v[0].toTensor().numel(), 0, true);
}

void embedding(const std::vector<c10::IValue>& v, Uses& out) {
  add(out, v[1].toTensor(), v[0].toTensor().size(0), 0, false);
}

// nll_loss_forward(self, target, weight, reduction, ignore_index).
void nll_target(const std::vector<c10::IValue>& v, Uses& out) {
  const at::Tensor& self = v[0].toTensor();
  const at::Tensor& target = v[1].toTensor();
  if (!is_index(target)) return;
  out.push_back({target, self.size(self.dim() >= 2 ? 1 : 0), 0, false, v[4].toInt(), true});
}

// Sorted by lowering name.
const std::map<std::string, Finder>& finders() {
  static const std::map<std::string, Finder> table = {
      {"aten::_index_put_impl", &index_list},
      {"aten::embedding", &embedding},
      {"aten::gather", &along_dim<false>},
      {"aten::index.Tensor", &index_list},
      {"aten::index_add", &along_dim<false>},
      {"aten::index_copy", &along_dim<false>},
      {"aten::index_fill.int_Scalar", &along_dim<true>},
      {"aten::index_fill.int_Tensor", &along_dim<true>},
      {"aten::index_put", &index_list},
      {"aten::index_reduce", &along_dim<false>},
      {"aten::index_select", &along_dim<false>},
      {"aten::nll_loss2d_forward", &nll_target},
      {"aten::nll_loss_forward", &nll_target},
      {"aten::put", &flat},
      {"aten::scatter.reduce", &along_dim<false>},
      {"aten::scatter.src", &along_dim<false>},
      {"aten::scatter.value", &along_dim<false>},
      {"aten::scatter.value_reduce", &along_dim<false>},
      {"aten::scatter_add", &along_dim<false>},
      {"aten::scatter_reduce.two", &along_dim<false>},
      {"aten::take", &flat},
  };
  return table;
}

// The index with its broadcast (stride 0) dims cut to one element: the check
// reads each distinct value once (gather's index is often an expand).
runtime::TensorInput distinct_elements(const at::Tensor& index) {
  runtime::TensorInput in = input_of(index);
  for (size_t d = 0; d < in.view.sizes.size(); ++d)
    if (in.view.strides[d] == 0) in.view.sizes[d] = std::min<int64_t>(in.view.sizes[d], 1);
  return in;
}

// Looked up once per lowering (keyed by its name's address, which the
// registry keeps): every op asks.
Finder finder_of(const std::string& lowering) {
  thread_local std::unordered_map<const std::string*, Finder> known;
  auto [it, fresh] = known.try_emplace(&lowering, nullptr);
  if (fresh) {
    auto f = finders().find(lowering);
    if (f != finders().end()) it->second = f->second;
  }
  return it->second;
}

Uses uses_of(Finder finder, const std::vector<c10::IValue>& values) {
  Uses uses;
  finder(values, uses);
  return uses;
}

}  // namespace

void check_indices(const std::string& lowering, const std::string& op,
                   const std::vector<c10::IValue>& values) {
  Finder finder = finder_of(lowering);
  if (!finder) return;
  for (const IndexUse& u : uses_of(finder, values)) check_on_host(op, u, " (tpu debug mode)");
}

runtime::OpIndexChecks record_index_checks(const std::string& lowering, const std::string& op,
                                           const std::vector<c10::IValue>& values,
                                           std::shared_ptr<const std::string>& origin) {
  runtime::OpIndexChecks checks;
  Finder finder = finder_of(lowering);
  if (!finder || runtime::capturing()) return checks;  // a compiled graph has no check state
  for (const IndexUse& u : uses_of(finder, values)) {
    if (u.index.device().type() != c10::DeviceType::PrivateUse1) {
      try {
        check_on_host(op, u, "");  // already on the host: no reason to wait
      } catch (...) {
        runtime::drop_index_checks(checks);
        throw;
      }
      continue;
    }
    runtime::IndexCheck check;
    check.index = distinct_elements(u.index);
    check.range = {u.lo(), u.size, u.ignore.value_or(0), u.ignore ? 1 : 0};
    check.device = u.index.device().index();
    const runtime::IndexCheckSite site{op, u.size, u.dim, u.target, nullptr};
    translate_errors([&] { return runtime::record_index_check(check, site, origin, checks); });
  }
  return checks;
}

void watch_index_checks(const runtime::OpIndexChecks& checks,
                        const std::vector<std::shared_ptr<runtime::DeviceBuffer>>& results) {
  if (checks.all.empty()) return;
  std::vector<std::weak_ptr<runtime::DeviceBuffer>> weak(results.begin(), results.end());
  runtime::watch_index_results(checks, weak);
}

}  // namespace torch_tpu::aten
