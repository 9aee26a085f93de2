// The kernel takes everything in f32 and in rank 4: batch dims flattened into
// one, a missing head dim added; the mask as [mb, mh, ml, ms], each dim 1
// (broadcast, never materialized: a padding mask stays [B, 1, 1, S]) or full.
// Half-precision inputs are widened here, as the composite widens them.
#include "lowering/attention_kernel.h"

#include "lowering/common.h"

namespace torch_tpu::lowering {

namespace {

using hlo::Builder;
using E = ElementType;
using Values = std::vector<Value>;

bool takes(E t) { return t == E::F32 || t == E::BF16 || t == E::F16; }

// [..., H, A, B] as [prod(...), H, A, B] (H = 1 for rank 2).
Shape rank4(const Shape& s) {
  int64_t r = static_cast<int64_t>(s.size()), batch = 1;
  for (int64_t d = 0; d + 3 < r; ++d) batch *= s[d];
  return {batch, r >= 3 ? s[r - 3] : 1, s[r - 2], s[r - 1]};
}

Value flat(Builder& b, Value x) { return b.reshape(cast(b, x, E::F32), rank4(x.shape())); }

// The mask against q's leading dims: rank 4, a dim of 1 where it broadcasts.
Value kernel_mask(Builder& b, const SdpaCall& c) {
  if (!c.mask) return b.zeros(E::F32, {0, 0, 0, 0});
  Value m = c.mask->dtype() == E::Bool ? *c.mask : cast(b, *c.mask, E::F32);
  const Shape& qs = c.q.shape();
  int64_t r = static_cast<int64_t>(qs.size());
  Shape padded(r - m.rank(), 1);
  padded.insert(padded.end(), m.shape().begin(), m.shape().end());
  // Flattened, the batch dims broadcast all together or not at all.
  bool broadcast = false, full_size = false;
  for (int64_t d = 0; d + 3 < r; ++d) (padded[d] == 1 ? broadcast : full_size) = true;
  m = b.reshape(m, padded);
  if (broadcast && full_size) {
    Shape full = padded;
    for (int64_t d = 0; d + 3 < r; ++d) full[d] = qs[d];
    m = broadcast_to(b, m, full);
    padded = full;
  }
  Shape s = rank4(padded);
  return b.reshape(m, s);
}

// A rank-4 f32 result back in the shape `like` (with its last dim `last`) and type t.
Value restore(Builder& b, Value x, Shape like, int64_t last, E t) {
  like.back() = last;
  return cast(b, b.reshape(x, like), t);
}

Value restore(Builder& b, Value x, const Value& like) {
  return restore(b, x, like.shape(), like.shape().back(), like.dtype());
}

// The dropout probability as the composite compares with it (in f32), and
// the rescale of kept entries as the composite computes it (in double).
std::vector<Builder::FfiAttr> attributes(const SdpaCall& c) {
  const double rescale = c.dropout < 1 ? 1 / (1 - c.dropout) : 0;
  return {Builder::FfiAttr::f32("scale", c.scale), Builder::FfiAttr::boolean("causal", c.causal),
          Builder::FfiAttr::f32("dropout", c.dropout), Builder::FfiAttr::f32("rescale", rescale)};
}

// The key of the dropout mask's stream; 0 without dropout (unread).
Value key_operand(Builder& b, const SdpaCall& c) {
  return c.dropout > 0 ? *c.dropout_key : b.constant_int(0, E::U64);
}

}  // namespace

std::optional<Values> sdpa_kernel_forward(Context& ctx, const SdpaCall& c) {
  if (!takes(c.q.dtype())) return std::nullopt;
  std::string target = ctx.kernel_target("sdpa_forward");
  if (target.empty()) return std::nullopt;
  Builder& b = ctx.b;
  Value q = flat(b, c.q), v = flat(b, c.v);
  Shape o = q.shape();
  o[3] = v.shape()[3];
  Values r = b.custom_call(target, {q, flat(b, c.k), v, kernel_mask(b, c), key_operand(b, c)},
                           {{E::F32, o}, {E::F32, {o[0], o[1], o[2]}}}, attributes(c));
  Shape rows(c.q.shape().begin(), c.q.shape().end() - 1);
  return Values{restore(b, r[0], c.q.shape(), c.v.shape().back(), c.q.dtype()), b.reshape(r[1], rows)};
}

std::optional<Values> sdpa_kernel_backward(Context& ctx, const SdpaCall& c, Value grad_out, Value out,
                                           Value logsumexp) {
  if (!takes(c.q.dtype())) return std::nullopt;
  std::string target = ctx.kernel_target("sdpa_backward");
  if (target.empty()) return std::nullopt;
  Builder& b = ctx.b;
  Value q = flat(b, c.q), k = flat(b, c.k), v = flat(b, c.v);
  Value rows = b.reshape(cast(b, logsumexp, E::F32), {q.shape()[0], q.shape()[1], q.shape()[2]});
  Values r = b.custom_call(target,
                           {flat(b, grad_out), q, k, v, kernel_mask(b, c), key_operand(b, c), flat(b, out), rows},
                           {q.type, k.type, v.type}, attributes(c));
  return Values{restore(b, r[0], c.q), restore(b, r[1], c.k), restore(b, r[2], c.v)};
}

}  // namespace torch_tpu::lowering
