// Views as StableHLO. A tensor is (sizes, strides, offset, dtype) over its
// storage's contiguous base buffer. Reading it becomes a small program:
// reinterpret the base as a flat array of the view's dtype, then either
//  - slice a padded window [offset, offset + s0*t0) of it, reshape that window
//    into a box whose row-major strides are the view's strides (dims sorted by
//    stride), keep the [0, size) corner of each dim, and transpose/broadcast
//    back to the view's order (stride 0 dims are broadcasts) — this covers
//    slices, transposes, permutes, selects, expands and diagonals with steps
//    that divide evenly; or
//  - gather element by element from computed flat indices (anything else).
// Writing is the inverse: the same box is updated in place with
// dynamic_update_slice (or a scatter for the general case), and the flat
// array is reinterpreted back as the base, giving a new base buffer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hlo/builder.h"

namespace torch_tpu::runtime {

struct ViewGeometry {
  hlo::Shape sizes;
  std::vector<int64_t> strides;  // in elements of dtype
  int64_t offset = 0;            // in elements of dtype
  hlo::ElementType dtype = hlo::ElementType::F32;

  int64_t numel() const;
  bool is_contiguous() const;
  // Appends a compact description for cache keys.
  void append_key(std::string& key) const;
};

// Row-major strides of `shape`, in elements.
std::vector<int64_t> contiguous_strides(const hlo::Shape& shape);
// The row-major view of a whole array of `type`.
ViewGeometry whole_view(const hlo::TensorType& type);

// True when the view is exactly the base: same dtype and shape, contiguous,
// no offset (reading it needs no program).
bool is_identity(const ViewGeometry& v, const hlo::TensorType& base);
// True when the view covers every byte of a storage of `nbytes` contiguously
// (a write replaces the base outright).
bool covers_storage(const ViewGeometry& v, int64_t nbytes);
// PyTorch refuses in-place writes where elements alias (stride 0 expands).
void check_writable(const ViewGeometry& v, const char* op);

hlo::Value read_view(hlo::Builder& b, hlo::Value base, const ViewGeometry& v);
// Returns the new base (same type as `base`) with `update` (of the view's
// sizes and dtype) written through the view.
hlo::Value write_view(hlo::Builder& b, hlo::Value base, const ViewGeometry& v, hlo::Value update);

}  // namespace torch_tpu::runtime
