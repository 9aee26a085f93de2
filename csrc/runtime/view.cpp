#include "runtime/view.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "common/error.h"
#include "common/key_text.h"

namespace torch_tpu::runtime {

using hlo::Builder;
using hlo::ElementType;
using hlo::Shape;
using hlo::Value;

int64_t ViewGeometry::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  return n;
}

std::vector<int64_t> contiguous_strides(const hlo::Shape& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d) s[d] = s[d + 1] * shape[d + 1];
  return s;
}

ViewGeometry whole_view(const hlo::TensorType& type) {
  return {type.shape, contiguous_strides(type.shape), 0, type.dtype};
}

bool ViewGeometry::is_contiguous() const {
  int64_t expected = 1;
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 1; i >= 0; --i) {
    if (sizes[i] != 1 && strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

void ViewGeometry::append_key(std::string& key) const {
  key += hlo::mlir_name(dtype);
  key += '[';
  for (size_t i = 0; i < sizes.size(); ++i) {
    append_int(key, sizes[i], ':');
    append_int(key, strides[i], ',');
  }
  key += '+';
  append_int(key, offset);
  key += ']';
}

bool is_identity(const ViewGeometry& v, const hlo::TensorType& base) {
  return v.dtype == base.dtype && v.sizes == base.shape && v.offset == 0 && v.is_contiguous();
}

bool covers_storage(const ViewGeometry& v, int64_t nbytes) {
  return v.offset == 0 && v.is_contiguous() && v.numel() * hlo::byte_size(v.dtype) == nbytes;
}

void check_writable(const ViewGeometry& v, const char* op) {
  for (size_t i = 0; i < v.sizes.size(); ++i) {
    TPU_CHECK(!(v.strides[i] == 0 && v.sizes[i] > 1), ErrorKind::Runtime, op,
              ": unsupported operation: more than one element of the written-to tensor refers "
              "to a single memory location. Please clone() the tensor before performing the "
              "operation.");
  }
}

namespace {

// ---- reinterpreting the base as a flat array of another dtype

// Bool has no bit width StableHLO can bitcast; it is stored as one byte 0/1.
Value to_bytes_if_bool(Builder& b, Value v) {
  return v.dtype() == ElementType::Bool ? b.convert(v, ElementType::U8) : v;
}

// A flat real array reinterpreted bit for bit as another real dtype.
Value reinterpret_flat(Builder& b, Value flat, ElementType dtype) {
  if (flat.dtype() == dtype) return flat;
  bool to_bool = dtype == ElementType::Bool;
  flat = to_bytes_if_bool(b, flat);
  ElementType target = to_bool ? ElementType::U8 : dtype;
  int64_t from = hlo::byte_size(flat.dtype()), to = hlo::byte_size(target);
  int64_t n = flat.type.numel();
  Value out;
  if (from == to) {
    out = flat.dtype() == target ? flat : b.bitcast_convert(flat, {target, {n}});
  } else if (from > to) {
    out = b.reshape(b.bitcast_convert(flat, {target, {n, from / to}}), {n * (from / to)});
  } else {
    int64_t k = to / from;
    TPU_CHECK(n % k == 0, ErrorKind::Runtime, "cannot view a storage of ", n * from,
              " bytes as ", hlo::short_name(dtype));
    out = b.bitcast_convert(b.reshape(flat, {n / k, k}), {target, {n / k}});
  }
  return to_bool ? b.compare(out, b.zeros(ElementType::U8, out.shape()), hlo::Compare::NE) : out;
}

// StableHLO cannot bitcast complex values; they are pairs of floats
// (real, imaginary) in memory, so they are split into and joined from those.
ElementType component(ElementType c) {
  return c == ElementType::C128 ? ElementType::F64 : ElementType::F32;
}

Value split_complex(Builder& b, Value c) {
  int64_t n = c.type.numel();
  Value re = b.reshape(b.real(c), {n, 1}), im = b.reshape(b.imag(c), {n, 1});
  return b.reshape(b.concatenate({re, im}, 1), {2 * n});
}

Value join_complex(Builder& b, Value f) {
  int64_t n = f.type.numel() / 2;
  Value pairs = b.reshape(f, {n, 2});
  Value re = b.reshape(b.slice(pairs, {0, 0}, {n, 1}, {1, 1}), {n});
  Value im = b.reshape(b.slice(pairs, {0, 1}, {n, 2}, {1, 1}), {n});
  return b.complex(re, im);
}

// Any flat array reinterpreted as a flat array of `dtype`.
Value reinterpret_any(Builder& b, Value flat, ElementType dtype) {
  if (flat.dtype() == dtype) return flat;
  if (hlo::is_complex(flat.dtype())) flat = split_complex(b, flat);
  if (hlo::is_complex(dtype)) return join_complex(b, reinterpret_flat(b, flat, component(dtype)));
  return reinterpret_flat(b, flat, dtype);
}

Value flat_as(Builder& b, Value base, ElementType dtype) {
  return reinterpret_any(b, b.reshape(base, {base.type.numel()}), dtype);
}

// Inverse of flat_as: a flat array of `flat`'s dtype back into base's type.
Value unflat(Builder& b, Value flat, const hlo::TensorType& base) {
  return b.reshape(reinterpret_any(b, flat, base.dtype), base.shape);
}

// ---- the box decomposition

struct Box {
  std::vector<int64_t> order;     // view dims with size > 1 and stride > 0, by stride desc
  Shape container;                // [s0, t0/t1, ..., t_{m-2}/t_{m-1}, t_{m-1}]
  Shape corner;                   // [s0, s1, ..., s_{m-1}, 1]
  int64_t span = 0;               // s0 * t0 (elements the box covers from offset)
};

std::optional<Box> make_box(const ViewGeometry& v) {
  Box box;
  for (size_t i = 0; i < v.sizes.size(); ++i)
    if (v.sizes[i] > 1 && v.strides[i] > 0) box.order.push_back(static_cast<int64_t>(i));
  for (size_t i = 0; i < v.sizes.size(); ++i)
    if (v.sizes[i] > 1 && v.strides[i] < 0) return std::nullopt;
  std::stable_sort(box.order.begin(), box.order.end(),
                   [&](int64_t a, int64_t c) { return v.strides[a] > v.strides[c]; });
  size_t m = box.order.size();
  if (m == 0) {
    box.container = {1};
    box.corner = {1};
    box.span = 1;
    return box;
  }
  for (size_t k = 1; k < m; ++k) {
    int64_t outer = v.strides[box.order[k - 1]], inner = v.strides[box.order[k]];
    if (outer % inner != 0 || outer / inner < v.sizes[box.order[k]]) return std::nullopt;
  }
  box.container.push_back(v.sizes[box.order[0]]);
  for (size_t k = 1; k < m; ++k)
    box.container.push_back(v.strides[box.order[k - 1]] / v.strides[box.order[k]]);
  box.container.push_back(v.strides[box.order[m - 1]]);
  for (size_t k = 0; k < m; ++k) box.corner.push_back(v.sizes[box.order[k]]);
  box.corner.push_back(1);
  box.span = v.sizes[box.order[0]] * v.strides[box.order[0]];
  return box;
}

// The [offset, offset + span) window of flat, zero padded past its end.
Value window(Builder& b, Value flat, int64_t offset, int64_t span) {
  int64_t n = flat.type.numel();
  int64_t end = std::min(n, offset + span);
  Value piece = b.slice(flat, {offset}, {end}, {1});
  if (end - offset < span)
    piece = b.pad(piece, b.zeros(flat.dtype(), {}), {0}, {span - (end - offset)}, {0});
  return piece;
}

// Shape of the view with only the box dims kept (others set to 1), in view order.
Shape kept_shape(const ViewGeometry& v, const Box& box) {
  Shape s(v.sizes.size(), 1);
  for (int64_t d : box.order) s[d] = v.sizes[d];
  return s;
}

// Permutation taking box order (sorted by stride) to view order of kept dims.
std::vector<int64_t> to_view_order(const Box& box) {
  std::vector<int64_t> sorted = box.order;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> perm;
  for (int64_t d : sorted)
    perm.push_back(std::find(box.order.begin(), box.order.end(), d) - box.order.begin());
  return perm;
}

Value flat_indices(Builder& b, const ViewGeometry& v) {
  hlo::TensorType it{ElementType::I64, v.sizes};
  Value idx = b.full(static_cast<double>(v.offset), ElementType::I64, v.sizes);
  for (size_t d = 0; d < v.sizes.size(); ++d) {
    if (v.strides[d] == 0 || v.sizes[d] == 1) continue;
    Value term = b.mul(b.iota(it, static_cast<int64_t>(d)),
                       b.full(static_cast<double>(v.strides[d]), ElementType::I64, v.sizes));
    idx = b.add(idx, term);
  }
  return b.reshape(idx, {v.numel(), 1});
}

Builder::GatherDims element_gather() {
  Builder::GatherDims g;
  g.collapsed_slice_dims = {0};
  g.start_index_map = {0};
  g.index_vector_dim = 1;
  return g;
}

Builder::ScatterDims element_scatter() {
  Builder::ScatterDims s;
  s.inserted_window_dims = {0};
  s.scatter_dims_to_operand_dims = {0};
  s.index_vector_dim = 1;
  return s;
}

}  // namespace

Value read_view(Builder& b, Value base, const ViewGeometry& v) {
  if (is_identity(v, base.type)) return base;
  Value flat = flat_as(b, base, v.dtype);
  if (v.numel() == 0) return b.zeros(v.dtype, v.sizes);
  TPU_CHECK(v.offset >= 0, ErrorKind::Runtime, "negative storage offset ", v.offset);
  std::optional<Box> box = make_box(v);
  if (!box) {
    Value got = b.gather(flat, flat_indices(b, v), element_gather(), {1}, {v.numel()});
    return b.reshape(got, v.sizes);
  }
  Value r = b.reshape(window(b, flat, v.offset, box->span), box->container);
  std::vector<int64_t> zeros(box->corner.size(), 0), ones(box->corner.size(), 1);
  r = b.slice(r, zeros, box->corner, ones);
  Shape sorted_sizes(box->corner.begin(), box->corner.end() - 1);
  r = b.reshape(r, sorted_sizes);
  if (sorted_sizes.size() > 1) r = b.transpose(r, to_view_order(*box));
  r = b.reshape(r, kept_shape(v, *box));
  if (r.shape() != v.sizes) {
    std::vector<int64_t> dims(v.sizes.size());
    std::iota(dims.begin(), dims.end(), 0);
    r = b.broadcast_in_dim(r, v.sizes, dims);
  }
  return r;
}

Value write_view(Builder& b, Value base, const ViewGeometry& v, Value update) {
  if (v.numel() == 0) return base;
  if (is_identity(v, base.type)) return update;
  Value flat = flat_as(b, base, v.dtype);
  std::optional<Box> box = make_box(v);
  bool broadcasts = false;
  for (size_t i = 0; i < v.sizes.size(); ++i) broadcasts |= v.sizes[i] > 1 && v.strides[i] == 0;
  if (!box || broadcasts) {
    Value updates = b.reshape(update, {v.numel()});
    flat = b.scatter(flat, flat_indices(b, v), updates, element_scatter(),
                     [](Builder&, const std::vector<Value>& a) { return std::vector<Value>{a[1]}; });
    return unflat(b, flat, base.type);
  }
  // Update in box order: drop unit dims, permute to stride order, add the
  // trailing unit dim of the box.
  Shape sorted_sizes(box->corner.begin(), box->corner.end() - 1);
  Shape view_order_sizes;
  std::vector<int64_t> sorted_view_dims = box->order;
  std::sort(sorted_view_dims.begin(), sorted_view_dims.end());
  for (int64_t d : sorted_view_dims) view_order_sizes.push_back(v.sizes[d]);
  Value u = b.reshape(update, view_order_sizes);
  if (view_order_sizes.size() > 1) {
    // inverse of to_view_order
    std::vector<int64_t> perm;
    for (int64_t d : box->order)
      perm.push_back(std::find(sorted_view_dims.begin(), sorted_view_dims.end(), d) -
                     sorted_view_dims.begin());
    u = b.transpose(u, perm);
  }
  u = b.reshape(u, box->corner);

  int64_t n = flat.type.numel();
  int64_t end = std::min(n, v.offset + box->span);
  Value region = b.reshape(window(b, flat, v.offset, box->span), box->container);
  std::vector<Value> starts;
  for (size_t i = 0; i < box->container.size(); ++i)
    starts.push_back(b.constant_int(0, ElementType::I64));
  region = b.dynamic_update_slice(region, u, starts);
  Value piece = b.reshape(region, {box->span});
  if (end - v.offset < box->span) piece = b.slice(piece, {0}, {end - v.offset}, {1});
  flat = b.dynamic_update_slice(flat, piece, {b.constant_int(v.offset, ElementType::I64)});
  return unflat(b, flat, base.type);
}

}  // namespace torch_tpu::runtime
