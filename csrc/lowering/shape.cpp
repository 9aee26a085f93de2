// Ops that copy data into a new shape: cat, stack, padding, repeat, flip,
// roll, tril/triu, narrow_copy, and diagonals copied out or embedded. (Views — view, transpose, slice, expand — are metadata
// handled by aten/ and runtime/, not lowerings.)
#include <algorithm>

#include "lowering/common.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

using hlo::Builder;
using hlo::Compare;
using E = ElementType;
using Dims = std::vector<int64_t>;

std::vector<Value> present(const Arg& list, const char* op) {
  std::vector<Value> out;
  for (const auto& t : list.tensors) {
    TPU_CHECK(t.has_value(), ErrorKind::Runtime, op, "(): the tensor list holds an undefined tensor");
    out.push_back(*t);
  }
  return out;
}

// cat and stack promote across all inputs; every input is a dimensioned
// tensor, so plain pairwise promotion is torch.result_type here.
E promoted(const std::vector<Value>& ts) {
  E t = ts[0].dtype();
  for (const auto& v : ts) t = promote(t, v.dtype());
  return t;
}

// Zero-size pieces add nothing and some plugins reject them in concatenate.
Value concat(Builder& b, const std::vector<Value>& parts, int64_t dim, const Shape& result, E t) {
  std::vector<Value> kept;
  for (const auto& p : parts)
    if (p.shape()[dim] != 0) kept.push_back(cast(b, p, t));
  if (kept.empty()) return b.zeros(t, result);
  return kept.size() == 1 ? kept[0] : b.concatenate(kept, dim);
}

std::vector<Value> lower_cat(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  std::vector<Value> ts = present(a[0], "cat");
  TPU_CHECK(!ts.empty(), ErrorKind::Value, "torch.cat(): expected a non-empty list of Tensors");
  for (size_t i = 0; i < ts.size(); ++i)
    TPU_CHECK(ts[i].rank() > 0, ErrorKind::Runtime, "zero-dimensional tensor (at position ", i,
              ") cannot be concatenated");
  E t = promoted(ts);
  // PyTorch's legacy rule: 1-D empty tensors are skipped whatever the others' shape.
  auto skipped = [](const Value& v) { return v.rank() == 1 && v.shape()[0] == 0; };
  auto ref = std::find_if(ts.begin(), ts.end(), [&](const Value& v) { return !skipped(v); });
  if (ref == ts.end()) {
    wrap_dim(a[1].as_int(), 1);
    return {b.zeros(t, {0})};
  }
  int64_t dim = wrap_dim(a[1].as_int(), ref->rank());
  Shape result = ref->shape();
  result[dim] = 0;
  std::vector<Value> parts;
  for (size_t i = 0; i < ts.size(); ++i) {
    const Value& v = ts[i];
    if (skipped(v)) continue;
    TPU_CHECK(v.rank() == ref->rank(), ErrorKind::Runtime,
              "Tensors must have same number of dimensions: got ", ref->rank(), " and ", v.rank());
    for (int64_t d = 0; d < v.rank(); ++d)
      TPU_CHECK(d == dim || v.shape()[d] == ref->shape()[d], ErrorKind::Runtime,
                "Sizes of tensors must match except in dimension ", dim, ". Expected size ",
                ref->shape()[d], " but got size ", v.shape()[d], " for tensor number ", i,
                " in the list.");
    result[dim] += v.shape()[dim];
    parts.push_back(v);
  }
  return {concat(b, parts, dim, result, t)};
}

std::vector<Value> lower_stack(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  std::vector<Value> ts = present(a[0], "stack");
  TPU_CHECK(!ts.empty(), ErrorKind::Runtime, "stack expects a non-empty TensorList");
  const Shape& shape = ts[0].shape();
  for (size_t i = 1; i < ts.size(); ++i)
    TPU_CHECK(ts[i].shape() == shape, ErrorKind::Runtime,
              "stack expects each tensor to be equal size, but got ", hlo::shape_str(shape),
              " at entry 0 and ", hlo::shape_str(ts[i].shape()), " at entry ", i);
  int64_t dim = wrap_dim(a[1].as_int(), ts[0].rank() + 1);
  Shape one = shape;
  one.insert(one.begin() + dim, 1);
  Shape result = shape;
  result.insert(result.begin() + dim, static_cast<int64_t>(ts.size()));
  std::vector<Value> parts;
  for (const auto& v : ts) parts.push_back(b.reshape(v, one));
  return {concat(b, parts, dim, result, promoted(ts))};
}

std::vector<Value> lower_constant_pad_nd(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  const Dims& pad = a[1].as_ints();
  int64_t n = static_cast<int64_t>(pad.size());
  TPU_CHECK(n % 2 == 0, ErrorKind::Runtime, "Length of pad must be even but instead it equals ", n);
  TPU_CHECK(n / 2 <= x.rank(), ErrorKind::Runtime,
            "Length of pad should be no more than twice the number of dimensions of the input. "
            "Pad length is ",
            n, "while the input has ", x.rank(), "dimensions.");
  Dims low(x.rank(), 0), high(x.rank(), 0), interior(x.rank(), 0);
  // pad lists (before, after) pairs starting from the last dim.
  for (int64_t i = 0; i < n / 2; ++i) {
    int64_t d = x.rank() - 1 - i;
    low[d] = pad[2 * i];
    high[d] = pad[2 * i + 1];
    int64_t size = x.shape()[d] + low[d] + high[d];
    TPU_CHECK(size >= 0, ErrorKind::Runtime, "The input size ", x.shape()[d],
              ", plus negative padding ", low[d], " and ", high[d],
              " resulted in a negative output size, which is invalid. Check dimension ", d,
              " of your input.");
  }
  if (n == 0) return {x};
  return {b.pad(x, ctx.number(a[2], x.dtype()), low, high, interior)};
}

std::vector<Value> lower_flip(Context& ctx, const Args& a) {
  Value x = a[0].as_tensor();
  check_dim_mask_rank(x.rank());  // the CPU's flip holds its dims in the same 64-bit mask
  Dims dims = wrap_dims(a[1].as_ints(), x.rank());
  if (dims.empty()) return {x};
  return {ctx.b.reverse(x, dims)};
}

std::vector<Value> lower_repeat(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  const Dims& reps = a[1].as_ints();
  int64_t n = static_cast<int64_t>(reps.size());
  TPU_CHECK(n >= x.rank(), ErrorKind::Runtime,
            "Number of dimensions of repeat dims can not be smaller than number of dimensions of "
            "tensor");
  Shape padded(n - x.rank(), 1);
  padded.insert(padded.end(), x.shape().begin(), x.shape().end());
  // Each dim i becomes (reps[i], size[i]), then the pair is merged.
  Shape pairs, result;
  Dims map;
  for (int64_t i = 0; i < n; ++i) {
    TPU_CHECK(reps[i] >= 0, ErrorKind::Runtime, "Trying to create tensor with negative dimension ",
              reps[i], ": ", hlo::shape_str(reps));
    pairs.push_back(reps[i]);
    pairs.push_back(padded[i]);
    map.push_back(2 * i + 1);
    result.push_back(reps[i] * padded[i]);
  }
  Value spread = b.broadcast_in_dim(b.reshape(x, padded), pairs, map);
  return {b.reshape(spread, result)};
}

// x rotated by s along d: the last s entries move to the front.
Value roll_one(Builder& b, Value x, int64_t shift, int64_t d) {
  int64_t n = x.shape()[d];
  if (n == 0) return x;
  int64_t s = ((shift % n) + n) % n;
  if (s == 0) return x;
  Dims start(x.rank(), 0), limit = x.shape(), strides(x.rank(), 1);
  Dims tail_start = start;
  tail_start[d] = n - s;
  Dims head_limit = limit;
  head_limit[d] = n - s;
  return b.concatenate({b.slice(x, tail_start, limit, strides), b.slice(x, start, head_limit, strides)},
                       d);
}

std::vector<Value> lower_roll(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  const Dims& shifts = a[1].as_ints();
  const Dims& dims = a[2].as_ints();
  TPU_CHECK(!shifts.empty(), ErrorKind::Runtime, "`shifts` required");
  if (dims.empty()) {
    TPU_CHECK(shifts.size() == 1, ErrorKind::Runtime, "shifts and dimensions must align. shifts: ",
              shifts.size(), ", dims:0");
    Value flat = b.reshape(x, {x.type.numel()});
    return {b.reshape(roll_one(b, flat, shifts[0], 0), x.shape())};
  }
  TPU_CHECK(shifts.size() == dims.size(), ErrorKind::Runtime,
            "shifts and dimensions must align. shifts: ", shifts.size(), ", dims:", dims.size());
  if (x.rank() == 0) return {x};
  for (size_t i = 0; i < dims.size(); ++i) x = roll_one(b, x, shifts[i], wrap_dim(dims[i], x.rank()));
  return {x};
}

std::vector<Value> lower_narrow_copy(Context& ctx, const Args& a) {
  Value x = a[0].as_tensor();
  TPU_CHECK(x.rank() > 0, ErrorKind::Runtime, "narrow() cannot be applied to a 0-dim tensor.");
  int64_t dim = wrap_dim(a[1].as_int(), x.rank());
  int64_t size = x.shape()[dim], start = a[2].as_int(), length = a[3].as_int();
  TPU_CHECK(start >= -size && start <= size, ErrorKind::Index,
            "start out of range (expected to be in range of [", -size, ", ", size, "], but got ",
            start, ")");
  if (start < 0) start += size;
  TPU_CHECK(length >= 0 && start + length <= size, ErrorKind::Runtime, "start (", start,
            ") + length (", length, ") exceeds dimension size (", size, ").");
  Dims begin(x.rank(), 0), limit = x.shape(), strides(x.rank(), 1);
  begin[dim] = start;
  limit[dim] = start + length;
  return {ctx.b.slice(x, begin, limit, strides)};
}

// The diagonal of dims (dim1, dim2) with an offset, as PyTorch's diagonal
// lays it out: the other dims in order, then the diagonal last. Reading it
// (diagonal_copy) is a gather of (row, col) pairs; writing it into zeros
// (diagonal_backward, diag_embed) is the matching scatter.
struct Diagonal {
  Dims perm;       // the other dims in order, then dim1, dim2
  Shape permuted;  // the input's shape in that order
  Shape result;    // the other dims, then the diagonal's length
  int64_t length = 0;
  Value coords;    // [length, 2]: (row, col) of each element; unset when empty
};

Diagonal diagonal_of(Builder& b, const Shape& shape, int64_t offset, int64_t dim1, int64_t dim2) {
  int64_t rank = static_cast<int64_t>(shape.size());
  int64_t d1 = wrap_dim(dim1, rank), d2 = wrap_dim(dim2, rank);
  TPU_CHECK(d1 != d2, ErrorKind::Runtime, "diagonal dimensions cannot be identical ", dim1, ", ",
            dim2);
  Diagonal d;
  for (int64_t i = 0; i < rank; ++i)
    if (i != d1 && i != d2) {
      d.perm.push_back(i);
      d.result.push_back(shape[i]);
    }
  d.perm.push_back(d1);
  d.perm.push_back(d2);
  for (int64_t i : d.perm) d.permuted.push_back(shape[i]);
  int64_t n1 = shape[d1], n2 = shape[d2];
  d.length = std::max<int64_t>(offset >= 0 ? std::min(n1, n2 - offset) : std::min(n1 + offset, n2), 0);
  d.result.push_back(d.length);
  if (d.length > 0) {
    hlo::TensorType it{E::I64, {d.length, 1}};
    Value row = b.add(b.iota(it, 0), b.full(double(offset >= 0 ? 0 : -offset), E::I64, {d.length, 1}));
    Value col = b.add(b.iota(it, 0), b.full(double(offset >= 0 ? offset : 0), E::I64, {d.length, 1}));
    d.coords = b.concatenate({row, col}, 1);
  }
  return d;
}

Dims inverse(const Dims& p) {
  Dims inv(p.size());
  for (size_t i = 0; i < p.size(); ++i) inv[p[i]] = static_cast<int64_t>(i);
  return inv;
}

// `diag` (others + [length]) written onto the diagonal of zeros of `shape`.
Value embed_diagonal(Builder& b, Value diag, const Shape& shape, int64_t offset, int64_t dim1,
                     int64_t dim2) {
  Diagonal d = diagonal_of(b, shape, offset, dim1, dim2);
  TPU_CHECK(diag.shape() == d.result, ErrorKind::Runtime, "diagonal of ", hlo::shape_str(shape),
            " has shape ", hlo::shape_str(d.result), ", got ", hlo::shape_str(diag.shape()));
  if (d.length == 0 || diag.type.numel() == 0) return b.zeros(diag.dtype(), shape);
  Value zeros = b.zeros(diag.dtype(), d.permuted);
  int64_t nb = static_cast<int64_t>(d.result.size()) - 1;
  Builder::ScatterDims s;
  for (int64_t i = 0; i < nb; ++i) s.update_window_dims.push_back(i);
  s.inserted_window_dims = {nb, nb + 1};
  s.scatter_dims_to_operand_dims = {nb, nb + 1};
  s.index_vector_dim = 1;
  Value r = b.scatter(zeros, d.coords, diag, s, [](Builder&, const std::vector<Value>& x) {
    return std::vector<Value>{x[1]};
  });
  return b.transpose(r, inverse(d.perm));
}

std::vector<Value> lower_diagonal_copy(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  Diagonal d = diagonal_of(b, x.shape(), a[1].as_int(), a[2].as_int(), a[3].as_int());
  if (hlo::TensorType{x.dtype(), d.result}.numel() == 0) return {b.zeros(x.dtype(), d.result)};
  int64_t nb = static_cast<int64_t>(d.result.size()) - 1;
  Builder::GatherDims g;
  for (int64_t i = 0; i < nb; ++i) g.offset_dims.push_back(i);
  g.collapsed_slice_dims = {nb, nb + 1};
  g.start_index_map = {nb, nb + 1};
  g.index_vector_dim = 1;
  Dims slice(d.result.begin(), d.result.end() - 1);
  slice.push_back(1);
  slice.push_back(1);
  return {b.gather(b.transpose(x, d.perm), d.coords, g, slice, d.result)};
}

std::vector<Value> lower_diagonal_backward(Context& ctx, const Args& a) {
  return {embed_diagonal(ctx.b, a[0].as_tensor(), a[1].as_ints(), a[2].as_int(), a[3].as_int(),
                         a[4].as_int())};
}

std::vector<Value> lower_diag_embed(Context& ctx, const Args& a) {
  Value x = a[0].as_tensor();
  TPU_CHECK(x.rank() >= 1, ErrorKind::Runtime, "diag_embed: expected a tensor of at least 1 dimension");
  int64_t offset = a[1].as_int(), rank = x.rank() + 1;
  int64_t d1 = wrap_dim(a[2].as_int(), rank), d2 = wrap_dim(a[3].as_int(), rank);
  TPU_CHECK(d1 != d2, ErrorKind::Runtime, "diagonal dimensions cannot be identical ", a[2].as_int(),
            ", ", a[3].as_int());
  int64_t n = x.shape().back() + (offset < 0 ? -offset : offset);
  Shape out;
  for (int64_t i = 0, j = 0; i < rank; ++i) out.push_back(i == d1 || i == d2 ? n : x.shape()[j++]);
  return {embed_diagonal(ctx.b, x, out, offset, d1, d2)};
}

enum class Triangle { Lower, Upper };

Value triangle(Context& ctx, const Args& a, Triangle which) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  int64_t k = a[1].as_int();
  TPU_CHECK(x.rank() >= 2, ErrorKind::Runtime, which == Triangle::Lower ? "tril" : "triu",
            ": input tensor must have at least 2 dimensions");
  hlo::TensorType it{E::I64, x.shape()};
  // col - row compared with the diagonal offset
  Value offset = b.sub(b.iota(it, x.rank() - 1), b.iota(it, x.rank() - 2));
  Value diag = b.broadcast_in_dim(b.constant_int(k, E::I64), x.shape(), {});
  Value keep = b.compare(offset, diag, which == Triangle::Lower ? Compare::LE : Compare::GE);
  return b.select(keep, x, b.zeros(x.dtype(), x.shape()));
}

std::vector<Value> lower_tril(Context& ctx, const Args& a) { return {triangle(ctx, a, Triangle::Lower)}; }
std::vector<Value> lower_triu(Context& ctx, const Args& a) { return {triangle(ctx, a, Triangle::Upper)}; }

}  // namespace

TPU_LOWERING("aten::cat", lower_cat);
TPU_LOWERING("aten::constant_pad_nd", lower_constant_pad_nd);
TPU_LOWERING("aten::diag_embed", lower_diag_embed);
TPU_LOWERING("aten::diagonal_backward", lower_diagonal_backward);
TPU_LOWERING("aten::diagonal_copy", lower_diagonal_copy);
TPU_LOWERING("aten::flip", lower_flip);
TPU_LOWERING("aten::narrow_copy", lower_narrow_copy);
TPU_LOWERING("aten::repeat", lower_repeat);
TPU_LOWERING("aten::roll", lower_roll);
TPU_LOWERING("aten::stack", lower_stack);
TPU_LOWERING("aten::tril", lower_tril);
TPU_LOWERING("aten::triu", lower_triu);

}  // namespace torch_tpu::lowering
