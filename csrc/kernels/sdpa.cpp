// Fused scaled dot-product attention for XLA's CPU plugin, forward and
// backward, flash-attention style: keys are visited in tiles with an online
// softmax (a running row max and sum rescale what was accumulated), so no
// L x S score tensor exists -- memory is linear in the sequence lengths.
//
// Operands are those of the composite lowering (lowering/attention.cpp), which
// stays the fallback and the reference, in f32 and flattened by the lowering
// to q [B, Hq, L, E], k [B, Hk, S, E], v [B, Hk, S, Ev]; query head h reads
// key/value head h / (Hq / Hk) (grouped-query attention). The mask is
// [mb, mh, ml, ms], each 1 (broadcast) or the full size, boolean (true:
// attend) or additive f32; a zero-element mask is no mask. `causal` lets
// query i see keys 0..i (top-left, as the composite). Scores are q.k * scale.
//
// Forward: one item per (batch, head, query tile) gives out and the row
// logsumexp (-inf for a row that sees nothing, whose output is zero).
// Backward: one item per (batch, key/value head, key tile) owns that tile's
// dk and dv and adds into dq (the calling thread into the result, each
// helper into a copy of its own, summed at the end); probabilities are
// recomputed from the saved logsumexp, except in rows whose logsumexp is so
// large that f32 lost its log(sum) part (Hugging Face pads with finfo.min
// added to the scores): those rows' max and sum are recomputed from the
// keys, as the composite divides by the sum.
//
// Dropout draws the composite's mask (lowering/attention.cpp's keep_mask), a
// hash of each score's flat index, so it needs no L x S tensor either: the
// forward drops weights after the row's sum is taken (the softmax is of the
// whole row), the backward redraws the same entries.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/parallel.h"
#include "kernels/vector16.h"
#include "kernels/vector_exp.h"
#include "xla/ffi/api/ffi.h"

namespace torch_tpu::kernels {

namespace {

namespace ffi = xla::ffi;

constexpr int64_t kTq = 64;  // query rows per forward item
constexpr int64_t kTk = 64;  // keys per tile
// Past this magnitude a logsumexp's f32 spacing exceeds 3e-5: its row's max
// and sum are recomputed rather than trusted.
constexpr float kExactLse = 256.0f;

struct Problem {
  int64_t B, Hq, Hk, G, L, S, E, Ev;
  float scale;
  bool causal;
  float dropout = 0, rescale = 1;  // rescale: of kept weights, 1 / (1 - dropout)
  uint64_t key = 0;                // of the dropout mask's stream
  const float *q, *k, *v;
  // The mask: none, boolean or additive, with a stride of 0 on broadcast dims.
  enum class Mask { None, Bool, Add } mask = Mask::None;
  const bool* mask_bool = nullptr;
  const float* mask_add = nullptr;
  int64_t mask_stride[4] = {0, 0, 0, 0};

  const float* q_row(int64_t b, int64_t h, int64_t i) const { return q + ((b * Hq + h) * L + i) * E; }
  const float* k_row(int64_t b, int64_t h, int64_t j) const { return k + ((b * Hk + h) * S + j) * E; }
  const float* v_row(int64_t b, int64_t h, int64_t j) const { return v + ((b * Hk + h) * S + j) * Ev; }
};

// Key tile [j0, j0 + n) transposed into t[e * kTk + j] (zeros past n), so
// that a query row's scores are a sum of scaled rows of t.
void transpose_tile(const float* rows, int64_t n, int64_t width, float* t) {
  std::fill(t, t + width * kTk, 0.0f);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t e = 0; e < width; ++e) t[e * kTk + j] = rows[j * width + e];
}

// Four V16 (vector16.h) span a tile's 64 keys.
static_assert(kTk == 64, "the tile loops hold a tile's keys in four V16");

// Up to four rows at once share each load of the tile: 16 accumulators.
template <int R>
__attribute__((always_inline)) inline void scores_block(const float* x, const float* t, int64_t width, float scale,
                                                        float* s) {
  V16 a[R][4] = {};
  for (int64_t e = 0; e < width; ++e) {
    const float* te = t + e * kTk;
    const V16 t0 = load16(te), t1 = load16(te + 16), t2 = load16(te + 32), t3 = load16(te + 48);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const float xe = x[r * width + e];
      a[r][0] += xe * t0, a[r][1] += xe * t1, a[r][2] += xe * t2, a[r][3] += xe * t3;
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) store16(s + r * kTk + 16 * c, a[r][c] * scale);
}

// s[r][j] = sum_e x[r][e] * t[e][j] * scale: the scores of `rows` rows
// against the kTk keys of a transposed tile.
TORCH_TPU_VECTOR_CLONES
void rows_times_tile(const float* x, int64_t rows, const float* t, int64_t width, float scale, float* s) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) scores_block<4>(x + r * width, t, width, scale, s + r * kTk);
  for (; r < rows; ++r) scores_block<1>(x + r * width, t, width, scale, s + r * kTk);
}

// y[i][e0:e0+64] += sum_m w[i * wi + m * wm] * x[m][e0:e0+64] for R rows i,
// which share each load of x.
template <int R>
__attribute__((always_inline)) inline void accumulate_block(const float* w, int64_t wi, int64_t wm, const float* x,
                                                            int64_t M, int64_t width, float* y, int64_t e0) {
  V16 a[R][4];
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) a[i][c] = load16(y + i * width + e0 + 16 * c);
  for (int64_t m = 0; m < M; ++m) {
    const float* xm = x + m * width + e0;
    const V16 x0 = load16(xm), x1 = load16(xm + 16), x2 = load16(xm + 32), x3 = load16(xm + 48);
#pragma GCC unroll 4
    for (int i = 0; i < R; ++i) {
      const float wv = w[i * wi + m * wm];
      a[i][0] += wv * x0, a[i][1] += wv * x1, a[i][2] += wv * x2, a[i][3] += wv * x3;
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < R; ++i)
#pragma GCC unroll 4
    for (int c = 0; c < 4; ++c) store16(y + i * width + e0 + 16 * c, a[i][c]);
}

// y[i][:] += sum_{m < M} w[i * wi + m * wm] * x[m][:] for i < N: the tile
// products into rows (probabilities times values, dS times keys) and into a
// tile's keys (Pᵀ dO, dSᵀ Q), 64 columns of four rows at a time.
TORCH_TPU_VECTOR_CLONES
void accumulate(const float* w, int64_t wi, int64_t wm, const float* x, int64_t M, int64_t width, float* y,
                int64_t N) {
  int64_t e0 = 0;
  for (; e0 + 64 <= width; e0 += 64) {
    int64_t i = 0;
    for (; i + 4 <= N; i += 4) accumulate_block<4>(w + i * wi, wi, wm, x, M, width, y + i * width, e0);
    for (; i < N; ++i) accumulate_block<1>(w + i * wi, wi, wm, x, M, width, y + i * width, e0);
  }
  for (; e0 < width; ++e0)
    for (int64_t i = 0; i < N; ++i) {
      float a = y[i * width + e0];
      for (int64_t m = 0; m < M; ++m) a += w[i * wi + m * wm] * x[m * width + e0];
      y[i * width + e0] = a;
    }
}

// y[r][:] += sum_{j < n} w[r][j] * x[j][:]: weights of a tile's keys times their rows.
void weights_times_rows(const float* w, int64_t rows, const float* x, int64_t n, int64_t width, float* y) {
  accumulate(w, kTk, 1, x, n, width, y, rows);
}

// y[j][:] += sum_r w[r][j] * x[r][:]: the transposed product, into a tile's keys.
void weights_t_times_rows(const float* w, int64_t rows, const float* x, int64_t n, int64_t width, float* y) {
  accumulate(w, 1, kTk, x, rows, width, y, n);
}

// exp(x - shift) * factor in f32 for a row of kTk (kernels/vector_exp.h:
// about 1 ulp, exactly 0 below -87).
TORCH_TPU_VECTOR_CLONES
void exp_row(float* x, float shift, float factor) {
#pragma omp simd
  for (int64_t j = 0; j < kTk; ++j) x[j] = exp_any(x[j] - shift) * factor;
}

// The max and the sum of a tile's row of kTk (masked keys past n hold -inf
// as scores, 0 as weights).
TORCH_TPU_VECTOR_CLONES
float row_max(const float* s) {
  float top = -INFINITY;
#pragma omp simd reduction(max : top)
  for (int64_t j = 0; j < kTk; ++j) top = std::max(top, s[j]);
  return top;
}

TORCH_TPU_VECTOR_CLONES
float row_sum(const float* s) {
  float sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < kTk; ++j) sum += s[j];
  return sum;
}

// y += w * x over n elements.
TORCH_TPU_VECTOR_CLONES
void axpy(float w, const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] += w * x[i];
}

TORCH_TPU_VECTOR_CLONES
float dot(const float* a, const float* b, int64_t n) {
  float s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// The mask and causality applied to a row of scores: keys j0 + j, j < n, of
// query i; keys past n get -inf.
void mask_row(const Problem& p, int64_t b, int64_t h, int64_t i, int64_t j0, int64_t n, float* s) {
  for (int64_t j = n; j < kTk; ++j) s[j] = -INFINITY;
  if (p.causal)
    for (int64_t j = std::max<int64_t>(0, i + 1 - j0); j < n; ++j) s[j] = -INFINITY;
  if (p.mask == Problem::Mask::None) return;
  const int64_t* st = p.mask_stride;
  int64_t base = b * st[0] + h * st[1] + i * st[2] + j0 * st[3];
  if (p.mask == Problem::Mask::Bool) {
    for (int64_t j = 0; j < n; ++j)
      if (!p.mask_bool[base + j * st[3]]) s[j] = -INFINITY;
  } else {
    for (int64_t j = 0; j < n; ++j) s[j] += p.mask_add[base + j * st[3]];
  }
}

// Whether score `index` (flat in [B, Hq, L, S]) is kept: splitmix64 of
// key + (index + 1) * gamma, its top 24 bits a uniform draw in [0, 1).
inline bool kept(const Problem& p, uint64_t index) {
  uint64_t z = p.key + (index + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * 0x1p-24f >= p.dropout;
}

// The first flat index of query row `row` (= (b * Hq + h) * L + i) at key j0.
uint64_t score_index(const Problem& p, int64_t row, int64_t j0) {
  return static_cast<uint64_t>(row) * static_cast<uint64_t>(p.S) + static_cast<uint64_t>(j0);
}

// A row's weights of keys j0 + j, j < n, dropped or rescaled.
TORCH_TPU_VECTOR_CLONES
void drop_row(const Problem& p, int64_t row, int64_t j0, int64_t n, float* w) {
  const uint64_t first = score_index(p, row, j0);
  for (int64_t j = 0; j < n; ++j) w[j] = kept(p, first + j) ? w[j] * p.rescale : 0.0f;
}

// The keys a query row may see end before this (causal), else at S.
int64_t key_end(const Problem& p, int64_t last_row) {
  return p.causal ? std::min(p.S, last_row + 1) : p.S;
}

// ---- forward

struct ForwardScratch {
  std::vector<float> s, acc, m, l;
  explicit ForwardScratch(const Problem& p) : s(kTq * kTk), acc(kTq * p.Ev), m(kTq), l(kTq) {}
};

// Every key tile transposed (transpose_tile) once per call, for all the
// query tiles that read it (each forward item transposed the tiles it read
// again, up to L / kTq times a tile). Tile j0 / kTk of (b, kvh) is at
// ((b * Hk + kvh) * tiles + j0 / kTk) * E * kTk.
struct KeyTiles {
  int64_t tiles;
  std::vector<float> t;
  explicit KeyTiles(const Problem& p) : tiles((p.S + kTk - 1) / kTk), t(p.B * p.Hk * tiles * p.E * kTk) {}
  int64_t at(const Problem& p, int64_t bkvh, int64_t j0) const { return (bkvh * tiles + j0 / kTk) * p.E * kTk; }
  float* tile(const Problem& p, int64_t bkvh, int64_t j0) { return &t[at(p, bkvh, j0)]; }
  const float* tile(const Problem& p, int64_t bkvh, int64_t j0) const { return &t[at(p, bkvh, j0)]; }
};

void forward_item(const Problem& p, const KeyTiles& keys, int64_t item, ForwardScratch& w, float* out,
                  float* lse) {
  const int64_t tiles = (p.L + kTq - 1) / kTq;
  // The last query tiles see the most keys (causal): they go first.
  const int64_t qt = tiles - 1 - item % tiles, bh = item / tiles, b = bh / p.Hq, h = bh % p.Hq;
  const int64_t kvh = h / p.G, i0 = qt * kTq, rows = std::min(kTq, p.L - i0);
  std::fill(w.acc.begin(), w.acc.end(), 0.0f);
  std::fill(w.m.begin(), w.m.end(), -INFINITY);
  std::fill(w.l.begin(), w.l.end(), 0.0f);
  const int64_t end = key_end(p, i0 + rows - 1);
  for (int64_t j0 = 0; j0 < end; j0 += kTk) {
    const int64_t n = std::min(kTk, p.S - j0);
    rows_times_tile(p.q_row(b, h, i0), rows, keys.tile(p, b * p.Hk + kvh, j0), p.E, p.scale, w.s.data());
    for (int64_t r = 0; r < rows; ++r) {
      float* s = &w.s[r * kTk];
      mask_row(p, b, h, i0 + r, j0, n, s);
      const float m_new = std::max(w.m[r], row_max(s));
      if (m_new == -INFINITY) {  // nothing seen yet: no weight
        std::fill(s, s + kTk, 0.0f);
        continue;
      }
      const float alpha = std::exp(w.m[r] - m_new);
      if (alpha != 1.0f)
        for (int64_t e = 0; e < p.Ev; ++e) w.acc[r * p.Ev + e] *= alpha;
      exp_row(s, m_new, 1.0f);
      w.l[r] = w.l[r] * alpha + row_sum(s);
      w.m[r] = m_new;
      if (p.dropout > 0) drop_row(p, (b * p.Hq + h) * p.L + i0 + r, j0, n, s);
    }
    weights_times_rows(w.s.data(), rows, p.v_row(b, kvh, j0), n, p.Ev, w.acc.data());
  }
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t row = (b * p.Hq + h) * p.L + i0 + r;
    float* o = out + row * p.Ev;
    const float l = w.l[r], inv = l > 0 ? 1.0f / l : 0.0f;
    for (int64_t e = 0; e < p.Ev; ++e) o[e] = w.acc[r * p.Ev + e] * inv;
    lse[row] = l > 0 ? w.m[r] + std::log(l) : -INFINITY;
  }
}

// ---- backward

// Per query row: p = exp(s - max) * inv_sum (inv_sum = 0: the row sees
// nothing), and delta = rowsum(dout * out).
struct RowStats {
  std::vector<float> max, inv_sum, delta;
};

// A row's max and 1 / sum over every key it sees.
void recompute_row(const Problem& p, int64_t b, int64_t h, int64_t i, float& max, float& inv_sum) {
  std::vector<float> kt(p.E * kTk), s(kTk);
  float m = -INFINITY, l = 0;
  for (int64_t j0 = 0; j0 < key_end(p, i); j0 += kTk) {
    const int64_t n = std::min(kTk, p.S - j0);
    transpose_tile(p.k_row(b, h / p.G, j0), n, p.E, kt.data());
    rows_times_tile(p.q_row(b, h, i), 1, kt.data(), p.E, p.scale, s.data());
    mask_row(p, b, h, i, j0, n, s.data());
    const float m_new = std::max(m, row_max(s.data()));
    if (m_new == -INFINITY) continue;
    l *= std::exp(m - m_new);
    exp_row(s.data(), m_new, 1.0f);
    l += row_sum(s.data());
    m = m_new;
  }
  max = m;
  inv_sum = l > 0 ? 1.0f / l : 0.0f;
}

RowStats row_stats(const Problem& p, const float* lse, const float* dout, const float* out) {
  const int64_t rows = p.B * p.Hq * p.L;
  RowStats st{std::vector<float>(rows), std::vector<float>(rows), std::vector<float>(rows)};
  for (int64_t row = 0; row < rows; ++row) {
    st.delta[row] = dot(dout + row * p.Ev, out + row * p.Ev, p.Ev);
    const float x = lse[row];
    if (x == -INFINITY) {
      st.max[row] = 0, st.inv_sum[row] = 0;
    } else if (std::fabs(x) <= kExactLse) {
      st.max[row] = x, st.inv_sum[row] = 1;
    } else {
      const int64_t i = row % p.L, bh = row / p.L;
      recompute_row(p, bh / p.Hq, bh % p.Hq, i, st.max[row], st.inv_sum[row]);
    }
  }
  return st;
}

struct BackwardScratch {
  std::vector<float> kt, vt, s, dp, dk, dv;
  float* dq;  // this thread's copy of dq [B, Hq, L, E]
  BackwardScratch(const Problem& p, float* dq)
      : kt(p.E * kTk), vt(p.Ev * kTk), s(kTq * kTk), dp(kTq * kTk), dk(kTk * p.E), dv(kTk * p.Ev), dq(dq) {}
};

void backward_item(const Problem& p, const RowStats& st, const float* dout, int64_t item, BackwardScratch& w,
                   float* dk, float* dv) {
  // Key tiles in order: the first ones have the most query rows (causal).
  const int64_t bhk = p.B * p.Hk, kt = item / bhk, b = (item % bhk) / p.Hk, kvh = item % p.Hk;
  const int64_t j0 = kt * kTk, n = std::min(kTk, p.S - j0);
  const float* keys = p.k_row(b, kvh, j0);
  transpose_tile(keys, n, p.E, w.kt.data());
  transpose_tile(p.v_row(b, kvh, j0), n, p.Ev, w.vt.data());
  std::fill(w.dk.begin(), w.dk.end(), 0.0f);
  std::fill(w.dv.begin(), w.dv.end(), 0.0f);
  float* s = w.s.data();
  float* dp = w.dp.data();
  for (int64_t g = 0; g < p.G; ++g) {
    const int64_t h = kvh * p.G + g;
    // Causal: rows before j0 see none of this tile.
    for (int64_t i0 = p.causal ? std::min(j0, p.L) : 0; i0 < p.L; i0 += kTq) {
      const int64_t rows = std::min(kTq, p.L - i0), row0 = (b * p.Hq + h) * p.L + i0;
      const float* q = p.q_row(b, h, i0);
      const float* go = dout + row0 * p.Ev;
      rows_times_tile(q, rows, w.kt.data(), p.E, p.scale, s);
      rows_times_tile(go, rows, w.vt.data(), p.Ev, 1.0f, dp);
      for (int64_t r = 0; r < rows; ++r) {
        float* sr = s + r * kTk;
        float* dpr = dp + r * kTk;
        const float inv_sum = st.inv_sum[row0 + r];
        if (inv_sum == 0.0f) {  // sees nothing: no gradient
          std::fill(sr, sr + kTk, 0.0f);
          std::fill(dpr, dpr + kTk, 0.0f);
          continue;
        }
        mask_row(p, b, h, i0 + r, j0, n, sr);
        exp_row(sr, st.max[row0 + r], inv_sum);  // the probabilities
        const float delta = st.delta[row0 + r];
        if (p.dropout > 0) {
          // dP reaches the scores through the kept entries only, rescaled;
          // dV takes the dropped probabilities.
          const uint64_t first = score_index(p, row0 + r, j0);
          for (int64_t j = 0; j < n; ++j) {
            const bool keep = kept(p, first + j);
            dpr[j] = sr[j] * ((keep ? dpr[j] * p.rescale : 0.0f) - delta) * p.scale;
            sr[j] = keep ? sr[j] * p.rescale : 0.0f;
          }
          continue;
        }
#pragma omp simd
        for (int64_t j = 0; j < kTk; ++j) dpr[j] = sr[j] * (dpr[j] - delta) * p.scale;  // dS, scaled
      }
      weights_t_times_rows(s, rows, go, n, p.Ev, w.dv.data());
      weights_t_times_rows(dp, rows, q, n, p.E, w.dk.data());
      weights_times_rows(dp, rows, keys, n, p.E, w.dq + row0 * p.E);
    }
  }
  std::memcpy(dk + ((b * p.Hk + kvh) * p.S + j0) * p.E, w.dk.data(), n * p.E * sizeof(float));
  std::memcpy(dv + ((b * p.Hk + kvh) * p.S + j0) * p.Ev, w.dv.data(), n * p.Ev * sizeof(float));
}

// ---- the calls: shapes checked before any work.

// The dropout operands: the key (one u64) and the probability, in [0, 1].
ffi::Error read_dropout(ffi::Buffer<ffi::U64> key, float dropout, float rescale, const char* who, Problem& p) {
  if (key.element_count() != 1 || !(dropout >= 0.0f && dropout <= 1.0f) || !std::isfinite(rescale))
    return ffi::Error::InvalidArgument(std::string(who) +
                                       ": expected one u64 key and a dropout probability in [0, 1]");
  p.key = key.typed_data()[0], p.dropout = dropout, p.rescale = rescale;
  return ffi::Error::Success();
}

ffi::Error read_problem(ffi::Buffer<ffi::F32> q, ffi::Buffer<ffi::F32> k, ffi::Buffer<ffi::F32> v,
                        ffi::AnyBuffer mask, float scale, bool causal, const char* who, Problem& p) {
  auto qd = q.dimensions(), kd = k.dimensions(), vd = v.dimensions(), md = mask.dimensions();
  if (qd.size() != 4 || kd.size() != 4 || vd.size() != 4 || md.size() != 4)
    return ffi::Error::InvalidArgument(std::string(who) + ": expected q, k, v and mask of rank 4");
  p.B = qd[0], p.Hq = qd[1], p.L = qd[2], p.E = qd[3], p.Hk = kd[1], p.S = kd[2], p.Ev = vd[3];
  if (kd[0] != p.B || vd[0] != p.B || vd[1] != p.Hk || vd[2] != p.S || kd[3] != p.E || p.Hk <= 0 ||
      p.Hq % p.Hk != 0)
    return ffi::Error::InvalidArgument(std::string(who) + ": q, k and v do not fit together");
  p.G = p.Hq / p.Hk, p.scale = scale, p.causal = causal;
  p.q = q.typed_data(), p.k = k.typed_data(), p.v = v.typed_data();
  if (mask.element_count() == 0) return ffi::Error::Success();
  const int64_t full[4] = {p.B, p.Hq, p.L, p.S};
  int64_t stride = 1;
  for (int d = 3; d >= 0; --d) {
    if (md[d] != 1 && md[d] != full[d])
      return ffi::Error::InvalidArgument(std::string(who) + ": the mask does not broadcast to [B, Hq, L, S]");
    p.mask_stride[d] = md[d] == 1 ? 0 : stride;
    stride *= md[d];
  }
  if (mask.element_type() == ffi::DataType::PRED) {
    p.mask = Problem::Mask::Bool, p.mask_bool = static_cast<const bool*>(mask.untyped_data());
  } else if (mask.element_type() == ffi::DataType::F32) {
    p.mask = Problem::Mask::Add, p.mask_add = static_cast<const float*>(mask.untyped_data());
  } else {
    return ffi::Error::InvalidArgument(std::string(who) + ": the mask must be boolean or f32");
  }
  return ffi::Error::Success();
}

ffi::Error SdpaForward(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> q, ffi::Buffer<ffi::F32> k,
                       ffi::Buffer<ffi::F32> v, ffi::AnyBuffer mask, ffi::Buffer<ffi::U64> key,
                       ffi::ResultBuffer<ffi::F32> out, ffi::ResultBuffer<ffi::F32> lse, float scale, bool causal,
                       float dropout, float rescale) {
  Problem p;
  if (auto e = read_problem(q, k, v, mask, scale, causal, "sdpa_forward", p); e.failure()) return e;
  if (auto e = read_dropout(key, dropout, rescale, "sdpa_forward", p); e.failure()) return e;
  if (int64_t(out->element_count()) != p.B * p.Hq * p.L * p.Ev ||
      int64_t(lse->element_count()) != p.B * p.Hq * p.L)
    return ffi::Error::InvalidArgument("sdpa_forward: the results do not fit q and v");
  std::unique_ptr<KeyTiles> keys;
  try {
    keys = std::make_unique<KeyTiles>(p);
  } catch (const std::bad_alloc&) {
    return ffi::Error(ffi::ErrorCode::kResourceExhausted, "sdpa_forward: out of host memory for its scratch");
  }
  auto transpose = [&] {
    return [&](int64_t i) {
      const int64_t bkvh = i / keys->tiles, j0 = (i % keys->tiles) * kTk;
      transpose_tile(p.k_row(bkvh / p.Hk, bkvh % p.Hk, j0), std::min(kTk, p.S - j0), p.E, keys->tile(p, bkvh, j0));
    };
  };
  run_items(pool, p.B * p.Hk * keys->tiles, 8, transpose);
  float* o = out->typed_data();
  float* x = lse->typed_data();
  auto make = [&] {
    return [&, w = std::make_shared<ForwardScratch>(p)](int64_t i) { forward_item(p, *keys, i, *w, o, x); };
  };
  run_items(pool, p.B * p.Hq * ((p.L + kTq - 1) / kTq), 2, make);
  return ffi::Error::Success();
}

ffi::Error SdpaBackward(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> dout, ffi::Buffer<ffi::F32> q,
                        ffi::Buffer<ffi::F32> k, ffi::Buffer<ffi::F32> v, ffi::AnyBuffer mask,
                        ffi::Buffer<ffi::U64> key, ffi::Buffer<ffi::F32> out, ffi::Buffer<ffi::F32> lse,
                        ffi::ResultBuffer<ffi::F32> dq, ffi::ResultBuffer<ffi::F32> dk,
                        ffi::ResultBuffer<ffi::F32> dv, float scale, bool causal, float dropout, float rescale) {
  Problem p;
  if (auto e = read_problem(q, k, v, mask, scale, causal, "sdpa_backward", p); e.failure()) return e;
  if (auto e = read_dropout(key, dropout, rescale, "sdpa_backward", p); e.failure()) return e;
  const int64_t rows = p.B * p.Hq * p.L;
  if (int64_t(dout.element_count()) != rows * p.Ev || int64_t(out.element_count()) != rows * p.Ev ||
      int64_t(lse.element_count()) != rows || int64_t(dq->element_count()) != rows * p.E ||
      dk->element_count() != k.element_count() || dv->element_count() != v.element_count())
    return ffi::Error::InvalidArgument("sdpa_backward: the gradients and saved results do not fit q, k and v");
  // The calling thread adds into dq itself, each helper into a copy of its
  // own, summed at the end; all allocated here, where running out of memory
  // can be an error rather than an exception on a pool thread.
  const int64_t items = ((p.S + kTk - 1) / kTk) * p.B * p.Hk;
  float* g = dq->typed_data();
  std::fill(g, g + rows * p.E, 0.0f);
  RowStats st;
  std::vector<std::unique_ptr<float[]>> copies;
  try {
    st = row_stats(p, lse.typed_data(), dout.typed_data(), out.typed_data());
    for (int64_t h = helper_count(pool, items, 2); h > 0; --h) copies.emplace_back(new float[rows * p.E]());
  } catch (const std::bad_alloc&) {
    return ffi::Error(ffi::ErrorCode::kResourceExhausted, "sdpa_backward: out of host memory for its scratch");
  }
  std::vector<float*> targets{g};
  for (const auto& c : copies) targets.push_back(c.get());
  std::atomic<size_t> claimed{0};
  auto make = [&] {
    return [&, w = std::make_shared<BackwardScratch>(p, targets[claimed++])](int64_t i) {
      backward_item(p, st, dout.typed_data(), i, *w, dk->typed_data(), dv->typed_data());
    };
  };
  run_items(pool, items, 2, make);
  for (const auto& c : copies) axpy(1.0f, c.get(), g, rows * p.E);
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(torch_tpu_sdpa_forward_host, SdpaForward,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Arg<ffi::Buffer<ffi::U64>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<float>("scale")
                                  .Attr<bool>("causal")
                                  .Attr<float>("dropout")
                                  .Attr<float>("rescale"));

XLA_FFI_DEFINE_HANDLER_SYMBOL(torch_tpu_sdpa_backward_host, SdpaBackward,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::AnyBuffer>()
                                  .Arg<ffi::Buffer<ffi::U64>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<float>("scale")
                                  .Attr<bool>("causal")
                                  .Attr<float>("dropout")
                                  .Attr<float>("rescale"));

}  // namespace torch_tpu::kernels
