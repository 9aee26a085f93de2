// Fused scaled dot-product attention: _scaled_dot_product_fused_attention_
// overrideable, the op PyTorch leaves to PrivateUse1 backends, and its
// backward. Each is one StableHLO computation: scores = q kᵀ scale (+ mask),
// a softmax that leaves fully masked rows at zero (PyTorch's math backend
// does the same), optional dropout, then the product with v. Half-precision
// inputs are computed in f32; the backward recomputes the probabilities from
// the scores instead of keeping them.
//
// Layout: q [..., Hq, L, E], k [..., Hk, S, E], v [..., Hk, S, Ev], any
// number of leading batch dims. When Hq is a multiple of Hk (grouped-query
// attention), query head h reads key/value head h / (Hq / Hk), as
// repeat_interleave in PyTorch's math backend; the fused op is not told
// enable_gqa, so the head counts decide. The query-side operand of each
// product is viewed as [..., Hk, group, ...] and batched with its key/value
// head, so k and v are never copied per query head (which cost two fusions,
// memory and compile time).
#include <cmath>
#include <cstdint>

#include "lowering/attention_kernel.h"
#include "lowering/common.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

using hlo::Builder;
using hlo::Compare;
using hlo::TensorType;
using E = ElementType;
using Dims = std::vector<int64_t>;
using Values = std::vector<Value>;

E acc_type(E t) { return t == E::F16 || t == E::BF16 ? E::F32 : t; }

Dims iota_dims(int64_t n) {
  Dims d(n);
  for (int64_t i = 0; i < n; ++i) d[i] = i;
  return d;
}

struct Attention {
  Value q, k, v;                 // in acc; k and v have Hq / group heads
  std::optional<Value> bias;     // the caller's mask, as given
  bool causal = false;
  double scale = 1;
  int64_t group = 1;             // query heads per key/value head
  E acc = E::F32;
  int64_t rank() const { return q.rank(); }
  Dims batch() const { return iota_dims(rank() - 2); }
};

// [..., Hk * group, A, B] as [..., Hk, group, A, B]: query heads by their
// key/value head.
Shape split_heads(Shape s, int64_t group) {
  int64_t r = static_cast<int64_t>(s.size());
  s[r - 3] /= group;
  s.insert(s.begin() + (r - 2), group);
  return s;
}

// A query-side operand [..., Hq, A, B] times a key/value-side one
// [..., Hk, C, D], each query head with its key/value head, contracting
// dimension `lc` of the first and `rc` of the second (both counted in the
// query side's rank): [..., Hq, A or B, C or D].
Value head_dot(Builder& b, const Attention& at, Value lhs, Value rhs, int64_t lc, int64_t rc) {
  int64_t r = at.rank();
  Dims batch = at.batch();
  if (at.group == 1) return b.dot_general(lhs, rhs, batch, batch, {lc}, {rc}, at.acc);
  Value out = b.dot_general(b.reshape(lhs, split_heads(lhs.shape(), at.group)), rhs, batch, batch,
                            {lc + 1}, {rc}, at.acc);
  Shape joined = out.shape();
  joined[r - 3] *= at.group;
  joined.erase(joined.begin() + (r - 2));
  return b.reshape(out, joined);
}

// For gradients: sums each group of query heads back into its key/value head.
Value gather_heads(Builder& b, Value x, int64_t group) {
  if (group == 1) return x;
  return b.reduce_sum(b.reshape(x, split_heads(x.shape(), group)), {x.rank() - 2});
}

Attention read(Context& ctx, const Value& q, const Value& k, const Value& v,
               std::optional<Value> bias, bool causal, const Arg& scale, const char* op) {
  Builder& b = ctx.b;
  TPU_CHECK(q.rank() >= 2 && k.rank() == q.rank() && v.rank() == q.rank(), ErrorKind::Runtime, op,
            ": expected query, key and value of the same rank (at least 2), got ", hlo::shape_str(q.shape()),
            ", ", hlo::shape_str(k.shape()), " and ", hlo::shape_str(v.shape()));
  TPU_CHECK(hlo::is_float(q.dtype()) && k.dtype() == q.dtype() && v.dtype() == q.dtype(), ErrorKind::Runtime,
            op, ": expected query, key and value of one float dtype, got ", scalar_type_name(q.dtype()), ", ",
            scalar_type_name(k.dtype()), " and ", scalar_type_name(v.dtype()));
  int64_t r = q.rank();
  TPU_CHECK(k.shape()[r - 1] == q.shape()[r - 1] && k.shape()[r - 2] == v.shape()[r - 2], ErrorKind::Runtime,
            op, ": key ", hlo::shape_str(k.shape()), " does not fit query ", hlo::shape_str(q.shape()),
            " and value ", hlo::shape_str(v.shape()));
  Attention at;
  at.acc = acc_type(q.dtype());
  if (r >= 3 && k.shape()[r - 3] != q.shape()[r - 3]) {
    int64_t hq = q.shape()[r - 3], hk = k.shape()[r - 3];
    TPU_CHECK(hk > 0 && hq % hk == 0 && v.shape()[r - 3] == hk, ErrorKind::Runtime, op,
              ": number of heads in key and value must divide the number of heads in query, got ", hq,
              " and ", hk);
    at.group = hq / hk;
  }
  for (int64_t d = 0; d + 3 < r; ++d)
    TPU_CHECK(k.shape()[d] == q.shape()[d] && v.shape()[d] == q.shape()[d], ErrorKind::Runtime, op,
              ": batch dims of query, key and value differ");
  at.q = cast(b, q, at.acc);
  at.k = cast(b, k, at.acc);
  at.v = cast(b, v, at.acc);
  at.bias = bias;
  at.causal = causal;
  double e = double(q.shape()[r - 1]);
  at.scale = scale.is_none() ? 1.0 / std::sqrt(e) : scale.as_float();
  TPU_CHECK(!(causal && bias), ErrorKind::Runtime, op,
            ": Explicit attn_mask should not be set when is_causal=True");
  return at;
}

// q kᵀ scale with the mask applied: [..., L, S] in acc.
Value scores(Builder& b, const Attention& at) {
  int64_t r = at.rank();
  Value s = head_dot(b, at, at.q, at.k, r - 1, r - 1);
  s = b.mul(s, b.full(at.scale, at.acc, s.shape()));
  Value neg_inf = b.full(-INFINITY, at.acc, s.shape());
  if (at.bias) {
    Value m = broadcast_to(b, *at.bias, s.shape());
    s = m.dtype() == E::Bool ? b.select(m, s, neg_inf) : b.add(s, cast(b, m, at.acc));
  }
  if (at.causal) {
    // Top-left aligned: query i sees keys 0..i.
    Value i = b.iota(TensorType{E::I64, s.shape()}, r - 2), j = b.iota(TensorType{E::I64, s.shape()}, r - 1);
    s = b.select(b.compare(j, i, Compare::LE), s, neg_inf);
  }
  return s;
}

// Softmax over the last dimension, kept as its shift (the row max, 0 for a
// row of -inf) and the sum of exp(s - shift). The probabilities divide by that
// sum rather than subtracting the logsumexp: with an additive mask of
// finfo.min (how Hugging Face pads), a row's scores sit near -3.4e38, where
// float32 cannot hold log(sum) + max; subtracting that rounded logsumexp gave
// every key a probability of 1 instead of 1 / S.
struct RowSoftmax {
  Value shift, sum;
};

RowSoftmax row_softmax(Builder& b, Value s) {
  int64_t last = s.rank() - 1;
  Shape row = reduced_shape(s.shape(), {last}, false);
  Value m = b.reduce_max(s, {last});
  // A row of -inf would give exp(-inf - -inf) = NaN; shifting it by 0 keeps it -inf.
  Value shift = b.select(b.is_finite(m), m, b.zeros(s.dtype(), row));
  Value sum = b.reduce_sum(b.exp(b.sub(s, b.broadcast_in_dim(shift, s.shape(), iota_dims(last)))), {last});
  return {shift, sum};
}

// The logsumexp of every row, with -inf for rows that see nothing.
Value row_logsumexp(Builder& b, const RowSoftmax& r) { return b.add(b.log(r.sum), r.shift); }

// softmax(s); rows that see nothing (a zero sum) are all zero, as PyTorch's safe softmax.
Value probabilities(Builder& b, Value s, const RowSoftmax& r) {
  int64_t last = s.rank() - 1;
  Dims keep = iota_dims(last);
  Value p = b.div(b.exp(b.sub(s, b.broadcast_in_dim(r.shift, s.shape(), keep))),
                  b.broadcast_in_dim(r.sum, s.shape(), keep));
  Value sees = b.compare(r.sum, b.zeros(s.dtype(), r.sum.shape()), Compare::GT);
  return b.select(b.broadcast_in_dim(sees, s.shape(), keep), p, b.zeros(s.dtype(), s.shape()));
}

// ---- dropout: the mask is a function of (seed, offset) alone, so the
// backward regenerates the forward's mask from the saved philox_seed and
// philox_offset. It is a counter-based hash of each score's flat index in
// [..., Hq, L, S], so that the fused kernel (kernels/sdpa.cpp, which never
// holds the whole score tensor) draws the same mask tile by tile: a key
// from (seed, offset), then splitmix64 of key + (index + 1) * gamma, whose
// top 24 bits are the uniform draw.

Value u64_full(Builder& b, uint64_t c, const Shape& shape) {
  Value k = b.op("stablehlo.constant", {}, hlo::scalar_type(E::U64),
                 "value = dense<" + std::to_string(c) + "> : tensor<ui64>");
  return shape.empty() ? k : b.broadcast_in_dim(k, shape, {});
}

// splitmix64's finalizer (kernels/sdpa.cpp's `kept` applies the same).
Value mix(Builder& b, Value z) {
  const Shape& s = z.shape();
  z = b.mul(b.xor_(z, b.shift_right_logical(z, u64_full(b, 30, s))), u64_full(b, 0xBF58476D1CE4E5B9ull, s));
  z = b.mul(b.xor_(z, b.shift_right_logical(z, u64_full(b, 27, s))), u64_full(b, 0x94D049BB133111EBull, s));
  return b.xor_(z, b.shift_right_logical(z, u64_full(b, 31, s)));
}

// The stream's key: rank-0 u64. seed, offset: rank-0 i64. Hashing the
// offset into the key gives every call its own stream; the offset as a
// counter would overlap neighbouring calls.
Value dropout_key(Builder& b, Value seed, Value offset) {
  Value s = b.bitcast_convert(seed, hlo::scalar_type(E::U64)), o = b.bitcast_convert(offset, hlo::scalar_type(E::U64));
  return mix(b, b.xor_(s, mix(b, o)));
}

// True where a probability is kept.
Value keep_mask(Builder& b, Value key, double p, const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  Value index = b.reshape(b.iota(TensorType{E::U64, {n}}, 0), shape);
  Value z = b.add(b.broadcast_in_dim(key, shape, {}),
                  b.mul(b.add(index, u64_full(b, 1, shape)), u64_full(b, 0x9E3779B97F4A7C15ull, shape)));
  Value u = b.mul(b.convert(b.shift_right_logical(mix(b, z), u64_full(b, 40, shape)), E::F32),
                  b.full(std::ldexp(1.0, -24), E::F32, shape));
  return b.compare(u, b.full(p, E::F32, shape), Compare::GE);
}

const Arg* find_rng(const Args& a) {
  for (const auto& x : a)
    if (x.kind == Arg::Kind::Rng) return &x;
  return nullptr;
}

// _scaled_dot_product_fused_attention_overrideable(query, key, value,
// attn_bias, dropout_p, is_causal, return_debug_mask, *, scale) ->
// (output, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, philox_seed,
// philox_offset, debug_attn_mask). The two SymInt results (max_q = L,
// max_k = S) are not values: this returns the seven tensors in order.
// Dropout needs a generator the schema does not have: the aten layer
// appends the default one as a last (Rng) argument (kImplicitGenerator).
Values lower_sdpa_overrideable(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  const char* op = "_scaled_dot_product_fused_attention_overrideable";
  Value q = a[0].as_tensor(), k = a[1].as_tensor(), v = a[2].as_tensor();
  double dropout = a[4].as_float();
  Attention at = read(ctx, q, k, v, a[3].opt_tensor(), a[5].as_bool(), a[7], op);
  Value seed = b.constant_int(0, E::I64), offset = b.constant_int(0, E::I64);
  std::optional<Value> key;
  if (dropout > 0) {
    const Arg* rng = find_rng(a);
    TPU_CHECK(rng, ErrorKind::NotImplemented, op,
              ": dropout_p > 0 needs a generator, which the tpu backend does not pass yet");
    Value state = ctx.rng_state(*rng);
    auto word = [&](int64_t i) {
      return b.bitcast_convert(b.reshape(b.slice(state, {i}, {i + 1}, {1}), {}), hlo::scalar_type(E::I64));
    };
    seed = word(0);
    offset = word(1);
    key = dropout_key(b, seed, offset);
  }
  if (auto r = sdpa_kernel_forward(ctx, {q, k, v, at.bias, at.causal, at.scale, dropout, key}))
    return {(*r)[0], (*r)[1], b.zeros(E::I64, {0}), b.zeros(E::I64, {0}), seed, offset, b.zeros(q.dtype(), {0})};
  Value s = scores(b, at);
  RowSoftmax rows = row_softmax(b, s);
  Value lse = row_logsumexp(b, rows);
  Value p = probabilities(b, s, rows);
  if (dropout > 0) {
    Value keep = keep_mask(b, *key, dropout, p.shape());
    p = b.select(keep, b.div(p, b.full(1 - dropout, at.acc, p.shape())), b.zeros(at.acc, p.shape()));
  }
  int64_t r = at.rank();
  Value out = head_dot(b, at, p, at.v, r - 1, r - 2);
  return {cast(b, out, q.dtype()), lse, b.zeros(E::I64, {0}), b.zeros(E::I64, {0}), seed, offset,
          b.zeros(q.dtype(), {0})};
}

// The gradient of a mask broadcast into the scores: summed back to its shape.
Value unbroadcast(Builder& b, Value g, const Shape& shape) {
  int64_t lead = g.rank() - static_cast<int64_t>(shape.size());
  Dims dims;
  for (int64_t d = 0; d < g.rank(); ++d)
    if (d < lead || shape[d - lead] == 1) dims.push_back(d);
  return b.reshape(dims.empty() ? g : b.reduce_sum(g, dims), shape);
}

// _scaled_dot_product_fused_attention_overrideable_backward(grad_out, query,
// key, value, attn_bias, grad_input_mask, out, logsumexp, cum_seq_q,
// cum_seq_k, max_q, max_k, dropout_p, is_causal, philox_seed, philox_offset,
// *, scale) -> (grad_query, grad_key, grad_value, grad_attn_bias).
Values lower_sdpa_overrideable_backward(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  const char* op = "_scaled_dot_product_fused_attention_overrideable_backward";
  Value g = a[0].as_tensor(), q = a[1].as_tensor(), k = a[2].as_tensor(), v = a[3].as_tensor();
  auto bias = a[4].opt_tensor();
  double dropout = a[12].as_float();
  Attention at = read(ctx, q, k, v, bias, a[13].as_bool(), a[16], op);
  // The kernel gives no mask gradient (an L x S tensor): the composite does.
  const bool mask_grad = bias && bias->dtype() != E::Bool && a[5].bools.size() > 3 && a[5].bools[3];
  std::optional<Value> key;
  if (dropout > 0) key = dropout_key(b, cast(b, a[14].as_tensor(), E::I64), cast(b, a[15].as_tensor(), E::I64));
  if (!mask_grad)
    if (auto r = sdpa_kernel_backward(ctx, {q, k, v, at.bias, at.causal, at.scale, dropout, key}, g,
                                      a[6].as_tensor(), a[7].as_tensor())) {
      r->push_back(b.zeros(q.dtype(), {0}));
      return *r;
    }
  int64_t r = at.rank();
  Dims batch = at.batch();

  // The saved logsumexp is not reused: near finfo.min it has lost the
  // log(sum) term (see row_softmax), so the probabilities are recomputed.
  Value s = scores(b, at);
  Value p = probabilities(b, s, row_softmax(b, s));
  Value go = cast(b, g, at.acc);
  // dP before dropout is dO vᵀ through the kept entries, rescaled.
  Value dp = head_dot(b, at, go, at.v, r - 1, r - 1);
  Value pd = p;
  if (dropout > 0) {
    Value keep = keep_mask(b, *key, dropout, p.shape());
    Value rescale = b.full(1 / (1 - dropout), at.acc, p.shape());
    Value zero = b.zeros(at.acc, p.shape());
    pd = b.select(keep, b.mul(p, rescale), zero);
    dp = b.select(keep, b.mul(dp, rescale), zero);
  }
  Value dv = b.dot_general(pd, go, batch, batch, {r - 2}, {r - 2}, at.acc);
  // Softmax backward: dS = P (dP - rowsum(P dP)).
  Value row = b.reduce_sum(b.mul(p, dp), {r - 1});
  Value ds = b.mul(p, b.sub(dp, b.broadcast_in_dim(row, p.shape(), iota_dims(r - 1))));
  Value scale = b.full(at.scale, at.acc, ds.shape());
  Value dss = b.mul(ds, scale);
  Value dq = head_dot(b, at, dss, at.k, r - 1, r - 2);
  Value dk = b.dot_general(dss, at.q, batch, batch, {r - 2}, {r - 2}, at.acc);
  // Only where grad_input_mask asks for it, as the kernel path above.
  Value dbias = mask_grad ? cast(b, unbroadcast(b, ds, bias->shape()), bias->dtype()) : b.zeros(q.dtype(), {0});
  return {cast(b, dq, q.dtype()), cast(b, gather_heads(b, dk, at.group), k.dtype()),
          cast(b, gather_heads(b, dv, at.group), v.dtype()), dbias};
}

}  // namespace

TPU_LOWERING("aten::_scaled_dot_product_fused_attention_overrideable", lower_sdpa_overrideable,
             kImplicitGenerator);
TPU_LOWERING("aten::_scaled_dot_product_fused_attention_overrideable_backward",
             lower_sdpa_overrideable_backward);

}  // namespace torch_tpu::lowering
