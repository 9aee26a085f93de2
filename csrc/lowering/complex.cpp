// Complex tensors built from two real ones: complex(real, imag) and
// polar(abs, angle) (rotary embeddings written with complex numbers, as
// DeepSeek-V2's, build their rotations with polar). Both take two tensors of
// one float type and broadcast them. polar is abs * cos(angle) +
// i abs * sin(angle) computed as written, so its special values are the
// CPU's: polar(0, inf) is nan + nan i, polar(inf, 0) is inf + nan i. The
// backward passes are composites of ordinary ops.
#include "lowering/common.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

using hlo::Builder;
using E = ElementType;
using Values = std::vector<Value>;

// The CPU's checks, in its order; returns the broadcast operands.
std::pair<Value, Value> real_pair(Builder& b, const Args& a, const char* kernel) {
  Value x = a[0].as_tensor(), y = a[1].as_tensor();
  auto real_float = [](E t) { return t == E::F16 || t == E::F32 || t == E::F64; };
  TPU_CHECK(real_float(x.dtype()) && real_float(y.dtype()), ErrorKind::Runtime,
            "Expected both inputs to be Half, Float or Double tensors but got ",
            scalar_type_name(x.dtype()), " and ", scalar_type_name(y.dtype()));
  TPU_CHECK(x.dtype() == y.dtype(), ErrorKind::Runtime, "Expected object of scalar type ",
            scalar_type_name(x.dtype()), " but got scalar type ", scalar_type_name(y.dtype()),
            " for second argument");
  // ComplexHalf has no StableHLO element type.
  check_dtype(x.dtype() != E::F16, kernel, x.dtype());
  Shape s = broadcast_shapes(x.shape(), y.shape());
  return {broadcast_to(b, x, s), broadcast_to(b, y, s)};
}

Values lower_complex(Context& ctx, const Args& a) {
  auto [re, im] = real_pair(ctx.b, a, "complex_cpu");
  return {ctx.b.complex(re, im)};
}

Values lower_polar(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  auto [r, theta] = real_pair(b, a, "polar_cpu");
  return {b.complex(b.mul(r, b.cosine(theta)), b.mul(r, b.sine(theta)))};
}

}  // namespace

TPU_LOWERING("aten::complex", lower_complex);
TPU_LOWERING("aten::polar", lower_polar);

}  // namespace torch_tpu::lowering
