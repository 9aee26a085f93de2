// The Builder's shape ops: reshape, transpose, broadcast_in_dim, static and
// dynamic slices, dynamic_update_slice, concatenate, pad, reverse and iota.
// Each computes its result type from its operands and checks dimensions and
// bounds, naming the op when they do not fit.
#include "hlo/builder_internal.h"

namespace torch_tpu::hlo {

using namespace internal;

namespace {

void check_index_scalars(const std::vector<Value>& idx, int64_t rank, const char* op) {
  if (static_cast<int64_t>(idx.size()) != rank)
    bad(op, "expects " + std::to_string(rank) + " start indices, got " + std::to_string(idx.size()));
  for (const auto& i : idx) {
    need(i, op);
    if (i.rank() != 0 || !is_integral(i.dtype()))
      bad(op, "start indices must be rank-0 integers, got " + i.type.str());
    if (i.dtype() != idx[0].dtype()) bad(op, "start indices must share one element type");
  }
}

}  // namespace

// ---- shape

Value Builder::reshape(Value a, const Shape& shape) {
  need(a, "reshape");
  TensorType t{a.dtype(), shape};
  for (int64_t d : shape)
    if (d < 0) bad("reshape", "negative dimension in " + shape_str(shape));
  if (t.numel() != a.type.numel())
    bad("reshape", "cannot reshape " + shape_str(a.shape()) + " to " + shape_str(shape));
  Value r = op("stablehlo.reshape", {a}, t);
  if (shape == a.shape()) same_values_[r.id] = a;
  return r;
}

Value Builder::transpose(Value a, const std::vector<int64_t>& perm) {
  need(a, "transpose");
  if (static_cast<int64_t>(perm.size()) != a.rank())
    bad("transpose", "permutation " + shape_str(perm) + " does not match rank " +
                         std::to_string(a.rank()));
  check_dims(perm, a.rank(), "transpose");
  TensorType t{a.dtype(), {}};
  for (int64_t p : perm) t.shape.push_back(a.shape()[p]);
  Value r = op("stablehlo.transpose", {a}, t, "permutation = " + i64_array(perm));
  transposes_[r.id] = {a, perm};
  return r;
}

std::optional<Value> Builder::transposed_from(Value v, const std::vector<int64_t>& perm) const {
  for (auto same = same_values_.find(v.id); same != same_values_.end(); same = same_values_.find(v.id))
    v = same->second;
  auto it = transposes_.find(v.id);
  if (it == transposes_.end() || it->second.second != perm) return std::nullopt;
  return it->second.first;
}

Value Builder::broadcast_in_dim(Value a, const Shape& shape, const std::vector<int64_t>& dims) {
  need(a, "broadcast_in_dim");
  if (static_cast<int64_t>(dims.size()) != a.rank())
    bad("broadcast_in_dim", "needs one dimension per operand dimension, got " + shape_str(dims) +
                                " for " + a.type.str());
  check_dims(dims, static_cast<int64_t>(shape.size()), "broadcast_in_dim");
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t from = a.shape()[i], to = shape[dims[i]];
    if (from != 1 && from != to)
      bad("broadcast_in_dim", "cannot broadcast " + shape_str(a.shape()) + " to " +
                                  shape_str(shape) + " with dims " + shape_str(dims));
  }
  return op("stablehlo.broadcast_in_dim", {a}, TensorType{a.dtype(), shape},
            "broadcast_dimensions = " + i64_array(dims));
}

Value Builder::slice(Value a, const std::vector<int64_t>& start, const std::vector<int64_t>& limit,
                     const std::vector<int64_t>& strides) {
  need(a, "slice");
  size_t r = a.shape().size();
  if (start.size() != r || limit.size() != r || strides.size() != r)
    bad("slice", "start/limit/strides must have rank " + std::to_string(r) + " entries");
  TensorType t{a.dtype(), {}};
  for (size_t i = 0; i < r; ++i) {
    if (start[i] < 0 || start[i] > limit[i] || limit[i] > a.shape()[i] || strides[i] <= 0)
      bad("slice", "bad bounds [" + std::to_string(start[i]) + ":" + std::to_string(limit[i]) +
                       ":" + std::to_string(strides[i]) + "] for dimension " + std::to_string(i) +
                       " of " + a.type.str());
    t.shape.push_back((limit[i] - start[i] + strides[i] - 1) / strides[i]);
  }
  return op("stablehlo.slice", {a}, t,
            "start_indices = " + i64_array(start) + ", limit_indices = " + i64_array(limit) +
                ", strides = " + i64_array(strides));
}

Value Builder::dynamic_slice(Value a, const std::vector<Value>& start_indices, const Shape& sizes) {
  need(a, "dynamic_slice");
  check_index_scalars(start_indices, a.rank(), "dynamic_slice");
  if (static_cast<int64_t>(sizes.size()) != a.rank())
    bad("dynamic_slice", "sizes " + shape_str(sizes) + " do not match " + a.type.str());
  for (size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i] < 0 || sizes[i] > a.shape()[i])
      bad("dynamic_slice", "sizes " + shape_str(sizes) + " exceed " + a.type.str());
  std::vector<Value> operands{a};
  operands.insert(operands.end(), start_indices.begin(), start_indices.end());
  return op("stablehlo.dynamic_slice", operands, TensorType{a.dtype(), sizes},
            "slice_sizes = " + i64_array(sizes));
}

Value Builder::dynamic_update_slice(Value a, Value update, const std::vector<Value>& start_indices) {
  need(a, "dynamic_update_slice");
  need(update, "dynamic_update_slice");
  check_index_scalars(start_indices, a.rank(), "dynamic_update_slice");
  bool fits = update.dtype() == a.dtype() && update.rank() == a.rank();
  for (int64_t i = 0; fits && i < a.rank(); ++i) fits = update.shape()[i] <= a.shape()[i];
  if (!fits)
    bad("dynamic_update_slice", "update " + update.type.str() + " does not fit " + a.type.str());
  std::vector<Value> operands{a, update};
  operands.insert(operands.end(), start_indices.begin(), start_indices.end());
  return op("stablehlo.dynamic_update_slice", operands, a.type);
}

Value Builder::concatenate(const std::vector<Value>& values, int64_t dim) {
  if (values.empty()) bad("concatenate", "needs at least one operand");
  const Value& first = values[0];
  need(first, "concatenate");
  check_dim(dim, first.rank(), "concatenate");
  TensorType t = first.type;
  t.shape[dim] = 0;
  for (const auto& v : values) {
    need(v, "concatenate");
    bool ok = v.dtype() == first.dtype() && v.rank() == first.rank();
    for (int64_t i = 0; ok && i < v.rank(); ++i) ok = i == dim || v.shape()[i] == first.shape()[i];
    if (!ok)
      bad("concatenate", "cannot join " + v.type.str() + " with " + first.type.str() +
                             " along dimension " + std::to_string(dim));
    t.shape[dim] += v.shape()[dim];
  }
  return op("stablehlo.concatenate", values, t, "dimension = " + std::to_string(dim) + " : i64");
}

Value Builder::pad(Value a, Value pad_value, const std::vector<int64_t>& low,
                   const std::vector<int64_t>& high, const std::vector<int64_t>& interior) {
  need(a, "pad");
  need(pad_value, "pad");
  if (pad_value.type != scalar_type(a.dtype()))
    bad("pad", "padding value must be " + scalar_type(a.dtype()).str() + ", got " +
                   pad_value.type.str());
  size_t r = a.shape().size();
  if (low.size() != r || high.size() != r || interior.size() != r)
    bad("pad", "low/high/interior must have rank " + std::to_string(r) + " entries");
  TensorType t{a.dtype(), {}};
  for (size_t i = 0; i < r; ++i) {
    int64_t d = a.shape()[i];
    int64_t n = low[i] + high[i] + d + (d > 0 ? (d - 1) * interior[i] : 0);
    if (interior[i] < 0 || n < 0) bad("pad", "bad padding for dimension " + std::to_string(i));
    t.shape.push_back(n);
  }
  return op("stablehlo.pad", {a, pad_value}, t,
            "edge_padding_low = " + i64_array(low) + ", edge_padding_high = " + i64_array(high) +
                ", interior_padding = " + i64_array(interior));
}

Value Builder::reverse(Value a, const std::vector<int64_t>& dims) {
  need(a, "reverse");
  check_dims(dims, a.rank(), "reverse");
  return op("stablehlo.reverse", {a}, a.type, "dimensions = " + i64_array(dims));
}

Value Builder::iota(const TensorType& type, int64_t dim) {
  check_dim(dim, type.rank(), "iota");
  if (type.dtype == ElementType::Bool) bad("iota", "i1 cannot count");
  return op("stablehlo.iota", {}, type, "iota_dimension = " + std::to_string(dim) + " : i64");
}


}  // namespace torch_tpu::hlo
