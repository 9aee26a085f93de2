// histc and torch.histogram.
//
// histc: counts of values in `bins` equal-width bins over [min, max], as
// mixture-of-experts models count tokens per expert. Each value's bin is
// (x - min) * bins / (max - min), truncated, computed in the input's type in
// the CPU kernel's order so that values on a bin edge land where the CPU puts
// them; max itself goes into the last bin; values outside the range and NaN are
// not counted. The counts are a scatter-add of ones, in the input's type.
// Integer inputs are counted as CUDA counts them (the CPU refuses them; MoE
// code such as transformers' grouped experts passes int32 ids off the CPU),
// with the bin computed in 64-bit integer arithmetic.
//
// With min == max the range is the data's own [min, max] (widened by 1 on each
// side when they are equal). The CPU raises when that range is not finite; the
// device cannot raise, so eager mode reads the range back first
// (aten/value_checks.cpp) and a compiled graph's counts come out NaN instead
// of plausible.
#include <cmath>
#include <string>

#include "lowering/common.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

using hlo::Builder;
using hlo::Compare;
using E = ElementType;

// vals ([n]) summed into `bins` slots at pos ([n] i64; positions outside are dropped)
Value sum_positions(Builder& b, Value pos, Value vals, int64_t bins) {
  int64_t n = pos.shape()[0];
  if (n == 0) return b.zeros(vals.dtype(), {bins});
  Builder::ScatterDims s;
  s.inserted_window_dims = {0};
  s.scatter_dims_to_operand_dims = {0};
  s.index_vector_dim = 1;
  return b.scatter(b.zeros(vals.dtype(), {bins}), b.reshape(pos, {n, 1}), vals, s,
                   [](Builder& r, const std::vector<Value>& x) {
                     return std::vector<Value>{r.add(x[0], x[1])};
                   });
}

Value count_positions(Builder& b, Value pos, int64_t bins, E t) {
  return sum_positions(b, pos, b.full(1, t, pos.shape()), bins);
}

std::vector<Value> lower_histc(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  int64_t bins = a[1].as_int();
  double lo_in = a[2].number.as_double(), hi_in = a[3].number.as_double();
  E t = x.dtype();
  TPU_CHECK(t != E::Bool && !hlo::is_complex(t), ErrorKind::NotImplemented,
            "\"histc\" not implemented for '", scalar_type_name(t), "'");
  bool integral = !hlo::is_float(t);
  TPU_CHECK(bins > 0, ErrorKind::Runtime, "torch.histogram(): bins must be > 0, but got ", bins,
            " for dimension 0");
  TPU_CHECK(std::isfinite(lo_in) && std::isfinite(hi_in), ErrorKind::Runtime,
            "torch.histc: range of [", lo_in, ", ", hi_in, "] is not finite");
  TPU_CHECK(lo_in <= hi_in, ErrorKind::Runtime, "torch.histc: max must be larger than min");
  int64_t n = x.type.numel();
  if (n == 0) return {b.zeros(t, {bins})};
  // The bin arithmetic's type: the input's own for floats, i64 for integers.
  E c = integral ? E::I64 : t;
  if (integral) {
    lo_in = std::trunc(lo_in);
    hi_in = std::trunc(hi_in);
  }
  Value flat = cast(b, b.reshape(x, {n}), c);

  Value lo = b.constant(lo_in, c), hi = b.constant(hi_in, c);
  Value bad_range = b.constant_bool(false);
  if (lo_in == hi_in) {
    // The data's range; NaN anywhere makes it non-finite, as on the CPU.
    Value dmin = b.reduce(std::vector<Value>{flat}, {b.max_value(c)}, {0},
                          [](Builder& r, const std::vector<Value>& v) {
                            return std::vector<Value>{nan_min(r, v[0], v[1])};
                          })[0];
    Value dmax = b.reduce(std::vector<Value>{flat}, {b.min_value(c)}, {0},
                          [](Builder& r, const std::vector<Value>& v) {
                            return std::vector<Value>{nan_max(r, v[0], v[1])};
                          })[0];
    Value same = b.compare(dmin, dmax, Compare::EQ);
    Value one = b.constant(1, c);
    lo = b.select(same, b.sub(dmin, one), dmin);
    hi = b.select(same, b.add(dmax, one), dmax);
    if (!integral) bad_range = b.not_(b.and_(b.is_finite(dmin), b.is_finite(dmax)));
  }
  Value lo_v = broadcast_to(b, lo, {n}), hi_v = broadcast_to(b, hi, {n});
  Value scaled = b.div(b.mul(b.sub(flat, lo_v), b.full(double(bins), c, {n})), b.sub(hi_v, lo_v));
  Value pos = b.convert(scaled, E::I64);
  Value last = b.full(double(bins - 1), E::I64, {n});
  pos = b.select(b.compare(pos, b.full(double(bins), E::I64, {n}), Compare::EQ), last, pos);
  Value inside = b.and_(b.compare(flat, lo_v, Compare::GE), b.compare(flat, hi_v, Compare::LE));
  // Outside values go to slot `bins`, which the scatter drops.
  pos = b.select(inside, pos, b.full(double(bins), E::I64, {n}));
  Value counts = count_positions(b, pos, bins, t);
  if (integral) return {counts};
  return {b.select(broadcast_to(b, bad_range, {bins}), b.full(NAN, t, {bins}), counts)};
}


// ---- torch.histogram: (hist, bin_edges), the CPU's histogramdd for one dimension

// A type as histogramdd's messages name it (C++'s names).
std::string c_name(E t) { return t == E::F32 ? "float" : t == E::F64 ? "double" : scalar_type_name(t); }

// The checks the CPU's histogramdd makes of x and its weight; it counts float
// and double only.
void check_histogram(const Value& x, const std::optional<Value>& weight) {
  E t = x.dtype();
  TPU_CHECK(t == E::F32 || t == E::F64, ErrorKind::NotImplemented, "\"histogramdd\" not implemented for '",
            scalar_type_name(t), "'");
  if (!weight) return;
  TPU_CHECK(weight->shape() == x.shape(), ErrorKind::Runtime,
            "torch.histogramdd: if weight tensor is provided it should have the same shape as the input tensor "
            "excluding its innermost dimension, but got input with shape [",
            x.type.numel(), ", 1] and weight with shape [", weight->type.numel(), "]");
  TPU_CHECK(weight->dtype() == t, ErrorKind::Runtime,
            "torch.histogramdd: if weight tensor is provided, input tensor and weight tensor should have the same "
            "dtype, but got input(", c_name(t), "), and weight(", c_name(weight->dtype()), ")");
}

// hist from each value's bin (pos, [n] i64, `bins` = dropped), weighted, and as a
// density (hist / (sum(hist) * bin widths)) when asked.
Value finish_histogram(Builder& b, Value pos, const std::optional<Value>& weight, Value edges, int64_t bins,
                       bool density) {
  int64_t n = pos.shape()[0];
  E t = edges.dtype();
  Value vals = weight && n > 0 ? b.reshape(*weight, {n}) : b.full(1, t, {n});
  Value hist = sum_positions(b, pos, vals, bins);
  if (!density) return hist;
  Value widths = b.sub(b.slice(edges, {1}, {bins + 1}, {1}), b.slice(edges, {0}, {bins}, {1}));
  Value total = b.broadcast_in_dim(b.reduce_sum(hist, {0}), {bins}, {});
  return b.div(hist, b.mul(total, widths));
}

// histogram.bin_ct(self, bins, *, range, weight, density): `bins` equal bins over
// `range` or the data's [min, max] (widened by 0.5 on each side when equal; [0, 1]
// for no data). The edges are linspace's, in x's type. A value's bin is the
// CPU's: the linear estimate (x - lo) * bins / (hi - lo), corrected by an upper
// bound search among the edges next to it; the last bin includes its right
// edge, values outside the range and NaN are not counted. The CPU raises when
// the data's range is not finite; the device cannot, so eager mode reads it
// back first (aten/value_checks.cpp) and a compiled graph's counts come out
// NaN.
std::vector<Value> lower_histogram_bin_ct(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  int64_t bins = a[1].as_int();
  std::optional<Value> weight = a[3].opt_tensor();
  bool density = a[4].as_bool();
  check_histogram(x, weight);
  TPU_CHECK(bins > 0, ErrorKind::Runtime, "torch.histogram(): bins must be > 0, but got ", bins, " for dimension 0");
  E t = x.dtype();
  int64_t n = x.type.numel();
  Value flat = b.reshape(x, {n});
  Value lo, hi, bad_range = b.constant_bool(false);
  if (!a[2].is_none()) {
    const auto& range = a[2].floats;
    TPU_CHECK(range.size() == 2, ErrorKind::Runtime, "torch.histogramdd: for a 1-dimensional histogram, range should "
              "have 2 elements, but got ", range.size());
    TPU_CHECK(std::isfinite(range[0]) && std::isfinite(range[1]), ErrorKind::Runtime,
              "torch.histogramdd: dimension 0's range [", range[0], ", ", range[1], "] is not finite");
    TPU_CHECK(range[0] <= range[1], ErrorKind::Runtime, "torch.histogramdd: min should not exceed max, but got min ",
              range[0], " max ", range[1], " for dimension 0");
    lo = b.constant(range[0], t), hi = b.constant(range[1], t);
  } else if (n == 0) {
    lo = b.constant(0, t), hi = b.constant(1, t);
  } else {
    lo = b.reduce(std::vector<Value>{flat}, {b.max_value(t)}, {0}, [](Builder& r, const std::vector<Value>& v) {
      return std::vector<Value>{nan_min(r, v[0], v[1])};
    })[0];
    hi = b.reduce(std::vector<Value>{flat}, {b.min_value(t)}, {0}, [](Builder& r, const std::vector<Value>& v) {
      return std::vector<Value>{nan_max(r, v[0], v[1])};
    })[0];
    bad_range = b.not_(b.and_(b.is_finite(lo), b.is_finite(hi)));
  }
  Value same = b.compare(lo, hi, Compare::EQ), half = b.constant(0.5, t);
  lo = b.select(same, b.sub(lo, half), lo);
  hi = b.select(same, b.add(hi, half), hi);
  Value edges = linspace_values(b, lo, hi, bins + 1);
  // No data: zero counts, and a density of 0 / 0 as on the CPU.
  if (n == 0) return {finish_histogram(b, b.zeros(E::I64, {0}), weight, edges, bins, density), edges};
  Value lo_v = broadcast_to(b, lo, {n}), hi_v = broadcast_to(b, hi, {n});
  Value inside = b.and_(b.compare(flat, lo_v, Compare::GE), b.compare(flat, hi_v, Compare::LE));
  Value est = b.convert(b.div(b.mul(b.sub(flat, lo_v), b.full(double(bins), t, {n})), b.sub(hi_v, lo_v)), E::I64);
  est = b.select(inside, est, b.zeros(E::I64, {n}));
  Value pos_min = b.max(b.sub(est, b.full(1, E::I64, {n})), b.zeros(E::I64, {n}));
  Value pos_max = b.min(b.add(est, b.full(2, E::I64, {n})), b.full(double(bins + 1), E::I64, {n}));
  // upper_bound over edges[pos_min, pos_max): pos_min plus the edges there <= x, minus one.
  Builder::GatherDims g;
  g.collapsed_slice_dims = {0};
  g.start_index_map = {0};
  g.index_vector_dim = 1;
  Value pos = b.sub(pos_min, b.full(1, E::I64, {n}));
  for (int64_t k = 0; k < 3; ++k) {
    Value at = b.add(pos_min, b.full(double(k), E::I64, {n}));
    Value e = b.gather(edges, b.reshape(b.min(at, b.full(double(bins), E::I64, {n})), {n, 1}), g, {1}, {n});
    Value below = b.and_(b.compare(at, pos_max, Compare::LT), b.compare(e, flat, Compare::LE));
    pos = b.add(pos, b.convert(below, E::I64));
  }
  Value last = b.full(double(bins), E::I64, {n});
  pos = b.select(b.compare(pos, last, Compare::EQ), b.full(double(bins - 1), E::I64, {n}), pos);
  pos = b.select(inside, pos, last);
  Value hist = finish_histogram(b, pos, weight, edges, bins, density);
  return {b.select(broadcast_to(b, bad_range, {bins}), b.full(NAN, t, {bins}), hist), edges};
}

// histogram.bins_tensor(self, bins, *, weight, density): the given edges; a value's
// bin is upper_bound(edges, x) - 1 (the count of edges <= x), the last bin includes
// its right edge, values outside [edges[0], edges[-1]] are not counted.
std::vector<Value> lower_histogram_bins_tensor(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor(), edges = a[1].as_tensor();
  std::optional<Value> weight = a[2].opt_tensor();
  bool density = a[3].as_bool();
  check_histogram(x, weight);
  TPU_CHECK(edges.rank() == 1, ErrorKind::Runtime, "torch.histogramdd: bins tensor should have one dimension, but got ",
            edges.rank(), " dimensions in the bins tensor for dimension 0");
  TPU_CHECK(edges.dtype() == x.dtype(), ErrorKind::Runtime,
            "torch.histogramdd: input tensor and bins tensors should have the same dtype, but got input with dtype ",
            c_name(x.dtype()), " and bins for dimension 0 with dtype ", c_name(edges.dtype()));
  int64_t m = edges.shape()[0], bins = m - 1, n = x.type.numel();
  TPU_CHECK(bins > 0, ErrorKind::Runtime, "torch.histogram(): bins must be > 0, but got ", bins, " for dimension 0");
  if (n == 0) return {finish_histogram(b, b.zeros(E::I64, {0}), std::nullopt, edges, bins, density), edges};
  Value flat = b.reshape(x, {n});
  Value first = b.broadcast_in_dim(b.reshape(b.slice(edges, {0}, {1}, {1}), {}), {n}, {});
  Value final_ = b.broadcast_in_dim(b.reshape(b.slice(edges, {m - 1}, {m}, {1}), {}), {n}, {});
  Value inside = b.and_(b.compare(flat, first, Compare::GE), b.compare(flat, final_, Compare::LE));
  Value le = b.compare(b.broadcast_in_dim(edges, {n, m}, {1}), b.broadcast_in_dim(flat, {n, m}, {0}), Compare::LE);
  Value pos = b.sub(b.reduce_sum(b.convert(le, E::I64), {1}), b.full(1, E::I64, {n}));
  Value last = b.full(double(bins), E::I64, {n});
  pos = b.select(b.compare(pos, last, Compare::EQ), b.full(double(bins - 1), E::I64, {n}), pos);
  pos = b.select(inside, pos, last);
  return {finish_histogram(b, pos, weight, edges, bins, density), edges};
}

}  // namespace

TPU_LOWERING("aten::histc", lower_histc, kStaticNumbers);
TPU_LOWERING("aten::histogram.bin_ct", lower_histogram_bin_ct);
TPU_LOWERING("aten::histogram.bins_tensor", lower_histogram_bins_tensor);

}  // namespace torch_tpu::lowering
