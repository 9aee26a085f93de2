#include "lowering/index_range.h"

namespace torch_tpu::lowering {

namespace {

std::vector<hlo::Value> index_out_of_range(Context& ctx, const Args& a) {
  hlo::Builder& b = ctx.b;
  hlo::Value idx = a[0].as_tensor();
  const std::vector<int64_t>& r = a[1].as_ints();
  hlo::ElementType t = idx.dtype();
  const hlo::Shape& shape = idx.shape();
  hlo::Value bad = b.compare(idx, b.full(static_cast<double>(r[1]), t, shape), hlo::Compare::GE);
  if (!hlo::is_unsigned(t) || r[0] > 0)
    bad = b.or_(bad, b.compare(idx, b.full(static_cast<double>(r[0]), t, shape), hlo::Compare::LT));
  if (r[3])
    bad = b.and_(bad, b.compare(idx, b.full(static_cast<double>(r[2]), t, shape), hlo::Compare::NE));
  if (idx.rank() > 0) {
    std::vector<int64_t> all(idx.rank());
    for (int64_t i = 0; i < idx.rank(); ++i) all[i] = i;
    bad = b.reduce_or(bad, all);
  }
  const hlo::ElementType i32 = hlo::ElementType::I32;
  hlo::Value zero = b.constant_int(0, i32), one = b.constant_int(1, i32);
  hlo::Value passed = a.size() < 3 ? zero : a[2].as_tensor();
  hlo::Value mine = b.select(bad, b.sub(b.sub(zero, passed), one), b.add(passed, one));
  if (a.size() < 3) return {mine};
  return {b.select(b.compare(passed, zero, hlo::Compare::LT), passed, mine)};
}

}  // namespace

const Lowering kIndexOutOfRange{"tpu::index_out_of_range", &index_out_of_range, false};

}  // namespace torch_tpu::lowering
