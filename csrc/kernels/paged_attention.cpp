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
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/parallel.h"
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

// A slot's row of one KV head, as float: in place for an f32 cache, else
// converted into `scratch`.
struct CacheReader {
  const void* data;
  ffi::DataType type;

  const float* row(int64_t element, int64_t n, float* scratch) const {
    if (type == ffi::DataType::F32) return static_cast<const float*>(data) + element;
    const uint16_t* p = static_cast<const uint16_t*>(data) + element;
    bool bf16 = type == ffi::DataType::BF16;
    for (int64_t i = 0; i < n; ++i) scratch[i] = load(p + i, bf16);
    return scratch;
  }
};

// Eight partial sums, one a lane: the loop vectorizes without reassociating
// a single sum, at any vector width the target has.
float dot(const float* a, const float* b, int64_t n) {
  constexpr int64_t kLanes = 8;
  float part[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) part[l] += a[i + l] * b[i + l];
  float s = 0;
  for (; i < n; ++i) s += a[i] * b[i];
  for (int64_t l = 0; l < kLanes; ++l) s += part[l];
  return s;
}

struct Problem {
  int64_t T, H, D, slots, Hkv, G, R, C, LB;
  int64_t block_size, window;
  float scale, soft_cap;
  const float* q;
  const int64_t *blocks, *qidx, *qpos;
  CacheReader keys, values;
  float* results;  // [R * C, H, D]
};

// Calls visit(j, element) for the keys at positions first..last of a query
// row's sequence, in order, `element` the offset of key j's row of KV head
// `kvh` in the cache: block by block, one block-table read per block.
template <typename Visit>
void for_each_key(const Problem& p, const int64_t* row_blocks, int64_t kvh, int64_t first, int64_t last,
                  Visit&& visit) {
  const int64_t bs = p.block_size, row = p.Hkv * p.D;
  for (int64_t b = first / bs; b <= last / bs; ++b) {
    const int64_t begin = std::max(first, b * bs), end = std::min(last, b * bs + bs - 1);
    int64_t element = ((row_blocks[b] * bs + begin - b * bs) * p.Hkv + kvh) * p.D;
    for (int64_t j = begin; j <= end; ++j, element += row) visit(j, element);
  }
}

// One (query slot, KV head): the G query heads that share the KV head read
// its keys and values once. Two passes: scores (kept for the slot's keys
// alone), then the softmax-weighted values, normalized once at the end.
// `scores` and `scratch` are the calling thread's.
void attend(const Problem& p, int64_t s, int64_t kvh, std::vector<float>& scores, std::vector<float>& scratch) {
  const int64_t pos = p.qpos[s], token = p.qidx[s], D = p.D, G = p.G;
  const int64_t first = p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : 0, n = pos + 1 - first;
  const int64_t* row_blocks = p.blocks + (s / p.C) * p.LB;
  scores.resize(G * (n + 1));
  scratch.resize(D);
  float* top = scores.data() + G * n;  // each head's largest score
  std::fill(top, top + G, -INFINITY);
  const float* q = p.q + (token * p.H + kvh * G) * D;
  for_each_key(p, row_blocks, kvh, first, pos, [&](int64_t j, int64_t element) {
    const float* k = p.keys.row(element, D, scratch.data());
    for (int64_t g = 0; g < G; ++g) {
      float x = dot(q + g * D, k, D) * p.scale;
      if (p.soft_cap > 0) x = std::tanh(x / p.soft_cap) * p.soft_cap;
      scores[g * n + j - first] = x;
      top[g] = std::max(top[g], x);
    }
  });
  float* out = p.results + (s * p.H + kvh * G) * D;
  for (int64_t g = 0; g < G; ++g) {
    float* w = scores.data() + g * n;
    const float m = top[g];
    for (int64_t j = 0; j < n; ++j) w[j] = std::exp(w[j] - m);
    std::fill(out + g * D, out + (g + 1) * D, 0.0f);
  }
  for_each_key(p, row_blocks, kvh, first, pos, [&](int64_t j, int64_t element) {
    const float* v = p.values.row(element, D, scratch.data());
    for (int64_t g = 0; g < G; ++g) {
      const float w = scores[g * n + j - first];
      float* o = out + g * D;
#pragma omp simd
      for (int64_t i = 0; i < D; ++i) o[i] += w * v[i];
    }
  });
  for (int64_t g = 0; g < G; ++g) {
    const float* w = scores.data() + g * n;
    float total = 0;
    for (int64_t j = 0; j < n; ++j) total += w[j];
    const float inverse = 1.0f / total;
    float* o = out + g * D;
#pragma omp simd
    for (int64_t i = 0; i < D; ++i) o[i] *= inverse;
  }
}

ffi::Error PagedAttention(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> query, ffi::AnyBuffer cache,
                          ffi::Buffer<ffi::S64> key_blocks, ffi::Buffer<ffi::S64> query_index,
                          ffi::Buffer<ffi::S64> query_pos, ffi::Buffer<ffi::S64> output_index,
                          ffi::ResultBuffer<ffi::F32> out, float scale, float soft_cap, int64_t window,
                          int64_t block_size) {
  auto qd = query.dimensions();
  auto cd = cache.dimensions();
  auto pd = query_pos.dimensions();
  if (qd.size() != 3 || cd.size() != 4 || cd[0] != 2 || pd.size() != 2 || block_size <= 0)
    return ffi::Error::InvalidArgument("paged_attention: expected query [T, H, D], cache [2, slots, Hkv, D], "
                                       "query_pos [R, C] and a positive block_size");
  ffi::DataType ct = cache.element_type();
  if (ct != ffi::DataType::F32 && ct != ffi::DataType::BF16 && ct != ffi::DataType::F16)
    return ffi::Error::InvalidArgument("paged_attention: the cache must be f32, bf16 or f16");
  Problem p;
  p.T = qd[0], p.H = qd[1], p.D = qd[2], p.slots = cd[1], p.Hkv = cd[2], p.R = pd[0], p.C = pd[1];
  if (cd[3] != p.D || p.Hkv <= 0 || p.H % p.Hkv != 0 || p.R <= 0 || key_blocks.element_count() % p.R != 0 ||
      int64_t(query_index.element_count()) != p.R * p.C || int64_t(output_index.element_count()) != p.T)
    return ffi::Error::InvalidArgument("paged_attention: inconsistent shapes");
  p.G = p.H / p.Hkv, p.LB = key_blocks.element_count() / p.R;
  p.block_size = block_size, p.window = window, p.scale = scale, p.soft_cap = soft_cap;
  p.q = query.typed_data();
  p.blocks = key_blocks.typed_data(), p.qidx = query_index.typed_data(), p.qpos = query_pos.typed_data();
  size_t esize = ct == ffi::DataType::F32 ? 4 : 2;
  p.keys = {cache.untyped_data(), ct};
  p.values = {static_cast<const char*>(cache.untyped_data()) + p.slots * p.Hkv * p.D * esize, ct};

  // The slots with a query, checked before any work: padding slots are read by no token.
  std::vector<int64_t> live;
  const int64_t L = p.LB * block_size;
  for (int64_t s = 0; s < p.R * p.C; ++s) {
    if (p.qpos[s] < 0) continue;
    if (p.qidx[s] < 0 || p.qidx[s] >= p.T || p.qpos[s] >= L)
      return ffi::Error::InvalidArgument("paged_attention: a query slot outside the step's tokens or keys");
    live.push_back(s);
  }
  for (int64_t b = 0; b < p.R * p.LB; ++b)
    if (p.blocks[b] < 0 || (p.blocks[b] + 1) * block_size > p.slots)
      return ffi::Error::InvalidArgument("paged_attention: a block outside the cache");

  std::vector<float> results(p.R * p.C * p.H * p.D, 0.0f);
  p.results = results.data();
  // Items are (query slot, KV head); each thread keeps its own scratch rows.
  auto make_worker = [&p, &live] {
    return [&p, &live, scores = std::vector<float>(), scratch = std::vector<float>()](int64_t i) mutable {
      attend(p, live[i / p.Hkv], i % p.Hkv, scores, scratch);
    };
  };
  run_items(pool, int64_t(live.size()) * p.Hkv, /*per_helper=*/8, make_worker);

  float* o = out->typed_data();
  for (int64_t t = 0; t < p.T; ++t) {
    int64_t s = output_index.typed_data()[t];
    if (s < 0 || s >= p.R * p.C)
      return ffi::Error::InvalidArgument("paged_attention: an output slot outside the rows");
    std::memcpy(o + t * p.H * p.D, &results[s * p.H * p.D], p.H * p.D * sizeof(float));
  }
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(torch_tpu_paged_attention_host, PagedAttention,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
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
