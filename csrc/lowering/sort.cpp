// Sorting and order statistics: sort, topk, kthvalue, median, nanmedian,
// mode. Each is one stable stablehlo.sort of (values, original indices)
// followed by slices or picks. PyTorch orders NaN above every number, and a
// stable sort keeps equal values in index order, which is what the CPU's
// kernels produce wherever their tie order is defined: sort(stable=True) in
// both directions, and sort(stable=False) on rows of up to 16 elements
// (insertion sort). Longer rows of sort(stable=False), topk and kthvalue
// order ties by std::sort / partial_sort / nth_element: deterministic, but
// an accident of libstdc++'s introsort, so only their values (and indices
// that point at those values) are comparable with the CPU.
#include <cmath>

#include "lowering/common.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

using hlo::Builder;
using hlo::Compare;
using hlo::TensorType;
using E = ElementType;
using Values = std::vector<Value>;

// x before y in ascending order, NaN last.
Value before(Builder& b, Value x, Value y) {
  Value lt = b.compare(x, y, Compare::LT);
  if (!hlo::is_float(x.dtype())) return lt;
  return b.or_(lt, b.and_(b.not_(is_nan(b, x)), is_nan(b, y)));
}

void check_sortable(const Value& x) {
  TPU_CHECK(!hlo::is_complex(x.dtype()), ErrorKind::Runtime, "Sort does not support complex dtypes on CPU");
}

// PyTorch treats a rank-0 tensor as one element along dim 0 (or -1).
struct Lane {
  bool scalar = false;
  int64_t dim = 0;
  Value view(Builder& b, Value v) const { return scalar ? b.reshape(v, {1}) : v; }
};

Lane lane(const Value& x, int64_t dim) {
  return Lane{x.rank() == 0, wrap_dim(dim, x.rank())};
}

struct Sorted {
  Value values, indices;  // int64 positions in the input
};

// Stable sort along dim; ties keep index order in both directions, as the
// CPU's stable sort does.
Sorted sort_along(Builder& b, Value x, int64_t dim, bool descending) {
  Value idx = b.iota(TensorType{E::I64, x.shape()}, dim);
  auto outs = b.sort({x, idx}, dim, true, [descending](Builder& r, const Values& a) {
    return Values{descending ? before(r, a[1], a[0]) : before(r, a[0], a[1])};
  });
  return {outs[0], outs[1]};
}

Value take(Builder& b, Value v, int64_t dim, int64_t start, int64_t limit) {
  std::vector<int64_t> lo(v.rank(), 0), hi = v.shape(), step(v.rank(), 1);
  lo[dim] = start;
  hi[dim] = limit;
  return b.slice(v, lo, hi, step);
}

// The element at position pos[...] along dim (pos has the shape of v without
// dim). Done as a masked reduction so that it is exact for every type,
// including -0.0 and NaN.
Value pick(Builder& b, Value v, int64_t dim, Value pos) {
  Shape keep = v.shape();
  std::vector<int64_t> others;
  for (int64_t d = 0; d < v.rank(); ++d)
    if (d != dim) others.push_back(d);
  Value at = b.compare(b.iota(TensorType{E::I64, v.shape()}, dim),
                       b.broadcast_in_dim(pos, v.shape(), others), Compare::EQ);
  auto outs = b.reduce({at, v}, {b.constant_bool(false), b.constant(0, v.dtype())}, {dim},
                       [](Builder& r, const Values& a) {
                         return Values{r.or_(a[0], a[2]), r.select(a[2], a[3], a[1])};
                       });
  return outs[1];
}

// The result of a reduction along dim, keepdim or not; rank-0 inputs stay rank 0.
Value finish(Builder& b, Value r, const Value& x, int64_t dim, bool keepdim) {
  if (x.rank() == 0) return b.reshape(r, {});
  return b.reshape(r, reduced_shape(x.shape(), {dim}, keepdim));
}

Values lower_sort_stable(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  check_sortable(x);
  Lane l = lane(x, a[2].as_int());
  Sorted s = sort_along(b, l.view(b, x), l.dim, a[3].as_bool());
  return {b.reshape(s.values, x.shape()), b.reshape(s.indices, x.shape())};
}

// sort(self, dim, descending): the CPU sorts stably whatever `stable` says.
Values lower_sort(Context& ctx, const Args& a) {
  Args stable{a[0], Arg{}, a[1], a[2]};
  return lower_sort_stable(ctx, stable);
}

Values lower_topk(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  check_sortable(x);
  int64_t k = a[1].as_int();
  Lane l = lane(x, a[2].as_int());
  bool largest = a[3].as_bool();
  Value v = l.view(b, x);
  int64_t n = v.shape()[l.dim];
  TPU_CHECK(k >= 0 && k <= n, ErrorKind::Runtime, "selected index k out of range");
  // Equal values come in index order. The CPU's order among ties is an
  // accident of std::partial_sort / std::nth_element (no rule holds in
  // general); index order is what it gives for k == 1 on rows of 64+
  // elements (the partial_sort path), i.e. the first occurrence, like max.
  Sorted s = sort_along(b, v, l.dim, largest);
  Shape out = x.shape();
  if (!l.scalar) out[l.dim] = k;
  return {b.reshape(take(b, s.values, l.dim, 0, k), out),
          b.reshape(take(b, s.indices, l.dim, 0, k), out)};
}

Values lower_kthvalue(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  int64_t k = a[1].as_int();
  Lane l = lane(x, a[2].as_int());
  bool keepdim = a[3].as_bool();
  Value v = l.view(b, x);
  int64_t n = v.shape()[l.dim];
  TPU_CHECK(n > 0, ErrorKind::Index, "kthvalue(): Expected reduction dim ", l.dim, " to have non-zero size.");
  TPU_CHECK(k >= 1 && k <= n, ErrorKind::Runtime, "kthvalue(): selected number k out of range for dimension ",
            l.dim);
  Sorted s = sort_along(b, v, l.dim, false);
  return {finish(b, take(b, s.values, l.dim, k - 1, k), x, l.dim, keepdim),
          finish(b, take(b, s.indices, l.dim, k - 1, k), x, l.dim, keepdim)};
}

enum class Nan { Propagate, Ignore };

// Lower median along dim. With NaN propagation a row holding NaN yields its
// first NaN; ignoring NaN takes the lower median of the numbers (NaN when
// there are none).
Sorted median_along(Builder& b, Value v, int64_t dim, Nan nan) {
  Sorted s = sort_along(b, v, dim, false);
  int64_t n = v.shape()[dim];
  Shape row = reduced_shape(v.shape(), {dim}, false);
  if (!hlo::is_float(v.dtype())) {
    return {b.reshape(take(b, s.values, dim, (n - 1) / 2, (n - 1) / 2 + 1), row),
            b.reshape(take(b, s.indices, dim, (n - 1) / 2, (n - 1) / 2 + 1), row)};
  }
  // NaNs sort last, so the count of numbers is also the first NaN's position.
  Value numbers = b.reduce_sum(b.convert(b.not_(is_nan(b, v)), E::I64), {dim});
  Value pos;
  if (nan == Nan::Propagate) {
    Value has_nan = b.compare(numbers, b.full(double(n), E::I64, row), Compare::LT);
    pos = b.select(has_nan, numbers, b.full(double((n - 1) / 2), E::I64, row));
  } else {
    // (m - 1) / 2 truncates to 0 for an all-NaN row: its first NaN.
    pos = b.div(b.sub(numbers, b.full(1, E::I64, row)), b.full(2, E::I64, row));
  }
  return {pick(b, s.values, dim, pos), pick(b, s.indices, dim, pos)};
}

Values median_dim(Context& ctx, const Args& a, Nan nan, const char* op) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  Lane l = lane(x, a[1].as_int());
  bool keepdim = a[2].as_bool();
  Value v = l.view(b, x);
  TPU_CHECK(v.shape()[l.dim] != 0, ErrorKind::Index, op, "(): Expected reduction dim ", l.dim,
            " to have non-zero size.");
  Sorted m = median_along(b, v, l.dim, nan);
  return {finish(b, m.values, x, l.dim, keepdim), finish(b, m.indices, x, l.dim, keepdim)};
}

// median() / nanmedian(): over every element; an empty input gives NaN.
Values median_all(Context& ctx, const Args& a, Nan nan) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  int64_t n = x.type.numel();
  if (n == 0) {
    TPU_CHECK(hlo::is_float(x.dtype()), ErrorKind::Index,
              "median() input tensor cannot be empty");
    return {b.full(std::nan(""), x.dtype(), {})};
  }
  return {median_along(b, b.reshape(x, {n}), 0, nan).values};
}

Values lower_median(Context& ctx, const Args& a) { return median_all(ctx, a, Nan::Propagate); }
Values lower_median_dim(Context& ctx, const Args& a) {
  return median_dim(ctx, a, Nan::Propagate, "median");
}
Values lower_nanmedian(Context& ctx, const Args& a) { return median_all(ctx, a, Nan::Ignore); }
Values lower_nanmedian_dim(Context& ctx, const Args& a) {
  return median_dim(ctx, a, Nan::Ignore, "nanmedian");
}

// mode: the most frequent value along dim; among equally frequent values the
// smallest, and of its occurrences the last index, as on the CPU. Counts come
// from an all-pairs comparison along the dim, which is fine at the row lengths
// mode is used on and needs no data-dependent shapes.
Values lower_mode(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  Lane l = lane(x, a[1].as_int());
  bool keepdim = a[2].as_bool();
  Value v = l.view(b, x);
  int64_t n = v.shape()[l.dim];
  TPU_CHECK(n != 0, ErrorKind::Index, "mode(): Expected reduction dim ", l.dim,
            " to have non-zero size.");
  Sorted s = sort_along(b, v, l.dim, false);
  int64_t r = v.rank();
  // [.., n, ..] -> [.., n, .., n] with the copy along a new trailing dim.
  Shape pairs = v.shape();
  pairs.push_back(n);
  std::vector<int64_t> as_row(r), as_col(r);
  for (int64_t d = 0; d < r; ++d) as_row[d] = as_col[d] = d;
  as_col[l.dim] = r;
  Value eq = b.compare(b.broadcast_in_dim(s.values, pairs, as_row),
                       b.broadcast_in_dim(s.values, pairs, as_col), Compare::EQ);
  Value counts = b.reduce_sum(b.convert(eq, E::I64), {r});
  Shape row = reduced_shape(v.shape(), {l.dim}, false);
  std::vector<int64_t> others;
  for (int64_t d = 0; d < r; ++d)
    if (d != l.dim) others.push_back(d);
  auto spread = [&](Value w) { return b.broadcast_in_dim(w, v.shape(), others); };
  Value best = b.reduce_max(counts, {l.dim});
  Value iota = b.iota(TensorType{E::I64, v.shape()}, l.dim);
  Value first = b.reduce_min(
      b.select(b.compare(counts, spread(best), Compare::EQ), iota, b.full(double(n), E::I64, v.shape())),
      {l.dim});
  Value value = pick(b, s.values, l.dim, first);
  Value same = b.compare(s.values, spread(value), Compare::EQ);
  Value last = b.reduce_max(b.select(same, s.indices, b.full(-1, E::I64, v.shape())), {l.dim});
  // A NaN mode equals nothing; its own index stands.
  Value index = b.max(last, pick(b, s.indices, l.dim, first));
  return {finish(b, value, x, l.dim, keepdim), finish(b, index, x, l.dim, keepdim)};
}

}  // namespace

TPU_LOWERING("aten::kthvalue", lower_kthvalue);
TPU_LOWERING("aten::median", lower_median);
TPU_LOWERING("aten::median.dim", lower_median_dim);
TPU_LOWERING("aten::mode", lower_mode);
TPU_LOWERING("aten::nanmedian", lower_nanmedian);
TPU_LOWERING("aten::nanmedian.dim", lower_nanmedian_dim);
TPU_LOWERING("aten::sort", lower_sort);
TPU_LOWERING("aten::sort.stable", lower_sort_stable);
TPU_LOWERING("aten::topk", lower_topk);

}  // namespace torch_tpu::lowering
