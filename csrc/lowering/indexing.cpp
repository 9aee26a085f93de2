// Reads and writes at computed positions: index_select, embedding, gather,
// advanced indexing (index.Tensor) and their scatter duals (index_add,
// embedding_dense_backward, scatter*, index_put).
//
// Index values are data, so PyTorch's out-of-range errors cannot be raised
// here. Reads follow stablehlo.gather, which clamps each index into range;
// writes follow stablehlo.scatter, which drops updates whose index is out of
// range. Negative indices are wrapped only where PyTorch allows them
// (advanced indexing).
#include <algorithm>

#include "lowering/common.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

using hlo::Builder;
using hlo::Compare;
using E = ElementType;
using Dims = std::vector<int64_t>;

Dims range(int64_t from, int64_t to) {
  Dims d;
  for (int64_t i = from; i < to; ++i) d.push_back(i);
  return d;
}

bool is_index_type(E t) { return t == E::I64 || t == E::I32; }

// A gather whose result is empty never reads the operand, and slices of an
// empty operand dim cannot be described, so empty results skip the op.
Value gather_or_empty(Builder& b, Value operand, Value indices, const Builder::GatherDims& dims,
                      const Dims& slice_sizes, const Shape& result) {
  if (hlo::TensorType{operand.dtype(), result}.numel() == 0) return b.zeros(operand.dtype(), result);
  return b.gather(operand, indices, dims, slice_sizes, result);
}

// Every index into an empty dimension is out of range, whatever its value:
// a shape check, raised when the program is built (the CPU raises too).
void check_not_empty_dim(const char* op, int64_t size, int64_t dim, int64_t indices) {
  TPU_CHECK(size > 0 || indices == 0, ErrorKind::Runtime, op,
            "(): index is out of bounds for dimension ", dim, " with size 0");
}

// ---- index_select / embedding / index_add: whole slices along one dim

Value index_vector(Builder& b, const Value& index, const char* op) {
  TPU_CHECK(index.rank() <= 1, ErrorKind::Index, op, "(): Index is supposed to be a vector");
  TPU_CHECK(is_index_type(index.dtype()), ErrorKind::Runtime, op,
            "(): Expected dtype int32 or int64 for index");
  return b.reshape(index, {index.type.numel(), 1});
}

// self[..., index[k], ...] along dim, the selected dim keeping its place.
Value take_along(Builder& b, Value self, int64_t dim, Value idx) {
  Shape result = self.shape();
  result[dim] = idx.shape()[0];
  Dims slice = self.shape();
  slice[dim] = 1;
  Builder::GatherDims g;
  for (int64_t d = 0; d < self.rank(); ++d)
    if (d != dim) g.offset_dims.push_back(d);
  g.collapsed_slice_dims = {dim};
  g.start_index_map = {dim};
  g.index_vector_dim = 1;
  return gather_or_empty(b, self, idx, g, slice, result);
}

std::vector<Value> lower_index_select(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value self = a[0].as_tensor();
  int64_t dim = wrap_dim(a[1].as_int(), self.rank());
  Value idx = index_vector(b, a[2].as_tensor(), "index_select");
  TPU_CHECK(self.rank() == 0 || self.shape()[dim] > 0 || idx.shape()[0] == 0, ErrorKind::Runtime,
            "index_select(): self indexing axis dim should be positive");
  if (self.rank() == 0) {
    Value r = take_along(b, b.reshape(self, {1}), 0, idx);
    return {r.type.numel() == 1 ? b.reshape(r, {}) : r};
  }
  return {take_along(b, self, dim, idx)};
}

std::vector<Value> lower_embedding(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value weight = a[0].as_tensor(), indices = a[1].as_tensor();
  TPU_CHECK(weight.rank() == 2, ErrorKind::Runtime, "'weight' must be 2-D");
  TPU_CHECK(is_index_type(indices.dtype()), ErrorKind::Runtime,
            "Expected tensor for argument #1 'indices' to have one of the following scalar types: "
            "Long, Int; but got ",
            scalar_type_name(indices.dtype()), " instead (while checking arguments for embedding)");
  // The CPU's embedding is an index_select of the rows.
  TPU_CHECK(weight.shape()[0] > 0 || indices.type.numel() == 0, ErrorKind::Runtime,
            "index_select(): self indexing axis dim should be positive");
  Shape ishape = indices.shape();
  Shape idx_shape = ishape;
  idx_shape.push_back(1);
  Shape result = ishape;
  result.push_back(weight.shape()[1]);
  Builder::GatherDims g;
  g.offset_dims = {indices.rank()};
  g.collapsed_slice_dims = {0};
  g.start_index_map = {0};
  g.index_vector_dim = indices.rank();
  return {gather_or_empty(b, weight, b.reshape(indices, idx_shape), g, {1, weight.shape()[1]},
                          result)};
}

Value scatter_by(Builder& b, Value operand, Value indices, Value updates,
                 const Builder::ScatterDims& dims, bool add) {
  if (updates.type.numel() == 0) return operand;
  return b.scatter(operand, indices, updates, dims, [add](Builder& r, const std::vector<Value>& x) {
    return std::vector<Value>{add ? r.add(x[0], x[1]) : x[1]};
  });
}

// Rows of `rows` ([n, ...]) summed into `num` rows at positions idx ([n, 1]).
Value add_rows(Builder& b, Value rows, Value idx, int64_t num) {
  Shape out = rows.shape();
  out[0] = num;
  Builder::ScatterDims s;
  s.update_window_dims = range(1, rows.rank());
  s.inserted_window_dims = {0};
  s.scatter_dims_to_operand_dims = {0};
  s.index_vector_dim = 1;
  return scatter_by(b, b.zeros(rows.dtype(), out), idx, rows, s, true);
}

std::vector<Value> lower_embedding_dense_backward(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value grad = a[0].as_tensor(), indices = a[1].as_tensor();
  int64_t num = a[2].as_int(), padding_idx = a[3].as_int();
  bool by_freq = a[4].as_bool();
  int64_t n = indices.type.numel();
  int64_t width = grad.type.numel() / std::max<int64_t>(n, 1);
  if (n == 0) width = grad.rank() ? grad.shape().back() : 1;
  // Half-precision gradients are summed in f32 so repeated rows add up
  // without intermediate rounding.
  E acc = grad.dtype() == E::F16 || grad.dtype() == E::BF16 ? E::F32 : grad.dtype();
  Value rows = cast(b, b.reshape(grad, {n, width}), acc);
  Value idx = b.reshape(cast(b, indices, E::I64), {n, 1});
  Value flat_idx = b.reshape(idx, {n});
  Value keep = b.compare(flat_idx, b.broadcast_in_dim(b.constant_int(padding_idx, E::I64), {n}, {}),
                         Compare::NE);
  rows = keep_rows(b, keep, rows);
  if (by_freq) {
    Value counts = add_rows(b, b.full(1, acc, {n}), idx, num);
    Builder::GatherDims g;
    g.collapsed_slice_dims = {0};
    g.start_index_map = {0};
    g.index_vector_dim = 1;
    Value per = gather_or_empty(b, counts, idx, g, {1}, {n});
    rows = b.div(rows, b.broadcast_in_dim(per, {n, width}, {0}));
  }
  return {cast(b, add_rows(b, rows, idx, num), grad.dtype())};
}

// Negative positions count from the end (for the ops that allow them).
Value wrap_negative(Builder& b, Value idx, int64_t size) {
  Value i = cast(b, idx, E::I64);
  Value zero = b.zeros(E::I64, i.shape());
  Value wrapped = b.add(i, b.full(double(size), E::I64, i.shape()));
  return b.select(b.compare(i, zero, Compare::LT), wrapped, i);
}

// embedding_renorm(self, indices, max_norm, norm_type), the functional form of
// what F.embedding(max_norm=...) calls before its lookup: each row of self named
// in indices whose norm exceeds max_norm is scaled by max_norm / (norm + 1e-7),
// the norm rounded to self's type first, as the CPU's row.norm() is. Negative
// positions count from the end, as the CPU's self[i] does; the CPU rejects
// the others outside the table, and so does aten/value_checks.cpp first.
std::vector<Value> lower_embedding_renorm(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value w = a[0].as_tensor(), indices = a[1].as_tensor();
  double max_norm = a[2].as_float(), norm_type = a[3].as_float();
  TPU_CHECK(w.rank() == 2, ErrorKind::Runtime, "Expected 2-dimensional tensor, but got ", w.rank(),
            "-dimensional tensor for argument #1 'self' (while checking arguments for embedding_renorm_)");
  TPU_CHECK(is_index_type(indices.dtype()), ErrorKind::Runtime,
            "Expected tensor for argument #2 'indices' to have one of the following scalar types: Long, Int; "
            "but got torch.", scalar_type_name(indices.dtype()),
            "Tensor instead (while checking arguments for embedding_renorm_)");
  E t = w.dtype();
  TPU_CHECK(hlo::is_float(t) || hlo::is_complex(t), ErrorKind::Runtime,
            "norm(): input dtype should be either floating point or complex. Got ", scalar_type_name(t), " instead.");
  int64_t rows = w.shape()[0], k = indices.type.numel();
  Arg row_dim;
  row_dim.kind = Arg::Kind::Int;
  row_dim.i = 1;
  Value norm = vector_norm(ctx, w, norm_type, row_dim, false, std::nullopt);
  E op = opmath(norm.dtype());
  norm = cast(b, norm, op);
  Value named = b.zeros(op, {rows});
  if (k > 0) named = add_rows(b, b.full(1, op, {k}), b.reshape(wrap_negative(b, indices, rows), {k, 1}), rows);
  Value limit = b.full(max_norm, op, {rows});
  Value shrink = b.and_(b.compare(named, b.zeros(op, {rows}), Compare::GT), b.compare(norm, limit, Compare::GT));
  Value scale = b.div(limit, b.add(norm, b.full(1e-7, op, {rows})));
  Shape s = w.shape();
  Value scaled = cast(b, b.mul(cast(b, w, opmath(t)), cast(b, b.broadcast_in_dim(scale, s, {0}), opmath(t))), t);
  return {b.select(b.broadcast_in_dim(shrink, s, {0}), scaled, w)};
}

// index_add / index_copy: whole slices of source written along dim at the
// positions in index, added (scaled by alpha) or replacing what is there.
Value write_slices(Context& ctx, const Args& a, bool add) {
  Builder& b = ctx.b;
  Value self = a[0].as_tensor(), source = a[3].as_tensor();
  const char* op = add ? "index_add" : "index_copy";
  if (add)
    TPU_CHECK(self.dtype() == source.dtype(), ErrorKind::Runtime, "index_add_(): self (",
              scalar_type_name(self.dtype()), ") and source (", scalar_type_name(source.dtype()),
              ") must have the same scalar type");
  else
    TPU_CHECK(self.dtype() == source.dtype(), ErrorKind::Runtime,
              "index_copy_(): self and source expected to have the same dtype, but got (self) ",
              scalar_type_name(self.dtype()), " and (source) ", scalar_type_name(source.dtype()));
  int64_t dim = wrap_dim(a[1].as_int(), self.rank());
  Value idx = index_vector(b, a[2].as_tensor(), op);
  // index_add into an empty dimension is a no-op on the CPU.
  if (!add && self.rank() > 0) check_not_empty_dim("index_copy_", self.shape()[dim], dim, idx.shape()[0]);
  Shape shape = self.shape();
  bool scalar = self.rank() == 0;
  if (scalar) {
    self = b.reshape(self, {1});
    source = b.reshape(source, {source.type.numel()});
  }
  Shape expect = self.shape();
  expect[dim] = idx.shape()[0];
  // A 0-dim source stands for a 1-element slice.
  if (source.rank() == 0 && hlo::TensorType{E::F32, expect}.numel() == 1)
    source = b.reshape(source, expect);
  TPU_CHECK(source.shape() == expect, ErrorKind::Runtime, op, "_(): source shape ",
            hlo::shape_str(source.shape()), " does not match self ", hlo::shape_str(shape),
            " with ", idx.shape()[0], " indices along dim ", dim);
  if (add) source = b.mul(source, broadcast_to(b, ctx.number(a[4], self.dtype()), expect));
  Builder::ScatterDims s;
  for (int64_t d = 0; d < self.rank(); ++d)
    if (d != dim) s.update_window_dims.push_back(d);
  s.inserted_window_dims = {dim};
  s.scatter_dims_to_operand_dims = {dim};
  s.index_vector_dim = 1;
  Value r = scatter_by(b, self, idx, source, s, add);
  return scalar ? b.reshape(r, {}) : r;
}

std::vector<Value> lower_index_add(Context& ctx, const Args& a) { return {write_slices(ctx, a, true)}; }
std::vector<Value> lower_index_copy(Context& ctx, const Args& a) {
  return {write_slices(ctx, a, false)};
}

// index_fill: the slices along dim at index (negatives wrap) set to a scalar.
std::vector<Value> lower_index_fill(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value self = a[0].as_tensor(), index = a[2].as_tensor();
  int64_t dim = wrap_dim(a[1].as_int(), self.rank());
  TPU_CHECK(index.rank() <= 1, ErrorKind::Runtime, "Index has to be a vector/scalar");
  TPU_CHECK(is_index_type(index.dtype()), ErrorKind::Index,
            "index_fill_(): Expected dtype int64 for index.");
  Value value;
  if (a[3].kind == Arg::Kind::Tensor) {
    const Value& v = a[3].as_tensor();
    TPU_CHECK(v.rank() == 0, ErrorKind::Runtime,
              "index_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              v.rank(), " dimension(s).");
    value = cast(b, v, self.dtype());
  } else {
    value = ctx.number(a[3], self.dtype());
  }
  int64_t n = self.rank() ? self.shape()[dim] : 1;
  int64_t k = index.type.numel();
  check_not_empty_dim("index_fill_", n, dim, k);
  Value idx = b.reshape(wrap_negative(b, index, n), {k, 1});
  Builder::ScatterDims s;
  s.inserted_window_dims = {0};
  s.scatter_dims_to_operand_dims = {0};
  s.index_vector_dim = 1;
  Value hit = scatter_by(b, b.full(0, E::Bool, {n}), idx, b.full(1, E::Bool, {k}), s, false);
  Value mask = self.rank() ? b.broadcast_in_dim(hit, self.shape(), {dim}) : b.reshape(hit, {});
  return {b.select(mask, broadcast_to(b, value, self.shape()), self)};
}

// take / put address self as if flattened; negative positions wrap.
std::vector<Value> lower_take(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value self = a[0].as_tensor(), index = a[1].as_tensor();
  TPU_CHECK(hlo::is_integral(index.dtype()), ErrorKind::Index,
            "take(): Expected a long tensor for index, but got ", scalar_type_name(index.dtype()));
  int64_t n = self.type.numel();
  TPU_CHECK(n > 0 || index.type.numel() == 0, ErrorKind::Index,
            "take(): tried to take from an empty tensor");
  Shape one = index.shape();
  one.push_back(1);
  Builder::GatherDims g;
  g.collapsed_slice_dims = {0};
  g.start_index_map = {0};
  g.index_vector_dim = index.rank();
  return {gather_or_empty(b, b.reshape(self, {n}), b.reshape(wrap_negative(b, index, n), one), g, {1},
                          index.shape())};
}

std::vector<Value> lower_put(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value self = a[0].as_tensor(), index = a[1].as_tensor(), source = a[2].as_tensor();
  bool accumulate = a[3].as_bool();
  int64_t n = self.type.numel(), k = index.type.numel();
  TPU_CHECK(n > 0 || k == 0, ErrorKind::Index, "put_(): Tried to put elements into an empty tensor");
  TPU_CHECK(source.type.numel() == k, ErrorKind::Runtime,
            "put_(): Expected source and index to have the same number of elements, but got "
            "source.numel() = ",
            source.type.numel(), ", index.numel() = ", k);
  TPU_CHECK(source.dtype() == self.dtype(), ErrorKind::Runtime,
            "put_(): self and source expected to have the same dtype, but got self.dtype = ",
            scalar_type_name(self.dtype()), " and source.dtype = ", scalar_type_name(source.dtype()),
            ".");
  Builder::ScatterDims s;
  s.inserted_window_dims = {0};
  s.scatter_dims_to_operand_dims = {0};
  s.index_vector_dim = 1;
  Value r = scatter_by(b, b.reshape(self, {n}), b.reshape(wrap_negative(b, index, n), {k, 1}),
                       b.reshape(source, {k}), s, accumulate);
  return {b.reshape(r, self.shape())};
}

// ---- gather / scatter: one index per element

// Full coordinates for every element of `index`: index itself along `dim`,
// the element's own position along the others. Shape index.shape + [rank].
Value coordinates(Builder& b, Value index, int64_t dim) {
  int64_t rank = index.rank();
  Shape one = index.shape();
  one.push_back(1);
  std::vector<Value> parts;
  for (int64_t d = 0; d < rank; ++d) {
    Value c = d == dim ? cast(b, index, E::I64) : b.iota(hlo::TensorType{E::I64, index.shape()}, d);
    parts.push_back(b.reshape(c, one));
  }
  return b.concatenate(parts, rank);
}

Builder::GatherDims pointwise_gather(int64_t rank) {
  Builder::GatherDims g;
  g.collapsed_slice_dims = range(0, rank);
  g.start_index_map = range(0, rank);
  g.index_vector_dim = rank;
  return g;
}

Builder::ScatterDims pointwise_scatter(int64_t rank) {
  Builder::ScatterDims s;
  s.inserted_window_dims = range(0, rank);
  s.scatter_dims_to_operand_dims = range(0, rank);
  s.index_vector_dim = rank;
  return s;
}

void check_gather_shapes(const char* op, const Value& self, const Value& index, int64_t dim,
                         const Value* src) {
  TPU_CHECK(is_index_type(index.dtype()), ErrorKind::Runtime, op,
            "(): Expected dtype int32/int64 for index");
  int64_t r = std::max<int64_t>(self.rank(), 1);
  TPU_CHECK(std::max<int64_t>(index.rank(), 1) == r, ErrorKind::Runtime,
            "Index tensor must have the same number of dimensions as ",
            src ? "self tensor" : "input tensor");
  if (index.rank() == 0 || self.rank() == 0) return;
  for (int64_t d = 0; d < r; ++d) {
    if (d != dim)
      TPU_CHECK(index.shape()[d] <= self.shape()[d], ErrorKind::Runtime,
                "Size does not match at dimension ", d, " expected index ",
                hlo::shape_str(index.shape()), " to be no larger than self ",
                hlo::shape_str(self.shape()), " apart from dimension ", dim);
    if (src)
      TPU_CHECK(index.shape()[d] <= src->shape()[d], ErrorKind::Runtime,
                "Expected index ", hlo::shape_str(index.shape()),
                " to be no larger than src ", hlo::shape_str(src->shape()));
  }
}

// Rank-0 operands take part as 1-element vectors.
Value as_vector(Builder& b, Value v) { return v.rank() == 0 ? b.reshape(v, {1}) : v; }

std::vector<Value> lower_gather(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value self = a[0].as_tensor(), index = a[2].as_tensor();
  int64_t dim = wrap_dim(a[1].as_int(), self.rank());
  // The CPU returns at once for an empty index, before checking its dtype
  // (uint8 is fine) or shape.
  if (index.type.numel() == 0) return {b.zeros(self.dtype(), index.shape())};
  check_gather_shapes("gather", self, index, dim, nullptr);
  if (self.rank() > 0) check_not_empty_dim("gather", self.shape()[dim], dim, index.type.numel());
  Shape out = index.shape();
  Value s = as_vector(b, self), i = as_vector(b, index);
  Value r = gather_or_empty(b, s, coordinates(b, i, dim), pointwise_gather(s.rank()),
                            Dims(s.rank(), 1), i.shape());
  return {b.reshape(r, out)};
}

enum class ScatterOp { Replace, Add, Mul, Max, Min, Mean };

ScatterOp scatter_op(const std::string& name, bool legacy) {
  if (legacy) {
    if (name == "add") return ScatterOp::Add;
    if (name == "multiply") return ScatterOp::Mul;
    fail(ErrorKind::Runtime, "reduce argument must be either add or multiply.");
  }
  if (name == "sum") return ScatterOp::Add;
  if (name == "prod") return ScatterOp::Mul;
  if (name == "amax") return ScatterOp::Max;
  if (name == "amin") return ScatterOp::Min;
  if (name == "mean") return ScatterOp::Mean;
  fail(ErrorKind::Runtime, "reduce argument must be either sum, prod, mean, amax or amin, got ",
       name);
}

Value combine(Builder& b, ScatterOp op, Value cur, Value upd) {
  switch (op) {
    case ScatterOp::Replace: return upd;
    case ScatterOp::Add:
    case ScatterOp::Mean: return b.add(cur, upd);
    case ScatterOp::Mul: return b.mul(cur, upd);
    case ScatterOp::Max: return b.max(cur, upd);
    case ScatterOp::Min: return b.min(cur, upd);
  }
  return upd;
}

Value scatter_with(Builder& b, ScatterOp op, Value operand, Value coords, Value updates) {
  if (updates.type.numel() == 0) return operand;
  return b.scatter(operand, coords, updates, pointwise_scatter(operand.rank()),
                   [op](Builder& r, const std::vector<Value>& x) {
                     return std::vector<Value>{combine(r, op, x[0], x[1])};
                   });
}

// scatter(self, dim, index, src-or-value) with a combining op. include_self
// false starts every written position from the op's identity instead.
Value scatter_elements(Context& ctx, const Args& a, ScatterOp op, bool include_self) {
  Builder& b = ctx.b;
  Value self = a[0].as_tensor(), index = a[2].as_tensor();
  int64_t dim = wrap_dim(a[1].as_int(), self.rank());
  // An empty index leaves self as it is, unchecked, as on the CPU.
  if (index.type.numel() == 0) return self;
  const Arg& src_arg = a[3];
  Value src;
  if (src_arg.kind == Arg::Kind::Tensor) {
    src = src_arg.as_tensor();
    TPU_CHECK(src.dtype() == self.dtype(), ErrorKind::Runtime,
              "scatter(): Expected self.dtype to be equal to src.dtype");
    check_gather_shapes("scatter", self, index, dim, &src);
  } else {
    check_gather_shapes("scatter", self, index, dim, nullptr);
    src = broadcast_to(b, ctx.number(src_arg, self.dtype()), index.shape());
  }
  if (self.rank() > 0) check_not_empty_dim("scatter", self.shape()[dim], dim, index.type.numel());
  Shape shape = self.shape();
  Value s = as_vector(b, self), i = as_vector(b, index), u = as_vector(b, src);
  if (u.shape() != i.shape()) u = b.slice(u, Dims(u.rank(), 0), i.shape(), Dims(u.rank(), 1));
  Value coords = coordinates(b, i, dim);
  E t = s.dtype();

  Value written;  // positions some update lands on
  if (!include_self || op == ScatterOp::Mean)
    written = scatter_with(b, ScatterOp::Replace, b.full(0, E::Bool, s.shape()), coords,
                           b.full(1, E::Bool, i.shape()));
  Value base = s;
  if (!include_self) {
    Value id;
    switch (op) {
      case ScatterOp::Mul: id = b.full(1, t, s.shape()); break;
      case ScatterOp::Max: id = broadcast_to(b, b.min_value(t), s.shape()); break;
      case ScatterOp::Min: id = broadcast_to(b, b.max_value(t), s.shape()); break;
      default: id = b.zeros(t, s.shape()); break;
    }
    base = b.select(written, id, s);
  }
  Value r = scatter_with(b, op, base, coords, u);
  if (op == ScatterOp::Mean) {
    Value counts = scatter_with(b, ScatterOp::Add, b.full(include_self ? 1 : 0, t, s.shape()),
                                coords, b.full(1, t, i.shape()));
    // Positions nothing landed on keep their value (count 0 divides by 1).
    Value one = b.full(1, t, s.shape());
    counts = b.select(b.compare(counts, b.zeros(t, s.shape()), Compare::EQ), one, counts);
    if (hlo::is_float(t) || hlo::is_complex(t)) {
      r = b.div(r, counts);
    } else {
      // PyTorch floors integer means.
      Value q = b.div(r, counts);
      Value inexact = b.compare(b.mul(q, counts), r, Compare::NE);
      Value negative = b.compare(r, b.zeros(t, s.shape()), Compare::LT);
      r = b.select(b.and_(inexact, negative), b.sub(q, one), q);
    }
  }
  return b.reshape(r, shape);
}

std::vector<Value> lower_scatter(Context& ctx, const Args& a) {
  return {scatter_elements(ctx, a, ScatterOp::Replace, true)};
}
std::vector<Value> lower_scatter_add(Context& ctx, const Args& a) {
  return {scatter_elements(ctx, a, ScatterOp::Add, true)};
}
std::vector<Value> lower_scatter_legacy_reduce(Context& ctx, const Args& a) {
  return {scatter_elements(ctx, a, scatter_op(a[4].s, true), true)};
}
std::vector<Value> lower_scatter_reduce(Context& ctx, const Args& a) {
  return {scatter_elements(ctx, a, scatter_op(a[4].s, false), a[5].as_bool())};
}

// index_reduce(self, dim, index, source, reduce, include_self): scatter_reduce
// along dim with the 1-D index laid over source's other dims.
std::vector<Value> lower_index_reduce(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  const std::string& name = a[4].s;
  TPU_CHECK(name == "prod" || name == "mean" || name == "amax" || name == "amin", ErrorKind::Runtime,
            "index_reduce(): Expected reduce to be one of prod, mean, amax or amin but got ", name,
            ".");
  Value self = a[0].as_tensor(), index = a[2].as_tensor(), src = a[3].as_tensor();
  int64_t dim = wrap_dim(a[1].as_int(), self.rank());
  TPU_CHECK(index.rank() <= 1, ErrorKind::Index, "index_reduce_(): Index is supposed to be a vector");
  TPU_CHECK(is_index_type(index.dtype()), ErrorKind::Index,
            "index_reduce_(): Expected dtype int32/int64 for index but got: ",
            scalar_type_name(index.dtype()));
  TPU_CHECK(src.dtype() == self.dtype(), ErrorKind::Runtime,
            "index_reduce_(): self (", scalar_type_name(self.dtype()), ") and source (",
            scalar_type_name(src.dtype()), ") must have the same scalar type");
  TPU_CHECK(src.rank() == self.rank() || (src.rank() <= 1 && self.rank() <= 1), ErrorKind::Index,
            "index_reduce_(): Source/destination tensor must have same slice shapes.");
  int64_t n = index.type.numel();
  TPU_CHECK((src.rank() == 0 ? 1 : src.shape()[dim]) == n, ErrorKind::Index,
            "index_reduce_(): Number of indices (", n, ") should be equal to source.size(dim) (",
            src.rank() == 0 ? 1 : src.shape()[dim], ")");
  // The CPU raises for an index outside [0, size); here its update is dropped.
  Value idx = cast(b, b.reshape(index, {n}), E::I64);
  Args args = a;
  args[2].tensor = src.rank() == 0 ? b.reshape(idx, {}) : b.broadcast_in_dim(idx, src.shape(), {dim});
  return {scatter_elements(ctx, args, scatter_op(name, false), a[5].as_bool())};
}

// ---- advanced indexing: self[i0, i1, ...] with a list of optional index tensors

struct Advanced {
  Value operand;         // self with the indexed dims moved to the front
  Value coords;          // batch + [k], int64, negatives wrapped
  Shape batch;           // the broadcast shape of the index tensors
  Shape rest;            // sizes of the dims that are not indexed, in order
  Dims perm;             // self dims in operand order
  int64_t k = 0;         // number of indexed dims
  // PyTorch puts the batch dims where the indexed dims were when those are
  // adjacent, and first otherwise.
  int64_t batch_at = 0;
};

Shape broadcast_index_shapes(const std::vector<Value>& idx) {
  Shape out;
  for (const auto& v : idx) {
    const Shape& s = v.shape();
    size_t n = std::max(out.size(), s.size());
    Shape r(n);
    bool ok = true;
    for (size_t i = 0; i < n; ++i) {
      int64_t x = i < n - out.size() ? 1 : out[i - (n - out.size())];
      int64_t y = i < n - s.size() ? 1 : s[i - (n - s.size())];
      ok = ok && (x == y || x == 1 || y == 1);
      r[i] = x == 1 ? y : x;
    }
    if (!ok) {
      std::string shapes;
      for (size_t j = 0; j < idx.size(); ++j)
        shapes += (j ? ", " : "") + hlo::shape_str(idx[j].shape());
      fail(ErrorKind::Index, "shape mismatch: indexing tensors could not be broadcast together with shapes ",
           shapes);
    }
    out = r;
  }
  return out;
}

Advanced advanced(Builder& b, Value self, const std::vector<std::optional<Value>>& list) {
  TPU_CHECK(static_cast<int64_t>(list.size()) <= self.rank(), ErrorKind::Index, "too many indices for tensor of dimension ", self.rank(), " (got ",
            list.size(), ")");
  Advanced adv;
  Dims indexed;
  std::vector<Value> idx;
  for (size_t d = 0; d < list.size(); ++d) {
    if (!list[d]) continue;
    E t = list[d]->dtype();
    TPU_CHECK(t != E::Bool && t != E::U8, ErrorKind::NotImplemented,
              "indexing with a boolean mask has a data-dependent shape, which the tpu backend "
              "cannot compile; index with mask.nonzero() instead");
    TPU_CHECK(hlo::is_integral(t), ErrorKind::Index,
              "tensors used as indices must be long, int, byte or bool tensors");
    indexed.push_back(static_cast<int64_t>(d));
    idx.push_back(*list[d]);
  }
  adv.k = static_cast<int64_t>(indexed.size());
  adv.batch = broadcast_index_shapes(idx);
  bool adjacent = adv.k == 0 || indexed.back() - indexed.front() + 1 == adv.k;
  adv.batch_at = adjacent && adv.k ? indexed.front() : 0;

  adv.perm = indexed;
  for (int64_t d = 0; d < self.rank(); ++d)
    if (std::find(indexed.begin(), indexed.end(), d) == indexed.end()) {
      adv.perm.push_back(d);
      adv.rest.push_back(self.shape()[d]);
    }
  adv.operand = adv.k ? b.transpose(self, adv.perm) : self;

  int64_t nb = static_cast<int64_t>(adv.batch.size());
  int64_t batch_numel = hlo::TensorType{E::I64, adv.batch}.numel();
  Shape one = adv.batch;
  one.push_back(1);
  std::vector<Value> parts;
  for (int64_t j = 0; j < adv.k; ++j) {
    int64_t size = self.shape()[indexed[j]];
    TPU_CHECK(size > 0 || batch_numel == 0, ErrorKind::Index, "index 0 is out of bounds for dimension ",
              indexed[j], " with size 0");
    Value v = wrap_negative(b, broadcast_to(b, idx[j], adv.batch), size);
    parts.push_back(b.reshape(v, one));
  }
  if (adv.k) adv.coords = parts.size() == 1 ? parts[0] : b.concatenate(parts, nb);
  return adv;
}

// The gather layout is batch + rest; PyTorch's puts batch at batch_at.
Dims pytorch_order(const Advanced& adv) {
  int64_t nb = static_cast<int64_t>(adv.batch.size()), nr = static_cast<int64_t>(adv.rest.size());
  Dims order;
  for (int64_t i = 0; i < adv.batch_at; ++i) order.push_back(nb + i);
  for (int64_t i = 0; i < nb; ++i) order.push_back(i);
  for (int64_t i = adv.batch_at; i < nr; ++i) order.push_back(nb + i);
  return order;
}

Dims inverse(const Dims& p) {
  Dims inv(p.size());
  for (size_t i = 0; i < p.size(); ++i) inv[p[i]] = static_cast<int64_t>(i);
  return inv;
}

bool is_identity(const Dims& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

Value permute(Builder& b, Value v, const Dims& p) { return is_identity(p) ? v : b.transpose(v, p); }

std::vector<Value> lower_index(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value self = a[0].as_tensor();
  Advanced adv = advanced(b, self, a[1].tensors);
  if (adv.k == 0) return {self};
  int64_t nb = static_cast<int64_t>(adv.batch.size()), nr = static_cast<int64_t>(adv.rest.size());
  Shape result = adv.batch;
  result.insert(result.end(), adv.rest.begin(), adv.rest.end());
  Dims slice(adv.k, 1);
  slice.insert(slice.end(), adv.rest.begin(), adv.rest.end());
  Builder::GatherDims g;
  g.offset_dims = range(nb, nb + nr);
  g.collapsed_slice_dims = range(0, adv.k);
  g.start_index_map = range(0, adv.k);
  g.index_vector_dim = nb;
  Value r = gather_or_empty(b, adv.operand, adv.coords, g, slice, result);
  return {permute(b, r, pytorch_order(adv))};
}

std::vector<Value> lower_index_put(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value self = a[0].as_tensor(), values = a[2].as_tensor();
  bool accumulate = a[3].as_bool();
  TPU_CHECK(values.dtype() == self.dtype(), ErrorKind::Runtime,
            "Index put requires the source and destination dtypes match, got ",
            scalar_type_name(self.dtype()), " for the destination and ", scalar_type_name(values.dtype()),
            " for the source.");
  Advanced adv = advanced(b, self, a[1].tensors);
  if (adv.k == 0) return {accumulate ? b.add(self, broadcast_to(b, values, self.shape()))
                                     : broadcast_to(b, values, self.shape())};
  int64_t nb = static_cast<int64_t>(adv.batch.size()), nr = static_cast<int64_t>(adv.rest.size());
  // values broadcast against the shape self[indices] has in PyTorch, then
  // laid out as batch + rest for the scatter.
  Dims order = pytorch_order(adv);
  Shape gathered = adv.batch;
  gathered.insert(gathered.end(), adv.rest.begin(), adv.rest.end());
  Shape indexed_shape;
  for (int64_t d : order) indexed_shape.push_back(gathered[d]);
  Value updates = permute(b, broadcast_to(b, values, indexed_shape), inverse(order));
  if (updates.type.numel() == 0) return {self};
  Builder::ScatterDims s;
  s.update_window_dims = range(nb, nb + nr);
  s.inserted_window_dims = range(0, adv.k);
  s.scatter_dims_to_operand_dims = range(0, adv.k);
  s.index_vector_dim = nb;
  Value r = b.scatter(adv.operand, adv.coords, updates, s,
                      [accumulate](Builder& rb, const std::vector<Value>& x) {
                        return std::vector<Value>{accumulate ? rb.add(x[0], x[1]) : x[1]};
                      });
  return {permute(b, r, inverse(adv.perm))};
}

}  // namespace

TPU_LOWERING("aten::_index_put_impl", lower_index_put);
TPU_LOWERING("aten::embedding", lower_embedding);
TPU_LOWERING("aten::embedding_dense_backward", lower_embedding_dense_backward);
TPU_LOWERING("aten::embedding_renorm", lower_embedding_renorm);
TPU_LOWERING("aten::gather", lower_gather);
TPU_LOWERING("aten::index.Tensor", lower_index);
TPU_LOWERING("aten::index_add", lower_index_add);
TPU_LOWERING("aten::index_copy", lower_index_copy);
TPU_LOWERING("aten::index_fill.int_Scalar", lower_index_fill);
TPU_LOWERING("aten::index_fill.int_Tensor", lower_index_fill);
TPU_LOWERING("aten::index_put", lower_index_put);
TPU_LOWERING("aten::index_reduce", lower_index_reduce);
TPU_LOWERING("aten::index_select", lower_index_select);
TPU_LOWERING("aten::put", lower_put);
TPU_LOWERING("aten::scatter.reduce", lower_scatter_legacy_reduce);
TPU_LOWERING("aten::scatter.src", lower_scatter);
TPU_LOWERING("aten::scatter.value", lower_scatter);
TPU_LOWERING("aten::scatter.value_reduce", lower_scatter_legacy_reduce);
TPU_LOWERING("aten::scatter_add", lower_scatter_add);
TPU_LOWERING("aten::scatter_reduce.two", lower_scatter_reduce);
TPU_LOWERING("aten::take", lower_take);

}  // namespace torch_tpu::lowering
