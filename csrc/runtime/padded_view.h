// A view of a padded tensor, read from the padded buffer itself.
//
// A tensor's view is (sizes, strides, offset) over its logical contiguous
// storage. When that storage's buffer is padded along one dimension p
// (runtime/dynamic_dims.h), the same elements sit at other flat positions:
// every dimension outside p keeps its index, and the strides of the
// dimensions before p grow by bucket / size. A view can be read from the
// padded buffer directly when each of its dimensions walks inside one logical
// dimension (a slice, a split of a dimension, a transpose, an expand), or
// merges whole consecutive dimensions that do not include p, and exactly one
// view dimension walks all of p from 0 with step 1: that view dimension is
// then the padded one, with the bucket as its extent. Everything else (a
// partial range of p, a merge through p) is not such a view: the caller cuts
// a box or reads the exact tensor.
#pragma once

#include <optional>

#include "runtime/view.h"

namespace torch_tpu::runtime {

struct PaddedView {
  ViewGeometry view;  // over the padded buffer
  int dim = -1;       // the view's padded dimension
};

// `v` (a view of a tensor of `logical` type) over the buffer padded along
// `dim` to `bucket`; nullopt when it is not such a view.
std::optional<PaddedView> padded_view(const ViewGeometry& v, const hlo::TensorType& logical, int dim,
                                      int64_t bucket);

}  // namespace torch_tpu::runtime
