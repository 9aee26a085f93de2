// The shape classes where the GEMM kernel replaces XLA's dot. A custom call
// is opaque to XLA: it fuses no transpose, broadcast or elementwise
// neighbour into it, and it is a launch of its own, so small products stay
// with XLA's dot (and its fusions); above a size, MKL's GEMM (the one torch.mm
// runs) is the faster for f32.
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
//
// Those measurements were taken on a CPU without AVX-512, where XLA's dot and
// MKL both run AVX2. MKL takes its AVX-512 code only on Intel CPUs; XLA
// compiles for the host's widest vectors. On an AMD Zen 5 (AVX-512 at full
// width, 2026-12-07) XLA's dot ran the GPT step's f32 products at 211-466
// GFLOP/s against the kernel's 171-218 (`gemm_shapes.py --quick`: its time
// 0.44-0.90x the kernel's), and the training step took 103-110 ms against
// 153-163 (`compile.py`'s step, side by side). So the table applies only
// where MKL's vectors are as wide as XLA's (TORCH_TPU_KERNELS=all: everywhere,
// for tests and comparisons).
#include "lowering/gemm_kernel.h"

#include "common/env.h"
#include "common/host_cpu.h"

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

// No AVX-512, or an Intel CPU (where MKL runs AVX-512 too).
bool mkl_as_wide_as_xla() { return !host_has_avx512f() || host_is_intel(); }

bool kernel_wins(E dtype, int64_t batch, int64_t m, int64_t n, int64_t k) {
  if (!mkl_as_wide_as_xla() && !env().all_kernels) return false;
  for (const ShapeClass& c : kKernelWins)
    if (c.dtype == dtype) return std::min({m, n, k}) >= c.min_side && batch * m * n * k >= c.min_work;
  return false;
}

}  // namespace

std::optional<Value> gemm_kernel(Context& ctx, const Value& lhs, const Value& rhs, bool batched) {
  hlo::Builder& b = ctx.b;
  const size_t r = batched ? 1 : 0;
  const int64_t batch = batched ? lhs.shape()[0] : 1;
  const int64_t m = lhs.shape()[r], k = lhs.shape()[r + 1], n = rhs.shape()[r + 1];
  // Asked first, so that a bad TORCH_TPU_KERNELS fails every product alike.
  std::string target = ctx.kernel_target("gemm");
  if (target.empty() || lhs.dtype() != rhs.dtype() || !kernel_wins(lhs.dtype(), batch, m, n, k)) return std::nullopt;
  // An operand that is a transpose goes in untransposed, with a flag: XLA
  // would have folded the transpose into its dot; the kernel reads either order.
  const std::vector<int64_t> swap = batched ? std::vector<int64_t>{0, 2, 1} : std::vector<int64_t>{1, 0};
  std::optional<Value> lhs_t = b.transposed_from(lhs, swap), rhs_t = b.transposed_from(rhs, swap);
  Shape out = batched ? Shape{batch, m, n} : Shape{m, n};
  return b.custom_call(target, {lhs_t.value_or(lhs), rhs_t.value_or(rhs)}, {hlo::TensorType{E::F32, out}},
                       {hlo::Builder::FfiAttr::boolean("transpose_lhs", lhs_t.has_value()),
                        hlo::Builder::FfiAttr::boolean("transpose_rhs", rhs_t.has_value())})[0];
}

}  // namespace torch_tpu::lowering
