// The shape classes where the GEMM kernel replaces XLA's dot (and, below,
// XLA's reduce for sums). A custom call is opaque to XLA: it fuses no
// transpose, broadcast or elementwise neighbour into it, and it is a launch
// of its own, so small products stay with XLA's dot (and its fusions); above
// a size, MKL's GEMM (the one torch.mm runs) is the faster for f32.
//
// Measured with `python3 benchmarks/gemm_shapes.py --quick` (kernel and XLA's
// dot interleaved in one process, 2 cores, a shared machine whose load moved
// single ratios by 0.6-2x between runs): over the 19 products of the GPT
// training step, XLA's time over the kernel's had a median of 1.11 (loaded)
// and 1.09 (load 1.5-6; 2-D products 0.59-1.32, the TN ones of weight
// gradients lowest, batched attention products 0.82-1.67); small f32
// products, 32 x 256 x 256 .. 128 x 128 x 128, 1.2-2.0 (loaded). On the step
// (`python3 benchmarks/compile.py --sizes issue`, quiet) the kernel made
// compile_tpu 1.09x faster in training and 1.10x in inference than with XLA's
// dot everywhere. bf16 products went the other way (MKL's bf16 GEMM at
// 1024 x 768 x 256: 0.35-0.65 of XLA's speed in NN and NT; TN 0.8-3.0):
// they run XLA's dot.
#include "lowering/gemm_kernel.h"

namespace torch_tpu::lowering {

namespace {

using E = ElementType;

struct ShapeClass {
  E dtype;
  int64_t min_side;   // the least of M, N and K
  int64_t min_work;   // B * M * N * K, multiply-adds
};

// Sorted by dtype. A product of another dtype, or below either bound of its
// class, runs XLA's dot.
constexpr ShapeClass kKernelWins[] = {
    {E::F32, 32, int64_t(1) << 21},
};

bool kernel_wins(E dtype, int64_t batch, int64_t m, int64_t n, int64_t k) {
  for (const ShapeClass& c : kKernelWins)
    if (c.dtype == dtype) return std::min({m, n, k}) >= c.min_side && batch * m * n * k >= c.min_work;
  return false;
}

// Sums as products with ones: over leading dims ones[1, reduced] @
// x[reduced, kept], over trailing ones x[kept, reduced] @ ones[reduced, 1].
// XLA:CPU rewrites a sum of more than 32 elements into a reduce-window whose
// code adds each output's window one element after another, a chain as slow
// as the add's latency. In XLA's trace of the GPT's training step a bias
// gradient over 1024 rows of 1024 columns took 0.9-1.2 ms as a reduce-window,
// 0.1 ms as the kernel's product, and the cross-entropy's row sums over 4096
// classes of 1024 rows 2.2-3.4 ms as a reduce-window; from 128 elements on
// (layer norms, attention's softmax) row sums measured no clear win
// (docs/ffi.md).
enum class Along { Leading, Trailing };

struct SumClass {
  E dtype;
  Along along;
  int64_t min_reduced, min_kept;  // elements
};

// Sorted by dtype, then along. A sum of another dtype, over other dims, or
// below either bound of its class, runs XLA's reduce.
constexpr SumClass kSumKernelWins[] = {
    {E::F32, Along::Leading, 256, 64},
    {E::F32, Along::Trailing, 1024, 64},
};

bool sum_kernel_wins(E dtype, Along along, int64_t reduced, int64_t kept) {
  for (const SumClass& c : kSumKernelWins)
    if (c.dtype == dtype && c.along == along) return reduced >= c.min_reduced && kept >= c.min_kept;
  return false;
}

Value call(Context& ctx, const std::string& target, const Value& lhs, const Value& rhs, bool transpose_lhs,
           bool transpose_rhs, const Shape& out) {
  return ctx.b.custom_call(target, {lhs, rhs}, {hlo::TensorType{E::F32, out}},
                           {hlo::Builder::FfiAttr::boolean("transpose_lhs", transpose_lhs),
                            hlo::Builder::FfiAttr::boolean("transpose_rhs", transpose_rhs)})[0];
}

}  // namespace

std::optional<Value> gemm_kernel(Context& ctx, const Value& lhs, const Value& rhs, bool batched) {
  hlo::Builder& b = ctx.b;
  const size_t r = batched ? 1 : 0;
  const int64_t batch = batched ? lhs.shape()[0] : 1;
  const int64_t m = lhs.shape()[r], k = lhs.shape()[r + 1], n = rhs.shape()[r + 1];
  if (lhs.dtype() != rhs.dtype() || !kernel_wins(lhs.dtype(), batch, m, n, k)) return std::nullopt;
  std::string target = ctx.kernel_target("gemm");
  if (target.empty()) return std::nullopt;
  // An operand that is a transpose goes in untransposed, with a flag: XLA
  // would have folded the transpose into its dot; the kernel reads either order.
  const std::vector<int64_t> swap = batched ? std::vector<int64_t>{0, 2, 1} : std::vector<int64_t>{1, 0};
  std::optional<Value> lhs_t = b.transposed_from(lhs, swap), rhs_t = b.transposed_from(rhs, swap);
  Shape out = batched ? Shape{batch, m, n} : Shape{m, n};
  return call(ctx, target, lhs_t.value_or(lhs), rhs_t.value_or(rhs), lhs_t.has_value(), rhs_t.has_value(), out);
}

Value sum_by_kernel(Context& ctx, const Value& x, const std::vector<int64_t>& dims) {
  hlo::Builder& b = ctx.b;
  const int64_t n = int64_t(dims.size()), rank = x.rank();
  bool leading = n > 0, trailing = n > 0;
  for (int64_t i = 0; i < n; ++i) leading &= dims[i] == i, trailing &= dims[i] == rank - n + i;
  if (!leading && !trailing) return b.reduce_sum(x, dims);
  // The kept dims, [first, first + rank - n).
  const int64_t first = leading ? n : 0;
  int64_t reduced = 1, kept = 1;
  for (int64_t i = 0; i < rank; ++i) (i >= first && i < first + rank - n ? kept : reduced) *= x.shape()[i];
  Along along = leading ? Along::Leading : Along::Trailing;
  std::string target = sum_kernel_wins(x.dtype(), along, reduced, kept) ? ctx.kernel_target("gemm") : "";
  if (target.empty()) return b.reduce_sum(x, dims);
  Value sums = leading ? call(ctx, target, b.full(1, E::F32, {1, reduced}), b.reshape(x, {reduced, kept}), false,
                              false, {1, kept})
                       : call(ctx, target, b.reshape(x, {kept, reduced}), b.full(1, E::F32, {reduced, 1}), false,
                              false, {kept, 1});
  return b.reshape(sums, Shape(x.shape().begin() + first, x.shape().begin() + first + rank - n));
}

}  // namespace torch_tpu::lowering
