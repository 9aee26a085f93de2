// Sums of blocks of 16 consecutive rows, as an XLA FFI handler for XLA's CPU
// plugin: x, f32, seen as [rows, columns] (columns = its elements / rows),
// gives out [ceil(rows / 16), columns], each a sequential sum of its block's
// rows (PyTorch's CPU sum adds its first level the same way). The lowering
// passes the summed tensor in its own shape, so XLA materializes it once for
// all its users instead of fusing its producer into a reshape for this call.
#include <algorithm>
#include <cstdint>

#include "kernels/kernels.h"
#include "kernels/parallel.h"
#include "kernels/vector16.h"
#include "kernels/vector_exp.h"
#include "xla/ffi/api/ffi.h"

namespace torch_tpu::kernels {

namespace ffi = xla::ffi;

namespace {

constexpr int64_t kBlock = kBlockSumRows, kColumnChunk = 1024;

// dst[c0:c1] = the sum of rows r0..r1-1 of `in` in order, 64 columns at a
// time held in four V16 (vector16.h) across the rows: one load per row and
// column, and each column's additions in the same order as one by one.
TORCH_TPU_VECTOR_CLONES
void sum_rows(const float* in, int64_t columns, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* dst) {
  int64_t c = c0;
  for (; c + 64 <= c1; c += 64) {
    const float* x = in + r0 * columns + c;
    V16 a0 = load16(x), a1 = load16(x + 16), a2 = load16(x + 32), a3 = load16(x + 48);
    for (int64_t r = r0 + 1; r < r1; ++r) {
      x += columns;
      a0 += load16(x), a1 += load16(x + 16), a2 += load16(x + 32), a3 += load16(x + 48);
    }
    store16(dst + c, a0), store16(dst + c + 16, a1), store16(dst + c + 32, a2), store16(dst + c + 48, a3);
  }
  for (; c < c1; ++c) {
    float a = in[r0 * columns + c];
    for (int64_t r = r0 + 1; r < r1; ++r) a += in[r * columns + c];
    dst[c] = a;
  }
}

ffi::Error BlockSum(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> x, ffi::ResultBuffer<ffi::F32> out, int64_t rows) {
  const int64_t n = int64_t(x.element_count());
  if (rows <= 0 || n % rows != 0) return ffi::Error::InvalidArgument("block_sum: rows must divide the elements");
  const int64_t columns = n / rows, blocks = (rows + kBlock - 1) / kBlock;
  if (int64_t(out->element_count()) != blocks * columns)
    return ffi::Error::InvalidArgument("block_sum: the result must hold ceil(rows / 16) x columns");
  const float* in = x.typed_data();
  float* o = out->typed_data();
  const int64_t chunks = (columns + kColumnChunk - 1) / kColumnChunk, items = blocks * chunks;
  auto make_worker = [&] {
    return [&](int64_t i) {
      const int64_t b = i / chunks, c0 = (i % chunks) * kColumnChunk, c1 = std::min(columns, c0 + kColumnChunk);
      const int64_t r0 = b * kBlock, r1 = std::min(rows, r0 + kBlock);
      sum_rows(in, columns, r0, r1, c0, c1, o + b * columns);
    };
  };
  run_items(pool, items, 8, make_worker);
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(torch_tpu_block_sum_host, BlockSum,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<int64_t>("rows"));

}  // namespace torch_tpu::kernels
