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

// Sums as products with ones, in blocks of kSumBlock terms (see
// sum_by_kernel). XLA:CPU rewrites a sum of more than 32 elements into a
// reduce-window whose code adds each output's window one element after
// another: a bias gradient over [8, 128, 1024] took 0.9-1.2 ms in XLA's
// trace of the GPT's backward. One product with a vector of ones over all the
// reduced rows (commit bdc685a) was as fast but added the rows one after
// another in MKL's order, less accurate than XLA's reduce and PyTorch's
// cascade; blocks of 16 terms, each level's block sums summed again by the
// kernel until at most 16 are left for XLA's reduce, are more accurate than
// either (tests/test_sum_kernel.py).
enum class Along { Leading, Trailing };

struct SumClass {
  E dtype;
  Along along;
  int64_t min_reduced, min_kept;  // elements
};

// Sorted by dtype, then along. A sum of another dtype, over other dims, or
// below either bound of its class, runs XLA's reduce. Leading sums from 512
// rows: over 257 rows XLA's reduce of Builder::reduce_sum's cascade gives
// PyTorch's CPU sum bit for bit, and debug mode's comparison of a sum of
// mixed signs with the f32 tolerance table passes only then.
constexpr SumClass kSumKernelWins[] = {
    {E::F32, Along::Leading, 512, 64},
    {E::F32, Along::Trailing, 1024, 64},
};

// The terms the kernel adds one after another (MKL's order, not PyTorch's).
constexpr int64_t kSumBlock = 16;

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

// m [reduced, kept] (leading) or [kept, reduced] (trailing) with the reduced
// axis padded with zeros to a multiple of kSumBlock (adding zeros is exact).
Value padded_to_blocks(hlo::Builder& b, const Value& m, int64_t axis) {
  const int64_t n = m.shape()[axis], padded = (n + kSumBlock - 1) / kSumBlock * kSumBlock;
  if (padded == n) return m;
  std::vector<int64_t> none(2, 0), high(2, 0);
  high[axis] = padded - n;
  return b.pad(m, b.constant(0, m.dtype()), none, high, none);
}

// One level: the sums of each kSumBlock consecutive rows of m [reduced,
// kept] (a batch of ones[1, block] @ m's blocks [block, kept]), or of each
// kSumBlock consecutive columns of m [kept, reduced] (m seen as [kept *
// reduced / block, block] @ ones[block, 1]).
Value block_sums(Context& ctx, const std::string& target, const Value& m, bool leading) {
  hlo::Builder& b = ctx.b;
  const int64_t axis = leading ? 0 : 1, kept = m.shape()[1 - axis];
  Value padded = padded_to_blocks(b, m, axis);
  const int64_t blocks = padded.shape()[axis] / kSumBlock;
  if (leading)
    return b.reshape(call(ctx, target, b.full(1, E::F32, {blocks, 1, kSumBlock}),
                          b.reshape(padded, {blocks, kSumBlock, kept}), false, false, {blocks, 1, kept}),
                     {blocks, kept});
  return b.reshape(call(ctx, target, b.reshape(padded, {kept * blocks, kSumBlock}),
                        b.full(1, E::F32, {kSumBlock, 1}), false, false, {kept * blocks, 1}),
                   {kept, blocks});
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
  const Shape kept_shape(x.shape().begin() + first, x.shape().begin() + first + rank - n);
  int64_t reduced = 1, kept = 1;
  for (int64_t i = 0; i < rank; ++i) (i >= first && i < first + rank - n ? kept : reduced) *= x.shape()[i];
  Along along = leading ? Along::Leading : Along::Trailing;
  std::string target = sum_kernel_wins(x.dtype(), along, reduced, kept) ? ctx.kernel_target("gemm") : "";
  if (target.empty()) return b.reduce_sum(x, dims);
  const int64_t axis = leading ? 0 : 1;
  Value m = b.reshape(x, leading ? Shape{reduced, kept} : Shape{kept, reduced});
  do m = block_sums(ctx, target, m, leading);
  while (m.shape()[axis] > kSumBlock);
  return b.reshape(b.reduce_sum(m, {axis}), kept_shape);
}

}  // namespace torch_tpu::lowering
