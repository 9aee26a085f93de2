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
//
// The loops are GCC vector code built for AVX-512, AVX2 and any x86-64
// (vector_exp.h's clones): scores eight keys at a time, each key's 16 lane
// sums folded by a tree of shuffles; values added into accumulators held in
// registers, a cache block at a time. Items are a slot's KV heads together,
// so a block's rows are read whole and in order, where there are slots enough
// for the threads; a KV head an item otherwise.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/parallel.h"
#include "kernels/vector16.h"
#include "kernels/vector_exp.h"
#include "xla/ffi/api/ffi.h"

// The vector helpers below are inlined into each clone; GCC's note that a
// 64-byte vector's calling convention depends on the target is moot for them.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace torch_tpu::kernels {

namespace {

namespace ffi = xla::ffi;

// Halves and quarters of a V16 (vector16.h), for its lane sums.
typedef float V8 __attribute__((vector_size(32), aligned(4)));
typedef float V4 __attribute__((vector_size(16), aligned(4)));

__attribute__((always_inline)) inline float sum16(V16 a) {
  const V8 b = __builtin_shufflevector(a, a, 0, 1, 2, 3, 4, 5, 6, 7) +
               __builtin_shufflevector(a, a, 8, 9, 10, 11, 12, 13, 14, 15);
  const V4 c = __builtin_shufflevector(b, b, 0, 1, 2, 3) + __builtin_shufflevector(b, b, 4, 5, 6, 7);
  return (c[0] + c[2]) + (c[1] + c[3]);
}

float bf16_to_float(uint16_t h) {
  const uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// n cache elements from `element` on, as float: in place for an f32 cache,
// else converted into `scratch` (GCC's _Float16 converts as IEEE says, with
// the F16C instructions in the clones that have them).
struct CacheReader {
  const void* data;
  ffi::DataType type;

  const float* rows(int64_t element, int64_t n, float* scratch) const;
};

TORCH_TPU_VECTOR_CLONES
void bf16_rows(const uint16_t* p, int64_t n, float* out) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_float(p[i]);
}

TORCH_TPU_VECTOR_CLONES
void f16_rows(const _Float16* p, int64_t n, float* out) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(p[i]);
}

const float* CacheReader::rows(int64_t element, int64_t n, float* scratch) const {
  if (type == ffi::DataType::F32) return static_cast<const float*>(data) + element;
  if (type == ffi::DataType::BF16)
    bf16_rows(static_cast<const uint16_t*>(data) + element, n, scratch);
  else
    f16_rows(static_cast<const _Float16*>(data) + element, n, scratch);
  return scratch;
}

// The sums of eight vectors' lanes: a transposing tree of two-vector
// shuffles (each level halves the partial sums a key has).
__attribute__((always_inline)) inline V8 sum8x16(const V16* a) {
  V16 b[4], c[2];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i)
    b[i] = __builtin_shufflevector(a[2 * i], a[2 * i + 1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
           __builtin_shufflevector(a[2 * i], a[2 * i + 1], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30,
                                   31);
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i)
    c[i] = __builtin_shufflevector(b[2 * i], b[2 * i + 1], 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27) +
           __builtin_shufflevector(b[2 * i], b[2 * i + 1], 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
  const V16 d = __builtin_shufflevector(c[0], c[1], 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29) +
                __builtin_shufflevector(c[0], c[1], 2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31);
  return __builtin_shufflevector(d, d, 0, 2, 4, 6, 8, 10, 12, 14) +
         __builtin_shufflevector(d, d, 1, 3, 5, 7, 9, 11, 13, 15);
}

// s[j] = scale * q . k_j for K keys (rows of k, `stride` apart), D a multiple
// of 16 (the caller adds the rest).
template <int K>
__attribute__((always_inline)) inline void dots(const float* q, int64_t D16, const float* k, int64_t stride, float* s) {
  V16 a[K] = {};
  for (int64_t e = 0; e < D16; e += 16) {
    const V16 x = load16(q + e);
#pragma GCC unroll 8
    for (int j = 0; j < K; ++j) a[j] += x * load16(k + j * stride + e);
  }
  if constexpr (K == 8) {
    const V8 t = sum8x16(a);
#pragma GCC unroll 8
    for (int j = 0; j < K; ++j) s[j] = t[j];
  } else {
    s[0] = sum16(a[0]);
  }
}

// s[g * ld + j] = scale * q_g . k_j for the G query heads of a KV head (rows
// of q, D apart) and nb keys (rows of k, `stride` apart): eight keys at a time.
TORCH_TPU_VECTOR_CLONES
void block_scores(const float* q, int64_t G, int64_t D, const float* k, int64_t stride, int64_t nb, float scale,
                  float* s, int64_t ld) {
  const int64_t D16 = D - D % 16;
  for (int64_t g = 0; g < G; ++g) {
    const float* qg = q + g * D;
    float* sg = s + g * ld;
    int64_t j = 0;
    for (; j + 8 <= nb; j += 8) dots<8>(qg, D16, k + j * stride, stride, sg + j);
    for (; j < nb; ++j) dots<1>(qg, D16, k + j * stride, stride, sg + j);
    for (j = 0; j < nb; ++j) {
      float x = sg[j];
      for (int64_t e = D16; e < D; ++e) x += qg[e] * k[j * stride + e];
      sg[j] = x * scale;
    }
  }
}

// acc[g][e0 : e0 + 16 NV] += sum_j w[g * ld + j] * v_j[e0 : e0 + 16 NV] for R
// heads, which share each load of a value row.
template <int R, int NV>
__attribute__((always_inline)) inline void weighted_block(const float* w, int64_t ld, const float* v, int64_t stride,
                                                          int64_t nb, int64_t D, float* acc, int64_t e0) {
  V16 a[R][NV];
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int c = 0; c < NV; ++c) a[i][c] = load16(acc + i * D + e0 + 16 * c);
  for (int64_t j = 0; j < nb; ++j) {
    const float* vj = v + j * stride + e0;
    V16 x[NV];
#pragma GCC unroll 4
    for (int c = 0; c < NV; ++c) x[c] = load16(vj + 16 * c);
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) {
      const float wv = w[i * ld + j];
#pragma GCC unroll 4
      for (int c = 0; c < NV; ++c) a[i][c] += wv * x[c];
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int c = 0; c < NV; ++c) store16(acc + i * D + e0 + 16 * c, a[i][c]);
}

template <int NV>
__attribute__((always_inline)) inline void weighted_columns(const float* w, int64_t ld, int64_t G, const float* v,
                                                            int64_t stride, int64_t nb, int64_t D, float* acc,
                                                            int64_t e0) {
  int64_t g = 0;
  for (; g + 4 <= G; g += 4) weighted_block<4, NV>(w + g * ld, ld, v, stride, nb, D, acc + g * D, e0);
  for (; g + 2 <= G; g += 2) weighted_block<2, NV>(w + g * ld, ld, v, stride, nb, D, acc + g * D, e0);
  for (; g < G; ++g) weighted_block<1, NV>(w + g * ld, ld, v, stride, nb, D, acc + g * D, e0);
}

// acc[g][:] += sum_j w[g * ld + j] * v_j[:] for G heads (rows of acc, D
// apart) and nb values (rows of v, `stride` apart): 64 columns at a time,
// then 16, then one.
TORCH_TPU_VECTOR_CLONES
void add_weighted_values(const float* w, int64_t ld, int64_t G, const float* v, int64_t stride, int64_t nb,
                         int64_t D, float* acc) {
  int64_t e0 = 0;
  for (; e0 + 64 <= D; e0 += 64) weighted_columns<4>(w, ld, G, v, stride, nb, D, acc, e0);
  for (; e0 + 16 <= D; e0 += 16) weighted_columns<1>(w, ld, G, v, stride, nb, D, acc, e0);
  for (; e0 < D; ++e0)
    for (int64_t g = 0; g < G; ++g) {
      float a = acc[g * D + e0];
      for (int64_t j = 0; j < nb; ++j) a += w[g * ld + j] * v[j * stride + e0];
      acc[g * D + e0] = a;
    }
}

// A head's n scores become exp(score - max), soft-capped first when
// cap > 0; returns their sum.
TORCH_TPU_VECTOR_CLONES
float softmax_weights(float* w, int64_t n, float cap) {
  if (cap > 0)
    for (int64_t j = 0; j < n; ++j) w[j] = std::tanh(w[j] / cap) * cap;
  // The max in a vector (GCC does not vectorize a max reduction of floats).
  V16 top16 = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY,
               -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const V16 x = load16(w + j);
    top16 = x > top16 ? x : top16;
  }
  float top = -INFINITY;
  for (int l = 0; l < 16; ++l) top = std::max(top, top16[l]);
  for (; j < n; ++j) top = std::max(top, w[j]);
#pragma omp simd
  for (j = 0; j < n; ++j) w[j] = exp_any(w[j] - top);
  float total = 0;
#pragma omp simd reduction(+ : total)
  for (j = 0; j < n; ++j) total += w[j];
  return total;
}

// o[:] = acc[:] * factor over n.
TORCH_TPU_VECTOR_CLONES
void scaled_copy(const float* acc, int64_t n, float factor, float* o) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) o[i] = acc[i] * factor;
}

// Threading (parallel.h's run_items): a helper thread per kItemsPerHelper
// items; slots' KV heads split into items of their own under kSlotsPerThread
// slots a thread.
constexpr int64_t kItemsPerHelper = 8;
constexpr int64_t kSlotsPerThread = 4;

struct Problem {
  int64_t T, H, D, slots, Hkv, G, R, C, LB;
  int64_t block_size, window;
  float scale, soft_cap;
  const float* q;
  const int64_t *blocks, *qidx, *qpos;
  CacheReader keys, values;
};

// One item: a query slot and KV heads kv0..kv1-1.
struct Item {
  int64_t slot, kv0, kv1;
};

// The calling thread's scratch: scores [heads, n], accumulators [heads, D],
// a block's rows converted to f32.
struct Scratch {
  std::vector<float> scores, acc, rows, totals;
};

// Calls visit(j, nb, element) for the keys at positions first..last of a
// query row's sequence, block by block: keys j..j+nb-1 counted from `first`,
// `element` the offset of the first one's row in the cache (its KV head 0).
template <typename Visit>
void for_each_block(const Problem& p, const int64_t* row_blocks, int64_t first, int64_t last, Visit&& visit) {
  const int64_t bs = p.block_size;
  for (int64_t b = first / bs; b <= last / bs; ++b) {
    const int64_t begin = std::max(first, b * bs), end = std::min(last, b * bs + bs - 1);
    visit(begin - first, end - begin + 1, (row_blocks[b] * bs + begin - b * bs) * p.Hkv * p.D);
  }
}

// One item into its output rows `out` (its slot's token's [H, D], at its
// first head): the G query heads of each KV head read its keys and values
// once, a cache block's rows at a time. Two passes: scores (kept for the
// slot's keys alone), then the softmax-weighted values, normalized at the end.
void attend(const Problem& p, const Item& item, float* out, Scratch& w) {
  const int64_t s = item.slot, pos = p.qpos[s], D = p.D, G = p.G;
  const int64_t first = p.window > 0 ? std::max<int64_t>(0, pos - p.window + 1) : 0, n = pos + 1 - first;
  const int64_t heads = (item.kv1 - item.kv0) * G, width = (item.kv1 - item.kv0) * D;
  const int64_t* row_blocks = p.blocks + (s / p.C) * p.LB;
  // In the cache a key's KV heads are Hkv * D apart; converted, width apart.
  const int64_t stride = p.keys.type == ffi::DataType::F32 ? p.Hkv * D : width;
  w.scores.resize(heads * n);
  w.acc.assign(heads * D, 0.0f);
  if (p.keys.type != ffi::DataType::F32) w.rows.resize(p.block_size * width);
  const float* q = p.q + (p.qidx[s] * p.H + item.kv0 * G) * D;
  // The converted rows of a block: the item's KV heads of each key.
  auto block_rows = [&](const CacheReader& cache, int64_t element, int64_t nb) {
    if (cache.type == ffi::DataType::F32 || width == p.Hkv * D)
      return cache.rows(element + item.kv0 * D, nb * p.Hkv * D - item.kv0 * D, w.rows.data());
    for (int64_t j = 0; j < nb; ++j) cache.rows(element + j * p.Hkv * D + item.kv0 * D, width, &w.rows[j * width]);
    return static_cast<const float*>(w.rows.data());
  };
  for_each_block(p, row_blocks, first, pos, [&](int64_t j, int64_t nb, int64_t element) {
    const float* k = block_rows(p.keys, element, nb);
    for (int64_t h = 0; h < item.kv1 - item.kv0; ++h)
      block_scores(q + h * G * D, G, D, k + h * D, stride, nb, p.scale, &w.scores[h * G * n + j], n);
  });
  w.totals.resize(heads);
  for (int64_t h = 0; h < heads; ++h) w.totals[h] = softmax_weights(&w.scores[h * n], n, p.soft_cap);
  for_each_block(p, row_blocks, first, pos, [&](int64_t j, int64_t nb, int64_t element) {
    const float* v = block_rows(p.values, element, nb);
    for (int64_t h = 0; h < item.kv1 - item.kv0; ++h)
      add_weighted_values(&w.scores[h * G * n + j], n, G, v + h * D, stride, nb, D, &w.acc[h * G * D]);
  });
  for (int64_t h = 0; h < heads; ++h) scaled_copy(&w.acc[h * D], D, 1.0f / w.totals[h], out + h * D);
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

  // The slots with a query, checked before any work.
  const int64_t L = p.LB * block_size, S = p.R * p.C;
  for (int64_t s = 0; s < S; ++s)
    if (p.qpos[s] >= 0 && (p.qidx[s] < 0 || p.qidx[s] >= p.T || p.qpos[s] >= L))
      return ffi::Error::InvalidArgument("paged_attention: a query slot outside the step's tokens or keys");
  for (int64_t b = 0; b < p.R * p.LB; ++b)
    if (p.blocks[b] < 0 || (p.blocks[b] + 1) * block_size > p.slots)
      return ffi::Error::InvalidArgument("paged_attention: a block outside the cache");
  // Each slot's result goes straight to the first token that reads it
  // (`reader`); other tokens of the slot copy it after, and a token of a
  // padding slot gets zeros. Slots no token reads are not computed.
  const int64_t* output = output_index.typed_data();
  std::vector<int64_t> reader(S, -1);
  for (int64_t t = 0; t < p.T; ++t) {
    if (output[t] < 0 || output[t] >= S)
      return ffi::Error::InvalidArgument("paged_attention: an output slot outside the rows");
    if (reader[output[t]] < 0) reader[output[t]] = t;
  }
  // Items: a slot's KV heads together (its keys' rows read whole, in order)
  // where there are slots enough to share among the threads, else a KV head
  // an item.
  std::vector<int64_t> live;
  for (int64_t s = 0; s < S; ++s)
    if (p.qpos[s] >= 0 && reader[s] >= 0) live.push_back(s);
  const int64_t parts = int64_t(live.size()) >= kSlotsPerThread * (pool.num_threads() + 1) ? 1 : p.Hkv;
  float* o = out->typed_data();
  const int64_t row = p.H * p.D;
  auto make_worker = [&] {
    return [&, scratch = Scratch()](int64_t i) mutable {
      const int64_t s = live[i / parts], kv0 = i % parts * (p.Hkv / parts), kv1 = kv0 + p.Hkv / parts;
      attend(p, {s, kv0, kv1}, o + reader[s] * row + kv0 * p.G * p.D, scratch);
    };
  };
  run_items(pool, int64_t(live.size()) * parts, /*per_helper=*/kItemsPerHelper, make_worker);

  for (int64_t t = 0; t < p.T; ++t) {
    const int64_t s = output[t];
    if (reader[s] == t) {
      if (p.qpos[s] < 0) std::fill(o + t * row, o + (t + 1) * row, 0.0f);
    } else {
      std::memcpy(o + t * row, o + reader[s] * row, row * sizeof(float));
    }
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
