// torch._scaled_mm: a product of float8 matrices with scales, as PyTorch's
// CPU kernel computes it: the operands widened to f32 and multiplied by
// their scales, one f32 product, the bias added, and for a float8 result
// the division by scale_result before the rounding. Scales are per tensor
// (one element each) or per row of self ([M, 1]) and column of mat2 ([1, N]).
#include "hlo/float8.h"
#include "lowering/common.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

using hlo::Builder;
using E = ElementType;
using Values = std::vector<Value>;

// `scale` widened to f32 and broadcast over `shape`; `rank0`: one element.
Value scaled(Builder& b, Value m, Value scale, bool rank0) {
  Value s = cast(b, scale, E::F32);
  if (rank0) s = b.reshape(s, {});
  return b.mul(cast(b, m, E::F32), broadcast_to(b, s, m.shape()));
}

// _scaled_mm(self, mat2, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum)
Values lower_scaled_mm(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value m1 = a[0].as_tensor(), m2 = a[1].as_tensor(), sa = a[2].as_tensor(), sb = a[3].as_tensor();
  TPU_CHECK(m1.rank() == 2 && m2.rank() == 2, ErrorKind::Runtime, "_scaled_mm: self and mat2 must be matrices");
  const int64_t M = m1.shape()[0], K = m1.shape()[1], N = m2.shape()[1];
  TPU_CHECK(m2.shape()[0] == K, ErrorKind::Runtime, "mat1 and mat2 shapes cannot be multiplied (", M, "x", K,
            " and ", m2.shape()[0], "x", N, ")");
  TPU_CHECK(hlo::is_float8(m1.dtype()) && hlo::is_float8(m2.dtype()), ErrorKind::Value,
            "_scaled_mm: expected float8 self and mat2, got ", scalar_type_name(m1.dtype()), " and ",
            scalar_type_name(m2.dtype()));
  const bool per_tensor = sa.type.numel() == 1 && sb.type.numel() == 1;
  const bool per_row = sa.shape() == Shape{M, 1} && sb.shape() == Shape{1, N};
  TPU_CHECK(hlo::is_float(sa.dtype()) && hlo::is_float(sb.dtype()) && (per_tensor || per_row), ErrorKind::Value,
            "_scaled_mm: Invalid scaling configuration: scales of one element each (per tensor), or scale_a [",
            M, ", 1] and scale_b [1, ", N, "] (per row), in float; got ", hlo::shape_str(sa.shape()), " and ",
            hlo::shape_str(sb.shape()));
  Value r = b.dot_general(scaled(b, m1, sa, per_tensor), scaled(b, m2, sb, per_tensor), {}, {}, {1}, {0}, E::F32);
  if (auto bias = a[4].opt_tensor()) r = b.add(r, broadcast_to(b, cast(b, *bias, E::F32), r.shape()));
  const E out = a[6].opt_dtype().value_or(m1.dtype());
  if (auto result_scale = a[5].opt_tensor(); result_scale && hlo::is_float8(out))
    r = b.div(r, broadcast_to(b, b.reshape(cast(b, *result_scale, E::F32), {}), r.shape()));
  return {cast(b, r, out)};
}

}  // namespace

TPU_LOWERING("aten::_scaled_mm", lower_scaled_mm);

}  // namespace torch_tpu::lowering
