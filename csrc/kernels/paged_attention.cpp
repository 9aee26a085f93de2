// Paged attention as an XLA FFI handler for XLA's CPU plugin: each query
// reads its sequence's keys and values straight from the KV cache's blocks,
// through the block table, and only the keys it may attend to (causal, and
// windowed for sliding-window layers) -- no gathered copies, no padding to the
// longest sequence, and no score tensor beyond one row of keys.
//
// The arguments are those of the vLLM backend's composite computation
// (integrations/vllm/attention.py), which stays the fallback and the
// reference: queries [T, H, D] f32; the cache [2, slots, Hkv, D] (keys, then
// values; f32, bf16 or f16); per query row r of C slots, its key blocks
// key_blocks[r * LB + j]; the token feeding each query slot (query_index
// [R * C]) and its position (query_pos [R, C], -1 for padding); the slot
// holding each token's output (output_index [T]). The result is [T, H, D] f32:
// token t gets the output of its slot, as the composite's final gather gives.
// Scores are q.k * scale, soft-capped (cap * tanh(s / cap)) when soft_cap > 0,
// over keys at positions <= the query's (and > position - window when
// window > 0); a softmax in f32 weighs the values.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/kernels.h"
#include "xla/ffi/api/ffi.h"

namespace torch_tpu::kernels {

namespace {

namespace ffi = xla::ffi;

float load(const uint16_t* p, bool bf16) {
  if (bf16) {
    uint32_t bits = uint32_t(*p) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  // IEEE half to float.
  uint16_t h = *p;
  uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      exp = 127 - 15 + 1;
      while (!(man & 0x400)) man <<= 1, --exp;
      bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000 | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// One head's row of keys (or values) as float, whatever the cache's type.
struct CacheReader {
  const void* data;
  ffi::DataType type;
  int64_t row;  // elements per slot: Hkv * D

  void read(int64_t element, int64_t n, float* out) const {
    if (type == ffi::DataType::F32) {
      std::memcpy(out, static_cast<const float*>(data) + element, n * sizeof(float));
      return;
    }
    const uint16_t* p = static_cast<const uint16_t*>(data) + element;
    bool bf16 = type == ffi::DataType::BF16;
    for (int64_t i = 0; i < n; ++i) out[i] = load(p + i, bf16);
  }
};

float dot(const float* a, const float* b, int64_t n) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

ffi::Error PagedAttention(ffi::Buffer<ffi::F32> query, ffi::AnyBuffer cache, ffi::Buffer<ffi::S64> key_blocks,
                          ffi::Buffer<ffi::S64> query_index, ffi::Buffer<ffi::S64> query_pos,
                          ffi::Buffer<ffi::S64> output_index, ffi::ResultBuffer<ffi::F32> out, float scale,
                          float soft_cap, int64_t window, int64_t block_size) {
  auto qd = query.dimensions();
  auto cd = cache.dimensions();
  auto pd = query_pos.dimensions();
  if (qd.size() != 3 || cd.size() != 4 || cd[0] != 2 || pd.size() != 2 || block_size <= 0)
    return ffi::Error::InvalidArgument("paged_attention: expected query [T, H, D], cache [2, slots, Hkv, D], "
                                       "query_pos [R, C] and a positive block_size");
  ffi::DataType ct = cache.element_type();
  if (ct != ffi::DataType::F32 && ct != ffi::DataType::BF16 && ct != ffi::DataType::F16)
    return ffi::Error::InvalidArgument("paged_attention: the cache must be f32, bf16 or f16");
  const int64_t T = qd[0], H = qd[1], D = qd[2], slots = cd[1], Hkv = cd[2];
  const int64_t R = pd[0], C = pd[1];
  if (cd[3] != D || Hkv <= 0 || H % Hkv != 0 || R <= 0 || key_blocks.element_count() % R != 0 ||
      int64_t(query_index.element_count()) != R * C || int64_t(output_index.element_count()) != T)
    return ffi::Error::InvalidArgument("paged_attention: inconsistent shapes");
  const int64_t G = H / Hkv, LB = key_blocks.element_count() / R, L = LB * block_size;
  const int64_t* blocks = key_blocks.typed_data();
  const int64_t* qidx = query_index.typed_data();
  const int64_t* qpos = query_pos.typed_data();
  const int64_t* oidx = output_index.typed_data();
  const float* q = query.typed_data();
  CacheReader keys{cache.untyped_data(), ct, Hkv * D};
  size_t esize = ct == ffi::DataType::F32 ? 4 : 2;
  CacheReader values{static_cast<const char*>(cache.untyped_data()) + slots * Hkv * D * esize, ct, Hkv * D};

  std::vector<float> results(R * C * H * D, 0.0f), scores(L), k(D), v(D), acc(D);
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t c = 0; c < C; ++c) {
      int64_t s = r * C + c, pos = qpos[s];
      if (pos < 0) continue;  // a padding slot: no token reads it
      int64_t token = qidx[s];
      if (token < 0 || token >= T || pos >= L)
        return ffi::Error::InvalidArgument("paged_attention: a query slot outside the step's tokens or keys");
      int64_t first = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
      for (int64_t h = 0; h < H; ++h) {
        const float* qh = q + (token * H + h) * D;
        int64_t kvh = h / G;
        float top = -INFINITY;
        for (int64_t j = first; j <= pos; ++j) {
          int64_t slot = blocks[r * LB + j / block_size] * block_size + j % block_size;
          if (slot < 0 || slot >= slots) return ffi::Error::InvalidArgument("paged_attention: a block outside the cache");
          keys.read((slot * Hkv + kvh) * D, D, k.data());
          float x = dot(qh, k.data(), D) * scale;
          if (soft_cap > 0) x = std::tanh(x / soft_cap) * soft_cap;
          scores[j] = x;
          top = std::max(top, x);
        }
        float total = 0;
        for (int64_t j = first; j <= pos; ++j) total += (scores[j] = std::exp(scores[j] - top));
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t j = first; j <= pos; ++j) {
          int64_t slot = blocks[r * LB + j / block_size] * block_size + j % block_size;
          values.read((slot * Hkv + kvh) * D, D, v.data());
          float p = scores[j] / total;
#pragma omp simd
          for (int64_t i = 0; i < D; ++i) acc[i] += p * v[i];
        }
        std::memcpy(&results[(s * H + h) * D], acc.data(), D * sizeof(float));
      }
    }
  }
  float* o = out->typed_data();
  for (int64_t t = 0; t < T; ++t) {
    int64_t s = oidx[t];
    if (s < 0 || s >= R * C) return ffi::Error::InvalidArgument("paged_attention: an output slot outside the rows");
    std::memcpy(o + t * H * D, &results[s * H * D], H * D * sizeof(float));
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(torch_tpu_paged_attention_host, PagedAttention,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Arg<ffi::Buffer<ffi::S64>>()
                                  .Arg<ffi::Buffer<ffi::S64>>()
                                  .Arg<ffi::Buffer<ffi::S64>>()
                                  .Arg<ffi::Buffer<ffi::S64>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<float>("scale")
                                  .Attr<float>("soft_cap")
                                  .Attr<int64_t>("window")
                                  .Attr<int64_t>("block_size"));

}  // namespace torch_tpu::kernels
