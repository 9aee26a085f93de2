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
// device cannot raise, so those counts come out NaN instead of plausible.
#include <cmath>

#include "lowering/common.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

using hlo::Builder;
using hlo::Compare;
using E = ElementType;

// ones scattered into `bins` slots at pos ([n] i64; positions outside are dropped)
Value count_positions(Builder& b, Value pos, int64_t bins, E t) {
  int64_t n = pos.shape()[0];
  Builder::ScatterDims s;
  s.inserted_window_dims = {0};
  s.scatter_dims_to_operand_dims = {0};
  s.index_vector_dim = 1;
  return b.scatter(b.zeros(t, {bins}), b.reshape(pos, {n, 1}), b.full(1, t, {n}), s,
                   [](Builder& r, const std::vector<Value>& x) {
                     return std::vector<Value>{r.add(x[0], x[1])};
                   });
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

}  // namespace

TPU_LOWERING("aten::histc", lower_histc, kStaticNumbers);

}  // namespace torch_tpu::lowering
