// exp in f32 for the kernels' vectorized loops (OpenMP simd): glibc's expf
// is a call that stops GCC vectorizing the loop it is in (its vector forms
// need -ffast-math), so the kernels evaluate their own: 2^n times a degree-6
// polynomial on [-ln2/2, ln2/2], about 1 ulp. And the target clones that
// build each hot loop for AVX-512, AVX2 and any x86-64, chosen at load: the
// plugin's own code is compiled for the host's vector units, ours for any
// x86-64.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TORCH_TPU_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define TORCH_TPU_VECTOR_CLONES
#endif

namespace torch_tpu::kernels {

// exp(c) = p * 2^n, p a degree-6 polynomial of c's remainder r in
// [-ln2/2, ln2/2] (ln2 split in two parts for an exact r).
struct ExpParts {
  float p;
  int32_t n;
};

__attribute__((always_inline)) inline ExpParts exp_parts(float c) {
  const float n = std::nearbyint(c * 1.44269504088896341f);
  const float r = (c - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  return {p, static_cast<int32_t>(n)};
}

// 2^n as an f32, n in [-126, 127].
__attribute__((always_inline)) inline float pow2(int32_t n) {
  const int32_t bits = (n + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return scale;
}

// exp(v) for v in [-87, 88.75]: 2^n as 2^(n - k) * 2^k, k = 1 for n = 128
// only, so that the scale stays a normal f32 and a result past f32's range
// overflows to inf as expf's does.
__attribute__((always_inline)) inline float exp_in_range(float v) {
  const ExpParts e = exp_parts(v);
  const int32_t k = e.n > 127 ? 1 : 0;
  return e.p * pow2(e.n - k) * (k ? 2.0f : 1.0f);
}

// exp(v) for any v: 0 below -87 (where f32's subnormals start: flushed),
// inf past f32's range, NaN for NaN.
__attribute__((always_inline)) inline float exp_any(float v) {
  const float e = exp_in_range(std::min(88.75f, std::max(-87.0f, v)));  // NaN: clamped to -87, then discarded
  return v < -87.0f ? 0.0f : v > 88.75f ? INFINITY : v == v ? e : v;
}

}  // namespace torch_tpu::kernels
