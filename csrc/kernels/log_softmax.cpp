// log_softmax over the last dim of an f32 [N, C], and its backward, as XLA
// FFI handlers for XLA's CPU plugin: one read and one write of the data.
//
// XLA:CPU runs the composite (lowering/normalization.cpp) as separate passes
// over the whole tensor: the row max, the exponentials and their sum, the
// output; the backward's sum and exponentials again. Here each row is done
// whole while it is in the core's cache (a 4096-class row is 16 KiB): its max,
// the sum of exp(x - max), then y = (x - max) - log(sum), the composite's
// order of operations (so a large-magnitude row keeps x - max exact); the
// backward's row takes sum(g), then g - exp(y) * sum(g). A NaN or an all
// -inf row gives a row of NaN and -inf entries give -inf, as the composite's
// (and PyTorch's CPU kernel's) arithmetic does. Rows are cut into items that
// threads claim one at a time, the calling thread and helpers on the
// plugin's intra-op pool (kernels/parallel.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/parallel.h"
#include "kernels/vector_exp.h"
#include "xla/ffi/api/ffi.h"

namespace torch_tpu::kernels {

namespace ffi = xla::ffi;

namespace {

// The row's max, NaN skipped (the sum catches it), in 16 lanes of a vector:
// GCC leaves an OpenMP max reduction scalar, a chain of dependent maxes.
typedef float V16 __attribute__((vector_size(64), aligned(4)));

__attribute__((always_inline)) inline float row_max(const float* x, int64_t n) {
  V16 lanes = V16{} - INFINITY;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const V16 v = *reinterpret_cast<const V16*>(x + j);
    lanes = v > lanes ? v : lanes;
  }
  float top = -INFINITY;
  for (; j < n; ++j) top = x[j] > top ? x[j] : top;
  for (int l = 0; l < 16; ++l) top = lanes[l] > top ? lanes[l] : top;
  return top;
}

TORCH_TPU_VECTOR_CLONES
void forward_row(const float* x, float* y, int64_t n) {
  const float top = row_max(x, n);
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) sum += exp_any(x[j] - top);
  const float log_sum = std::log(sum);
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - top) - log_sum;
}

TORCH_TPU_VECTOR_CLONES
void backward_row(const float* g, const float* y, float* out, int64_t n) {
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) sum += g[j];
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) out[j] = g[j] - exp_any(y[j]) * sum;
}

// Rows per item: about 64 KiB of a row's data, so that a slowed thread (the
// machine is shared) leaves others items to claim.
constexpr int64_t kItemElements = int64_t(1) << 14;

template <typename Row>
void over_rows(ffi::ThreadPool& pool, int64_t rows, int64_t n, Row row) {
  const int64_t per_item = std::max<int64_t>(1, kItemElements / std::max<int64_t>(n, 1));
  const int64_t items = (rows + per_item - 1) / per_item;
  auto make_worker = [&] {
    return [&](int64_t i) {
      for (int64_t r = i * per_item, end = std::min(rows, r + per_item); r < end; ++r) row(r);
    };
  };
  // One helper fewer than the pool's threads: the calling thread works too.
  const int64_t helpers = std::min<int64_t>(std::max<int64_t>(pool.num_threads() - 1, 0), items - 1);
  run_items(pool, items, helpers > 0 ? (items + helpers - 1) / helpers : items + 1, make_worker);
}

// The [rows, n] of a rank-2 buffer, or an error naming the kernel.
ffi::Error matrix(const char* kernel, ffi::Span<const int64_t> d, int64_t& rows, int64_t& n) {
  if (d.size() != 2) return ffi::Error::InvalidArgument(std::string(kernel) + ": expected rank-2 [rows, classes] f32");
  rows = d[0], n = d[1];
  return ffi::Error::Success();
}

ffi::Error LogSoftmax(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> x, ffi::ResultBuffer<ffi::F32> out) {
  int64_t rows, n;
  if (ffi::Error e = matrix("log_softmax", x.dimensions(), rows, n); e.failure()) return e;
  if (out->dimensions().size() != 2 || out->dimensions()[0] != rows || out->dimensions()[1] != n)
    return ffi::Error::InvalidArgument("log_softmax: the result's shape is not the input's");
  const float* xs = x.typed_data();
  float* ys = out->typed_data();
  over_rows(pool, rows, n, [&](int64_t r) { forward_row(xs + r * n, ys + r * n, n); });
  return ffi::Error::Success();
}

ffi::Error LogSoftmaxBackward(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> grad, ffi::Buffer<ffi::F32> y,
                              ffi::ResultBuffer<ffi::F32> out) {
  int64_t rows, n;
  if (ffi::Error e = matrix("log_softmax_backward", grad.dimensions(), rows, n); e.failure()) return e;
  auto same = [&](ffi::Span<const int64_t> d) { return d.size() == 2 && d[0] == rows && d[1] == n; };
  if (!same(y.dimensions()) || !same(out->dimensions()))
    return ffi::Error::InvalidArgument("log_softmax_backward: the gradient, output and result shapes differ");
  const float *gs = grad.typed_data(), *ys = y.typed_data();
  float* os = out->typed_data();
  over_rows(pool, rows, n, [&](int64_t r) { backward_row(gs + r * n, ys + r * n, os + r * n, n); });
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(torch_tpu_log_softmax_host, LogSoftmax,
                              ffi::Ffi::Bind().Ctx<ffi::ThreadPool>().Arg<ffi::Buffer<ffi::F32>>().Ret<ffi::Buffer<ffi::F32>>());

XLA_FFI_DEFINE_HANDLER_SYMBOL(torch_tpu_log_softmax_backward_host, LogSoftmaxBackward,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>());

}  // namespace torch_tpu::kernels
