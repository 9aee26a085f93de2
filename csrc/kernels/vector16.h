// Sixteen floats as GCC's vector extension, for the kernels' block loops: a
// loop's accumulators declared as V16 stay in registers in each target
// clone's instruction set (vector_exp.h's TORCH_TPU_VECTOR_CLONES), which
// plain arrays under `omp simd` did not always. Loads and stores are
// unaligned; the helpers are always inlined so that each clone gets its own.
#pragma once

namespace torch_tpu::kernels {

typedef float V16 __attribute__((vector_size(64), aligned(4)));

__attribute__((always_inline)) inline V16 load16(const float* p) { return *reinterpret_cast<const V16*>(p); }
__attribute__((always_inline)) inline void store16(float* p, V16 v) { *reinterpret_cast<V16*>(p) = v; }

}  // namespace torch_tpu::kernels
