// Sums over leading dims through the block_sum kernel, then XLA's reduce.
//
// XLA:CPU rewrites a sum of more than 32 elements into a reduce-window whose
// code adds each output's window one element after another: a bias gradient
// over [8, 128, 1024] took 0.9-1.2 ms in XLA's trace of the GPT's backward.
// The kernel sums each block of 16 rows in order, as PyTorch's CPU cascade's
// first level does, and its result (16x smaller) is summed again the same
// way until at most 16 rows are left for XLA's reduce. It takes the summed
// tensor in its own shape: a reshape of it for a product with ones (the GEMM
// kernel, tried first: commits c6d08fa, 7d0e48d) made XLA fuse the tensor's
// producer into that reshape as well as into its other users, computing a
// bias gradient's GELU backward twice, and the GPT step ran slower.
#include "lowering/sum_kernel.h"

#include "kernels/kernels.h"

namespace torch_tpu::lowering {

namespace {

using E = ElementType;

struct SumClass {
  E dtype;
  int64_t min_rows, min_columns;
};

// Sorted by dtype. A sum of another dtype, over other than leading dims, or
// below either bound of its class, runs XLA's reduce. The bounds are
// bdc685a's, whose product measured faster than XLA's reduce from them; the
// step's sums measured here are over 1024 rows of 256-1024 columns.
constexpr SumClass kKernelWins[] = {
    {E::F32, 256, 64},
};

constexpr int64_t kBlock = kernels::kBlockSumRows;

bool kernel_wins(E dtype, int64_t rows, int64_t columns) {
  for (const SumClass& c : kKernelWins)
    if (c.dtype == dtype) return rows >= c.min_rows && columns >= c.min_columns;
  return false;
}

}  // namespace

Value sum_by_kernel(Context& ctx, const Value& x, const std::vector<int64_t>& dims) {
  hlo::Builder& b = ctx.b;
  const int64_t n = int64_t(dims.size());
  bool leading = n > 0 && n < x.rank();
  for (int64_t i = 0; i < n && leading; ++i) leading = dims[i] == i;
  if (!leading) return b.reduce_sum(x, dims);
  const Shape kept(x.shape().begin() + n, x.shape().end());
  int64_t rows = 1, columns = 1;
  for (int64_t i = 0; i < x.rank(); ++i) (i < n ? rows : columns) *= x.shape()[i];
  std::string target = kernel_wins(x.dtype(), rows, columns) ? ctx.kernel_target("block_sum") : "";
  if (target.empty()) return b.reduce_sum(x, dims);
  Value sums = x;
  do {
    const int64_t blocks = (rows + kBlock - 1) / kBlock;
    sums = b.custom_call(target, {sums}, {hlo::TensorType{E::F32, {blocks, columns}}},
                         {hlo::Builder::FfiAttr::i64("rows", rows)})[0];
    rows = blocks;
  } while (rows > kBlock);
  return b.reshape(b.reduce_sum(sums, {0}), kept);
}

}  // namespace torch_tpu::lowering
