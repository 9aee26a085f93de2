// embedding_bag: rows of a weight matrix gathered at `indices` and reduced
// (sum, mean or max) per bag, the bags given by `offsets`; and its gradients.
//
// The bag of each position is computed on the device from the offsets (the
// number of offsets at or before the position, minus one: a scatter of ones
// at the offsets and a cumulative sum), so nothing is read back to the host.
//
// The outputs follow the CPU kernel: (output, offset2bag, bag_size,
// max_indices) in the promoted index type of indices and offsets. offset2bag
// is empty where the CPU takes its sum fast path (float/half/bfloat16 weight,
// no padding_idx) and the backward then recomputes it from the offsets;
// bag_size counts the non-padding entries of each bag for mean and max (zeros
// for sum); max_indices is [bags, dim] for max, bag_size for mean and zeros
// for sum. The CPU's checks on index values (in range, offsets increasing
// from 0) cannot be made on data here: gathers clamp, scatters drop.
#include <algorithm>
#include <limits>

#include "lowering/common.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

using hlo::Builder;
using hlo::Compare;
using E = ElementType;
using Dims = std::vector<int64_t>;

enum Mode : int64_t { kSum = 0, kMean = 1, kMax = 2 };

bool is_index_type(E t) { return t == E::I64 || t == E::I32; }

int64_t numel(const Value& v) { return v.type.numel(); }

// Inclusive cumulative sum of a rank-1 value by doubling.
Value cumsum1(Builder& b, Value x) {
  int64_t n = x.shape()[0];
  for (int64_t s = 1; s < n; s *= 2) {
    Value shifted = b.pad(b.slice(x, {0}, {n - s}, {1}), b.constant_int(0, x.dtype()), {s}, {0}, {0});
    x = b.add(x, shifted);
  }
  return x;
}

// Scatter-combines `updates` ([n] or [n, D]) into `operand` ([B] or [B, D])
// at rows `rows` ([n], i64); rows out of range are dropped.
Value scatter_rows(Builder& b, Value operand, Value rows, Value updates, int which) {
  if (numel(updates) == 0 || numel(operand) == 0) return operand;
  int64_t n = rows.shape()[0];
  Builder::ScatterDims s;
  for (int64_t d = 1; d < updates.rank(); ++d) s.update_window_dims.push_back(d);
  s.inserted_window_dims = {0};
  s.scatter_dims_to_operand_dims = {0};
  s.index_vector_dim = 1;
  return b.scatter(operand, b.reshape(rows, {n, 1}), updates, s,
                   [which](Builder& r, const std::vector<Value>& x) {
                     Value v = which == 0 ? r.add(x[0], x[1]) : which == 1 ? r.max(x[0], x[1])
                                                                           : r.min(x[0], x[1]);
                     return std::vector<Value>{v};
                   });
}
Value add_at(Builder& b, Value operand, Value rows, Value updates) {
  return scatter_rows(b, operand, rows, updates, 0);
}
Value max_at(Builder& b, Value operand, Value rows, Value updates) {
  return scatter_rows(b, operand, rows, updates, 1);
}
Value min_at(Builder& b, Value operand, Value rows, Value updates) {
  return scatter_rows(b, operand, rows, updates, 2);
}

// table[rows[j]] for each j: table [B] or [B, D], rows [n] i64 (clamped).
Value take_rows(Builder& b, Value table, Value rows) {
  int64_t n = rows.shape()[0];
  Shape result = {n};
  Dims slice = {1};
  Builder::GatherDims g;
  if (table.rank() == 2) {
    result.push_back(table.shape()[1]);
    slice.push_back(table.shape()[1]);
    g.offset_dims = {1};
  }
  g.collapsed_slice_dims = {0};
  g.start_index_map = {0};
  g.index_vector_dim = 1;
  if (n == 0 || table.shape()[0] == 0) return b.zeros(table.dtype(), result);
  return b.gather(table, b.reshape(rows, {n, 1}), g, slice, result);
}

// offset2bag: the bag of each of n positions, #{k : offs[k] <= j} - 1.
Value bags_of(Builder& b, Value offs, int64_t n) {
  if (n == 0) return b.zeros(E::I64, {0});
  int64_t m = offs.shape()[0];
  Value marks = add_at(b, b.zeros(E::I64, {n + 1}), offs, b.full(1, E::I64, {m}));
  Value c = cumsum1(b, b.slice(marks, {0}, {n}, {1}));
  return b.sub(c, b.full(1, E::I64, {n}));
}

Value vec_i64(Builder& b, Value v) { return b.reshape(cast(b, v, E::I64), {numel(v)}); }

Value not_padding(Builder& b, Value idx, int64_t padding_idx) {
  int64_t n = idx.shape()[0];
  if (padding_idx < 0) return b.full(1, E::Bool, {n});
  return b.compare(idx, b.full(double(padding_idx), E::I64, {n}), Compare::NE);
}

// The positions whose rows a bag's gradient reaches: not padding, and in one
// of the `bags` bags (with include_last_offset, the positions from the last
// offset on belong to none; the CPU leaves their gradient uninitialized).
Value in_a_bag(Builder& b, Value idx, Value bag, int64_t bags, int64_t padding_idx) {
  int64_t n = idx.shape()[0];
  return b.and_(not_padding(b, idx, padding_idx), b.compare(bag, b.full(double(bags), E::I64, {n}), Compare::LT));
}

Value per_row(Builder& b, Value v, const Shape& shape) { return b.broadcast_in_dim(v, shape, {0}); }

std::vector<Value> embedding_bag(Context& ctx, const Args& a, bool forward_only) {
  Builder& b = ctx.b;
  Value weight = a[0].as_tensor(), indices = a[1].as_tensor(), offsets = a[2].as_tensor();
  int64_t mode = a[4].as_int();
  std::optional<Value> psw = a[6].opt_tensor();
  bool incl = a[7].as_bool();
  int64_t padding_idx = a[8].as_int();
  TPU_CHECK(weight.rank() == 2, ErrorKind::Runtime, "weight has to be a 2D Tensor, but got Tensor of dimension ",
            weight.rank());
  TPU_CHECK(indices.rank() == 1, ErrorKind::Runtime, "input has to be a 1D or 2D Tensor, but got Tensor of dimension ",
            indices.rank());
  TPU_CHECK(offsets.rank() == 1, ErrorKind::Runtime, "offsets has to be a 1D Tensor, but got Tensor of dimension ",
            offsets.rank());
  TPU_CHECK(is_index_type(indices.dtype()) && is_index_type(offsets.dtype()), ErrorKind::Runtime,
            "Expected tensor for argument #1 'indices' to have one of the following scalar types: "
            "Long, Int; but got ", scalar_type_name(indices.dtype()),
            " instead (while checking arguments for embedding_bag)");
  TPU_CHECK(mode >= kSum && mode <= kMax, ErrorKind::Runtime, "embedding_bag: mode ", mode, " is not supported");
  if (psw) {
    TPU_CHECK(mode == kSum, ErrorKind::NotImplemented,
              "embedding_bag: per_sample_weights was not None. per_sample_weights is only supported "
              "for mode='sum' (got mode='", mode == kMean ? "mean" : "max", "'). Please open a feature request on GitHub.");
    TPU_CHECK(psw->rank() == 1 && numel(*psw) == numel(indices), ErrorKind::Runtime,
              "embedding_bag: If per_sample_weights (", hlo::shape_str(psw->shape()),
              ") is not None, then it must have the same shape as the input (",
              hlo::shape_str(indices.shape()), ")");
  }
  E wt = weight.dtype();
  E it = indices.dtype() == E::I64 || offsets.dtype() == E::I64 ? E::I64 : E::I32;
  E acc = opmath(wt);
  int64_t n = numel(indices), dim = weight.shape()[1], m = numel(offsets);
  TPU_CHECK(weight.shape()[0] > 0 || n == 0, ErrorKind::Runtime,
            "embedding_bag: every index of input is outside the valid range [0, 0) of an empty weight");
  int64_t bags = incl ? std::max<int64_t>(m - 1, 0) : m;
  Shape out_shape = {bags, dim};

  Value idx = vec_i64(b, indices);
  Value offs = vec_i64(b, offsets);
  Value bag_offs = bags < m ? b.slice(offs, {0}, {bags}, {1}) : offs;
  Value bag = bags_of(b, bag_offs, n);
  Value keep = not_padding(b, idx, padding_idx);
  Value counts = add_at(b, b.zeros(E::I64, {bags}), bag, b.convert(keep, E::I64));
  Value rows = cast(b, take_rows(b, weight, idx), acc);
  Shape rows_shape = {n, dim};
  // The CPU's sum fast path (float weights, no padding_idx) sums each bag up
  // to the next offset, the last one up to offsets[-1] with
  // include_last_offset; its other paths run every bag up to the next
  // bag's start (the last to the end of indices).
  bool fast = (wt == E::F32 || wt == E::F16 || wt == E::BF16) && padding_idx < 0;

  Value out, max_idx;
  Value nonempty = b.compare(counts, b.zeros(E::I64, {bags}), Compare::GT);
  if (mode == kMax) {
    Value lowest = broadcast_to(b, b.min_value(acc), rows_shape);
    Value cand = b.select(per_row(b, keep, rows_shape), rows, lowest);
    Value mx = max_at(b, broadcast_to(b, b.min_value(acc), out_shape), bag, cand);
    // The first position in its bag that reaches the maximum.
    Value hit = b.and_(per_row(b, keep, rows_shape),
                       b.compare(rows, take_rows(b, mx, bag), Compare::EQ));
    Value pos = b.select(hit, b.iota(hlo::TensorType{E::I64, rows_shape}, 0),
                         b.full(double(n), E::I64, rows_shape));
    Value first = min_at(b, b.full(double(n), E::I64, out_shape), bag, pos);
    Value first_flat = b.reshape(b.clamp(b.constant_int(0, E::I64), first,
                                         b.constant_int(std::max<int64_t>(n - 1, 0), E::I64)),
                                 {bags * dim});
    Value which = b.reshape(take_rows(b, idx, first_flat), out_shape);
    Value ne = per_row(b, nonempty, out_shape);
    out = b.select(ne, mx, b.zeros(acc, out_shape));
    max_idx = b.select(ne, which, b.zeros(E::I64, out_shape));
  } else {
    Value summed = keep;
    if (incl && fast && m > 0) {
      Value last = b.broadcast_in_dim(b.reshape(b.slice(offs, {m - 1}, {m}, {1}), {}), {n}, {});
      summed = b.and_(summed, b.compare(b.iota(hlo::TensorType{E::I64, {n}}, 0), last, Compare::LT));
    }
    Value contrib = rows;
    if (psw) contrib = b.mul(contrib, per_row(b, b.reshape(cast(b, *psw, acc), {n}), rows_shape));
    contrib = keep_rows(b, summed, contrib);
    out = add_at(b, b.zeros(acc, out_shape), bag, contrib);
    if (mode == kMean) {
      Value denom = b.convert(b.max(counts, b.full(1, E::I64, {bags})), acc);
      out = b.div(out, per_row(b, denom, out_shape));
    }
  }
  out = cast(b, out, wt);
  Value offset2bag = mode == kSum && fast ? b.zeros(it, {0}) : cast(b, bag, it);
  // Sum mode has no bag sizes; _embedding_bag_forward_only sizes them like
  // the offsets, _embedding_bag like the bags.
  int64_t unused = forward_only ? m : bags;
  Value bag_size = mode == kSum ? b.zeros(it, {unused}) : cast(b, counts, it);
  Value max_indices =
      mode == kMax ? cast(b, max_idx, it) : mode == kMean ? bag_size : b.zeros(it, {unused});
  return {out, offset2bag, bag_size, max_indices};
}

std::vector<Value> lower_embedding_bag(Context& ctx, const Args& a) {
  return embedding_bag(ctx, a, false);
}
std::vector<Value> lower_embedding_bag_forward_only(Context& ctx, const Args& a) {
  return embedding_bag(ctx, a, true);
}

// The weight gradient, dense: each non-padding position adds its bag's
// gradient row (scaled) to its index's row; max sends each element of a
// non-empty bag's gradient to the row that held the maximum.
Value dense_backward(Builder& b, Value grad, Value idx, Value bag, Value bag_size, Value max_indices,
                     int64_t num_weights, bool by_freq, int64_t mode, std::optional<Value> psw,
                     int64_t padding_idx) {
  E gt = grad.dtype();
  E acc = opmath(gt);
  TPU_CHECK(grad.rank() == 2, ErrorKind::Runtime, "embedding_bag backward: grad has to be 2-D");
  int64_t bags = grad.shape()[0], dim = grad.shape()[1], n = idx.shape()[0];
  Shape w_shape = {num_weights, dim};
  Value g = cast(b, grad, acc);
  Value sizes = vec_i64(b, bag_size);
  if (mode == kMax) {
    Shape gs = {bags, dim};
    Value ne = b.compare(sizes, b.zeros(E::I64, {bags}), Compare::NE);
    Value upd = b.select(per_row(b, ne, gs), g, b.zeros(acc, gs));
    if (numel(upd) == 0 || num_weights == 0) return b.zeros(gt, w_shape);
    Shape one = {bags, dim, 1};
    Value coords = b.concatenate({b.reshape(cast(b, max_indices, E::I64), one),
                                  b.reshape(b.iota(hlo::TensorType{E::I64, gs}, 1), one)},
                                 2);
    Builder::ScatterDims s;
    s.inserted_window_dims = {0, 1};
    s.scatter_dims_to_operand_dims = {0, 1};
    s.index_vector_dim = 2;
    Value r = b.scatter(b.zeros(acc, w_shape), coords, upd, s,
                        [](Builder& rb, const std::vector<Value>& x) {
                          return std::vector<Value>{rb.add(x[0], x[1])};
                        });
    return cast(b, r, gt);
  }
  Value scale = b.full(1, acc, {n});
  if (psw) scale = b.reshape(cast(b, *psw, acc), {n});
  if (by_freq) {
    Value counts = add_at(b, b.zeros(acc, {num_weights}), idx, b.full(1, acc, {n}));
    scale = b.div(scale, b.max(take_rows(b, counts, idx), b.full(1, acc, {n})));
  }
  if (mode == kMean) {
    Value sz = b.convert(take_rows(b, sizes, bag), acc);
    Value zero = b.zeros(acc, {n});
    sz = b.select(b.compare(sz, zero, Compare::EQ), b.full(1, acc, {n}), sz);
    scale = b.div(scale, sz);
  }
  Shape rows_shape = {n, dim};
  Value rows = b.mul(take_rows(b, g, bag), per_row(b, scale, rows_shape));
  rows = keep_rows(b, in_a_bag(b, idx, bag, bags, padding_idx), rows);
  return cast(b, add_at(b, b.zeros(acc, w_shape), idx, rows), gt);
}

// offset2bag as the forward returned it, or recomputed from all the offsets
// where the forward left it empty.
Value bag_for_backward(Builder& b, Value offset2bag, Value offsets, int64_t n) {
  if (n != 0 && numel(offset2bag) == 0) return bags_of(b, vec_i64(b, offsets), n);
  return vec_i64(b, offset2bag);
}

std::vector<Value> lower_embedding_bag_backward(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  TPU_CHECK(!a[9].as_bool(), ErrorKind::NotImplemented,
            "embedding_bag with sparse=True (a sparse weight gradient) is not supported on the tpu "
            "device; use sparse=False");
  Value idx = vec_i64(b, a[1].as_tensor());
  Value bag = bag_for_backward(b, a[3].as_tensor(), a[2].as_tensor(), idx.shape()[0]);
  return {dense_backward(b, a[0].as_tensor(), idx, bag, a[4].as_tensor(), a[5].as_tensor(), a[6].as_int(),
                         a[7].as_bool(), a[8].as_int(), a[10].opt_tensor(), a[11].as_int())};
}

std::vector<Value> lower_embedding_bag_dense_backward(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value idx = vec_i64(b, a[1].as_tensor());
  return {dense_backward(b, a[0].as_tensor(), idx, vec_i64(b, a[2].as_tensor()), a[3].as_tensor(),
                         a[4].as_tensor(), a[5].as_int(), a[6].as_bool(), a[7].as_int(),
                         a[8].opt_tensor(), a[9].as_int())};
}

// d output[bag[j]] / d psw[j] = weight[idx[j]]: the dot with the bag's grad.
std::vector<Value> lower_embedding_bag_psw_backward(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value grad = a[0].as_tensor(), weight = a[1].as_tensor();
  int64_t mode = a[5].as_int(), padding_idx = a[6].as_int();
  TPU_CHECK(mode == kSum, ErrorKind::Runtime,
            "embedding_bag_backward: per_sample_weights only supported for mode='sum'");
  Value idx = vec_i64(b, a[2].as_tensor());
  int64_t n = idx.shape()[0];
  Value bag = bag_for_backward(b, a[4].as_tensor(), a[3].as_tensor(), n);
  E acc = opmath(grad.dtype());
  Value prod = b.mul(take_rows(b, cast(b, grad, acc), bag), take_rows(b, cast(b, weight, acc), idx));
  Value r = b.reduce_sum(prod, {1});
  r = keep_rows(b, in_a_bag(b, idx, bag, grad.shape()[0], padding_idx), r);
  return {cast(b, r, grad.dtype())};
}

}  // namespace

TPU_LOWERING("aten::_embedding_bag", lower_embedding_bag);
TPU_LOWERING("aten::_embedding_bag_forward_only", lower_embedding_bag_forward_only);
TPU_LOWERING("aten::_embedding_bag_backward", lower_embedding_bag_backward);
TPU_LOWERING("aten::_embedding_bag_dense_backward", lower_embedding_bag_dense_backward);
TPU_LOWERING("aten::_embedding_bag_per_sample_weights_backward", lower_embedding_bag_psw_backward);

}  // namespace torch_tpu::lowering
