#include "runtime/padded_view.h"

namespace torch_tpu::runtime {

namespace {

// The logical dimension a stride lands in: the outermost one of size above 1
// whose stride is not above it (contiguous strides shrink inward), if its
// stride divides it.
int landing_dim(const hlo::Shape& shape, const std::vector<int64_t>& strides, int64_t stride) {
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] > 1 && strides[d] <= stride) return stride % strides[d] == 0 ? static_cast<int>(d) : -1;
  return -1;
}

}  // namespace

std::optional<PaddedView> padded_view(const ViewGeometry& v, const hlo::TensorType& logical, int dim,
                                      int64_t bucket) {
  const hlo::Shape& shape = logical.shape;
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (v.dtype != logical.dtype || dim < 0 || dim >= rank || v.numel() == 0) return std::nullopt;
  hlo::Shape physical = shape;
  physical[dim] = bucket;
  const auto strides = contiguous_strides(shape), pstrides = contiguous_strides(physical);
  std::vector<int64_t> start(rank, 0), reach(rank, 0);  // reach: the last index walked per dim
  int64_t rest = v.offset;
  for (int64_t d = 0; d < rank; ++d) {
    start[d] = rest / strides[d];
    rest %= strides[d];
  }
  if (rank > 0 && start[0] >= shape[0]) return std::nullopt;
  PaddedView out{v, -1};
  out.view.offset = 0;
  for (int64_t d = 0; d < rank; ++d) out.view.offset += start[d] * pstrides[d];
  std::vector<bool> merged(rank, false);
  for (size_t j = 0; j < v.sizes.size(); ++j) {
    if (v.sizes[j] == 1 || v.strides[j] == 0) continue;  // no walk: any stride reads the same
    int d = landing_dim(shape, strides, v.strides[j]);
    if (d < 0) return std::nullopt;
    const int64_t step = v.strides[j] / strides[d];
    if (start[d] + reach[d] + step * (v.sizes[j] - 1) < shape[d]) {  // inside dimension d
      reach[d] += step * (v.sizes[j] - 1);
      out.view.strides[j] = step * pstrides[d];
      if (d == dim) {
        if (step != 1 || start[d] != 0 || v.sizes[j] != shape[d] || out.dim >= 0) return std::nullopt;
        out.dim = static_cast<int>(j);
        out.view.sizes[j] = bucket;
      }
      continue;
    }
    // A merge of whole dimensions d-k..d, none of them the padded one.
    int64_t covered = 1, e = d;
    for (; e >= 0 && covered < v.sizes[j]; --e) {
      if (e == dim || start[e] != 0 || reach[e] != 0 || merged[e]) return std::nullopt;
      covered *= shape[e];
      merged[e] = true;
    }
    if (step != 1 || covered != v.sizes[j]) return std::nullopt;
    out.view.strides[j] = pstrides[d];
  }
  if (out.dim < 0) return std::nullopt;  // p is not walked whole: a box, or exact
  return out;
}

}  // namespace torch_tpu::runtime
