// Ops whose output shape depends on the values of an input: nonzero,
// masked_select, unique, boolean-mask indexing (x[mask], x[mask] = v),
// masked_scatter_, repeat_interleave(repeats), bincount.
//
// A StableHLO program has static shapes, so none of these can be one compiled
// program. Each does one documented *host sync*: the tensor that decides the
// size (the mask, the repeats, the values to deduplicate) is copied to the
// host -- which waits for the work that produces it, like `.item()` -- and
// the size and the integer positions are computed there. Then:
//  - nonzero, unique*, repeat_interleave(repeats), bincount: the host result
//    (small: positions, or at most the input's size) is uploaded;
//  - masked_select, masked_scatter_, x[mask], x[mask] = v: only the positions
//    are uploaded; the values never leave the device and are moved by lowered
//    ops (take, put_, index, index_put) there.
// Under defer_and_fuse the sync cuts the pending graph, like any read.
#include <ATen/ExpandUtils.h>

#include "aten/op_kernel.h"
#include "aten/tensor_bridge.h"

namespace torch_tpu::aten {

namespace {

bool on_tpu(const at::Tensor& t) { return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1; }

// The host sync: a CPU copy of `t` (waits for the work that produces it).
at::Tensor to_host(const at::Tensor& t) { return on_tpu(t) ? t.to(c10::kCPU) : t; }

// Linear positions (int64, 1-D, on `device`) of the true elements of a
// host-side bool tensor, in row-major order.
at::Tensor positions(const at::Tensor& host_mask, c10::Device device) {
  return at::nonzero(host_mask.reshape(-1)).view(-1).to(device);
}

// ---- nonzero

at::Tensor tpu_nonzero(const at::Tensor& self) { return at::nonzero(to_host(self)).to(self.device()); }

at::Tensor& tpu_nonzero_out(const at::Tensor& self, at::Tensor& out) {
  TORCH_CHECK(out.scalar_type() == at::kLong,
              "nonzero: Expected out tensor to have scalar type Long but got scalar type", out.scalar_type());
  copy_to_out(tpu_nonzero(self), out);
  return out;
}

at::Tensor tpu_nonzero_static(const at::Tensor& self, int64_t size, int64_t fill_value) {
  return at::nonzero_static(to_host(self), size, fill_value).to(self.device());
}

at::Tensor& tpu_nonzero_static_out(const at::Tensor& self, int64_t size, int64_t fill_value, at::Tensor& out) {
  TORCH_CHECK(out.scalar_type() == at::kLong,
              "nonzero_static: Expected out tensor to have scalar type Long but got scalar type", out.scalar_type());
  copy_to_out(tpu_nonzero_static(self, size, fill_value), out);
  return out;
}

// ---- masked_select / masked_scatter_

at::Tensor tpu_masked_select(const at::Tensor& self, const at::Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  TORCH_CHECK(self.device() == mask.device() || mask.dim() == 0 || !on_tpu(mask),
              "Expected all tensors to be on the same device, but found at least two devices, ",
              self.device(), " and ", mask.device(), "!");
  auto shape = at::infer_size(self.sizes(), mask.sizes());
  at::Tensor idx = positions(to_host(mask).expand(shape), self.device());
  // take reads the (broadcast) view in row-major order: the CPU's order.
  return at::take(self.expand(shape), idx);
}

at::Tensor& tpu_masked_select_out(const at::Tensor& self, const at::Tensor& mask, at::Tensor& out) {
  TORCH_CHECK(out.scalar_type() == self.scalar_type(), "masked_select(): self and result must have the same scalar type");
  copy_to_out(tpu_masked_select(self, mask), out);
  return out;
}

at::Tensor& tpu_masked_scatter_(at::Tensor& self, const at::Tensor& mask, const at::Tensor& source) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_scatter_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(),
              "masked_scatter_: expected self and source to have same dtypes but got", self.scalar_type(), " and ",
              source.scalar_type());
  at::Tensor m = to_host(mask).expand(self.sizes());  // mask broadcasts to self, never the reverse
  at::Tensor idx = positions(m, self.device());
  int64_t n = idx.numel();
  TORCH_CHECK(source.numel() >= n, "masked_scatter: expected source to have at least ", n,
              " elements (the number of ones in mask), got ", source.numel());
  if (n == 0) return self;
  self.put_(idx, source.reshape(-1).narrow(0, 0, n));
  return self;
}

// ---- unique (computed on the host; results are at most the input's size)

std::tuple<at::Tensor, at::Tensor, at::Tensor> tpu_unique2(const at::Tensor& self, bool sorted, bool return_inverse,
                                                       bool return_counts) {
  auto [u, inv, cnt] = at::_unique2(to_host(self), sorted, return_inverse, return_counts);
  auto d = self.device();
  return {u.to(d), inv.to(d), cnt.to(d)};
}

std::tuple<at::Tensor, at::Tensor> tpu_unique(const at::Tensor& self, bool sorted, bool return_inverse) {
  auto [u, inv] = at::_unique(to_host(self), sorted, return_inverse);
  return {u.to(self.device()), inv.to(self.device())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> tpu_unique_dim(const at::Tensor& self, int64_t dim, bool sorted,
                                                          bool return_inverse, bool return_counts) {
  auto [u, inv, cnt] = at::unique_dim(to_host(self), dim, sorted, return_inverse, return_counts);
  auto d = self.device();
  return {u.to(d), inv.to(d), cnt.to(d)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> tpu_unique_consecutive(const at::Tensor& self, bool return_inverse,
                                                                  bool return_counts, std::optional<int64_t> dim) {
  auto [u, inv, cnt] = at::unique_consecutive(to_host(self), return_inverse, return_counts, dim);
  auto d = self.device();
  return {u.to(d), inv.to(d), cnt.to(d)};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> tpu_unique_dim_consecutive(const at::Tensor& self, int64_t dim,
                                                                      bool return_inverse, bool return_counts) {
  auto [u, inv, cnt] = at::unique_dim_consecutive(to_host(self), dim, return_inverse, return_counts);
  auto d = self.device();
  return {u.to(d), inv.to(d), cnt.to(d)};
}

// ---- repeat_interleave(repeats) and bincount: sizes come from values

at::Tensor tpu_repeat_interleave_tensor(const at::Tensor& repeats, std::optional<c10::SymInt> output_size) {
  std::optional<int64_t> size;
  if (output_size) size = output_size->expect_int();
  return at::repeat_interleave(to_host(repeats), size).to(repeats.device());
}

at::Tensor tpu_bincount(const at::Tensor& self, const std::optional<at::Tensor>& weights, int64_t minlength) {
  std::optional<at::Tensor> w;
  if (weights && weights->defined()) w = to_host(*weights);
  return at::bincount(to_host(self), w, minlength).to(self.device());
}

// ---- boolean masks in Tensor?[] indices (index, index_put_, ...)
// A k-dim mask indexes dimensions start..start+k-1 of self: their sizes must
// be the mask's, as the CPU checks.
void check_mask_fits(const at::Tensor& mask, const at::Tensor& self, int64_t start) {
  for (int64_t j = 0; j < mask.dim(); ++j)
    TORCH_CHECK_INDEX(start + j < self.dim() && mask.size(j) == self.size(start + j), "The shape of the mask ",
                      mask.sizes(), " at index ", j, " does not match the shape of the indexed tensor ",
                      self.sizes(), " at index ", start + j);
}

// `x[mask] = v` with one value for every chosen element (a scalar) needs no
// positions: it is where(mask, v, x) (x + where(mask, v, 0) when
// accumulating), no host sync, and so it can be captured by torch.compile.
// Handled when the indices are one boolean mask, after only Nones, and the
// values are one element of self's dtype; else the general path below.
bool put_through_mask(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = op.schema();
  const auto& args = schema.arguments();
  size_t n = args.size(), base = stack->size() - n;
  auto arg = [&](const char* name) -> c10::IValue& {
    for (size_t i = 0; i < n; ++i)
      if (args[i].name() == name) return (*stack)[base + i];
    TORCH_CHECK(false, "tpu: ", schema.name(), " has no argument ", name);
  };
  if (schema.name().find("index_put") == std::string::npos) return false;
  const at::Tensor self = (*stack)[base].toTensor();
  const at::Tensor values = arg("values").toTensor();
  if (values.numel() != 1 || values.scalar_type() != self.scalar_type()) return false;
  c10::List<std::optional<at::Tensor>> indices = arg("indices").toOptionalTensorList();
  TORCH_CHECK_INDEX(static_cast<int64_t>(indices.size()) <= self.dim(), "too many indices for tensor of dimension ",
                    self.dim(), " (got ", indices.size(), ")");
  int64_t lead = 0;
  std::optional<at::Tensor> mask;
  for (const std::optional<at::Tensor>& e : indices) {
    bool defined = e && e->defined();
    if (mask && defined) return false;  // an index after the mask
    if (!defined) {
      if (!mask) ++lead;
      continue;
    }
    if (e->scalar_type() != at::kBool) return false;
    mask = *e;
  }
  if (!mask) return false;
  check_mask_fits(*mask, self, lead);
  std::vector<int64_t> shape(lead, 1);
  shape.insert(shape.end(), mask->sizes().begin(), mask->sizes().end());
  shape.resize(self.dim(), 1);
  at::Tensor where = mask->to(self.device()).reshape(shape);
  at::Tensor value = values.reshape({});
  bool accumulate = arg("accumulate").toBool();
  at::Tensor result = accumulate ? self + at::where(where, value, at::zeros_like(value))
                                 : at::where(where, value, self);
  bool in_place = schema.name().back() == '_';
  bool out_form = schema.overload_name() == "out";
  c10::IValue ret;
  if (in_place) {
    ret = self.copy_(result);
  } else if (out_form) {
    at::Tensor out = arg("out").toTensor();
    ret = copy_to_out(result, out);
  } else {
    ret = result;
  }
  torch::jit::drop(*stack, n);
  stack->push_back(std::move(ret));
  return true;
}

// Like ATen's expandTensors: a k-dim mask becomes k int64 index tensors (the
// coordinates of its true elements), then the lowered op runs with them.
// Index tensors on the CPU are moved to the device, as CUDA allows them.
void expand_masks_then_lower(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (put_through_mask(op, stack)) return;
  const auto& args = op.schema().arguments();
  size_t n = args.size();
  size_t base = stack->size() - n;
  const at::Tensor self = (*stack)[base].toTensor();
  for (size_t i = 0; i < n; ++i) {
    if (args[i].name() != "indices") continue;
    c10::IValue& v = (*stack)[base + i];
    c10::List<std::optional<at::Tensor>> in = v.toOptionalTensorList();
    bool rewrite = false;
    for (const std::optional<at::Tensor>& e : in) {
      if (!e || !e->defined()) continue;
      if (e->scalar_type() == at::kBool || e->scalar_type() == at::kByte || !on_tpu(*e)) rewrite = true;
    }
    if (!rewrite) break;
    c10::List<std::optional<at::Tensor>> out;
    for (const std::optional<at::Tensor>& e : in) {
      if (!e || !e->defined()) {
        out.push_back(std::nullopt);
        continue;
      }
      const at::Tensor& index = *e;
      if (index.scalar_type() != at::kBool && index.scalar_type() != at::kByte) {
        out.push_back(on_tpu(index) ? index : index.to(self.device()));
        continue;
      }
      if (index.scalar_type() == at::kByte)
        TORCH_WARN("indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool instead.");
      check_mask_fits(index, self, static_cast<int64_t>(out.size()));
      TORCH_CHECK_NOT_IMPLEMENTED(index.dim() > 0, "tpu: ", op.schema().name(),
                                  " with a 0-dim boolean index tensor is not supported");
      at::Tensor coords = at::nonzero(to_host(index)).to(self.device());  // [count, k]
      for (int64_t j = 0; j < index.dim(); ++j) out.push_back(coords.select(1, j));
    }
    v = c10::IValue(out);
  }
  lowered_op_kernel(op, stack);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("nonzero", TORCH_FN(tpu_nonzero));
  m.impl("nonzero.out", TORCH_FN(tpu_nonzero_out));
  m.impl("nonzero_static", TORCH_FN(tpu_nonzero_static));
  m.impl("nonzero_static.out", TORCH_FN(tpu_nonzero_static_out));
  m.impl("masked_select", TORCH_FN(tpu_masked_select));
  m.impl("masked_select.out", TORCH_FN(tpu_masked_select_out));
  m.impl("masked_scatter_", TORCH_FN(tpu_masked_scatter_));
  m.impl("_unique2", TORCH_FN(tpu_unique2));
  m.impl("_unique", TORCH_FN(tpu_unique));
  m.impl("unique_dim", TORCH_FN(tpu_unique_dim));
  m.impl("unique_consecutive", TORCH_FN(tpu_unique_consecutive));
  m.impl("unique_dim_consecutive", TORCH_FN(tpu_unique_dim_consecutive));
  m.impl("repeat_interleave.Tensor", TORCH_FN(tpu_repeat_interleave_tensor));
  m.impl("bincount", TORCH_FN(tpu_bincount));
  for (const char* name : {"index.Tensor", "index.Tensor_out", "index_put", "index_put_", "index_put.out",
                           "_index_put_impl", "_index_put_impl_", "_index_put_impl.out"})
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&expand_masks_then_lower>());
}

}  // namespace torch_tpu::aten
