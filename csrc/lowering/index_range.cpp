#include "lowering/index_range.h"

#include <algorithm>

namespace torch_tpu::lowering {

namespace {

hlo::ElementType unsigned_of(hlo::ElementType t) {
  switch (hlo::byte_size(t)) {
    case 1: return hlo::ElementType::U8;
    case 2: return hlo::ElementType::U16;
    case 4: return hlo::ElementType::U32;
    default: return hlo::ElementType::U64;
  }
}

// Whether some index lies outside [lo, hi), as an i1 scalar. Counted as one
// unsigned maximum, `index - lo` against `hi - lo`, so that the check costs
// about one operation per index: XLA's CPU runtime runs a program of under
// 1000 estimated flops inline on the launching thread, and a gather (no
// flops) with a check of four operations per index (two compares, an or,
// the reduction) crossed that line at 256 indices and paid a thread hand-off.
hlo::Value any_out_of_range(hlo::Builder& b, hlo::Value idx, int64_t lo, int64_t hi) {
  hlo::ElementType t = idx.dtype();
  if (hlo::is_unsigned(t)) lo = std::max<int64_t>(lo, 0);  // no value lies below 0
  const int64_t width = hi - lo;
  // A narrow type whose unsigned range cannot hold the width is widened.
  if (hlo::byte_size(t) < 8 && width >= (int64_t{1} << (8 * hlo::byte_size(t)))) {
    t = hlo::is_unsigned(t) ? hlo::ElementType::U64 : hlo::ElementType::I64;
    idx = b.convert(idx, t);
  }
  // Wrapping arithmetic: a value below lo becomes a huge unsigned number.
  if (lo != 0) idx = b.sub(idx, b.full(static_cast<double>(lo), t, idx.shape()));
  hlo::ElementType u = unsigned_of(t);
  if (u != t) idx = b.bitcast_convert(idx, hlo::TensorType{u, idx.shape()});
  if (idx.rank() > 0) {
    std::vector<int64_t> all(idx.rank());
    for (int64_t i = 0; i < idx.rank(); ++i) all[i] = i;
    idx = b.reduce_max(idx, all);
  }
  return b.compare(idx, b.full(static_cast<double>(width), u, {}), hlo::Compare::GE);
}

std::vector<hlo::Value> index_out_of_range(Context& ctx, const Args& a) {
  hlo::Builder& b = ctx.b;
  hlo::Value idx = a[0].as_tensor();
  const std::vector<int64_t>& r = a[1].as_ints();
  if (r[3]) {  // the ignored value counts as lo, which is in range
    hlo::ElementType t = idx.dtype();
    hlo::Value ignored = b.compare(idx, b.full(static_cast<double>(r[2]), t, idx.shape()), hlo::Compare::EQ);
    idx = b.select(ignored, b.full(static_cast<double>(r[0]), t, idx.shape()), idx);
  }
  if (a.size() > 3) {  // an index padded along a[3] to a bucket, a[4] entries valid
    hlo::Value at = b.iota(hlo::TensorType{hlo::ElementType::I64, idx.shape()}, a[3].as_int());
    hlo::Value size = b.broadcast_in_dim(ctx.number(a[4], hlo::ElementType::I64), idx.shape(), {});
    idx = b.select(b.compare(at, size, hlo::Compare::LT), idx, b.full(static_cast<double>(r[0]), idx.dtype(), idx.shape()));
  }
  hlo::Value bad = any_out_of_range(b, idx, r[0], r[1]);
  const hlo::ElementType i32 = hlo::ElementType::I32;
  hlo::Value zero = b.constant_int(0, i32), one = b.constant_int(1, i32);
  hlo::Value passed = a[2].as_tensor();
  hlo::Value mine = b.select(bad, b.sub(b.sub(zero, passed), one), b.add(passed, one));
  return {b.select(b.compare(passed, zero, hlo::Compare::LT), passed, mine)};
}

}  // namespace

const Lowering kIndexOutOfRange{"tpu::index_out_of_range", &index_out_of_range, false};

}  // namespace torch_tpu::lowering
