// The inference fast paths of nn.MultiheadAttention and
// nn.TransformerEncoderLayer (eval mode, no gradients, batch_first), which
// PyTorch takes on tpu as on the CPU: _native_multi_head_attention and
// _transformer_encoder_layer_fwd, composed here of lowered ops (linear,
// matmul, softmax, layer_norm, gelu/relu). They follow the CPU kernels'
// semantics: a mask, boolean or additive, masks where it is nonzero (a row
// masked everywhere comes out NaN, as there).
//
// nn.TransformerEncoder with a src_key_padding_mask also packs the batch into
// a nested tensor, which tpu tensors cannot be: that step raises
// NotImplementedError saying how to stay on the dense fast path.
#include <cmath>
#include <limits>

#include "aten/pch.h"

namespace torch_tpu::aten {

namespace {

// [B, T, H * dh] -> [B, H, T, dh]
at::Tensor split_heads(const at::Tensor& t, int64_t heads) {
  return t.view({t.size(0), t.size(1), heads, t.size(2) / heads}).transpose(1, 2);
}

void check_attention_args(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t embed_dim,
                          int64_t num_head, const at::Tensor& qkv_weight, const at::Tensor& qkv_bias) {
  TORCH_CHECK(query.dim() == 3, "expected 3-D `query`, got ", query.dim(), "-D tensor");
  TORCH_CHECK(query.size(2) == embed_dim, "passed-in embed_dim ", embed_dim, " didn't match last dim of query ",
              query.size(2));
  TORCH_CHECK(key.dim() == 3, "expected 3-D `key`, got ", key.dim(), "-D tensor");
  TORCH_CHECK(value.dim() == 3, "expected 3-D `value`, got ", value.dim(), "-D tensor");
  TORCH_CHECK(query.sizes() == key.sizes() && key.sizes() == value.sizes(),
              "expected `query`/`key`/`value` shapes to match");
  TORCH_CHECK(qkv_weight.dim() == 2, "expected 2-D `qkv_weight`, got ", qkv_weight.dim(), "-D tensor");
  TORCH_CHECK(qkv_weight.size(0) == 3 * embed_dim, "expected `qkv_weight` first dim to be 3x embed_dim");
  TORCH_CHECK(qkv_weight.size(1) == embed_dim, "expected `qkv_weight` second dim to be embed_Dim");
  TORCH_CHECK(qkv_bias.dim() == 1, "expected 1-D `qkv_bias`, got ", qkv_bias.dim(), "-D tensor");
  TORCH_CHECK(qkv_bias.size(0) == 3 * embed_dim,
              "expected `qkv_bias` first dim and first dim of query to be equal");
  TORCH_CHECK(embed_dim % num_head == 0, "`embed_dim` must divide evenly by `num_heads`");
}

// mask_type 1: a key padding mask [B, T]; otherwise the mask broadcasts to
// the scores [B, H, T, T] as it is ([T, T] or [B, H, T, T]).
at::Tensor masked_softmax(const at::Tensor& scores, const std::optional<at::Tensor>& mask,
                          std::optional<int64_t> mask_type) {
  if (!mask || !mask->defined()) return at::softmax(scores, -1);
  at::Tensor m = mask->scalar_type() == at::kBool ? *mask : mask->ne(0);
  if (mask_type == 1) m = m.view({m.size(0), 1, 1, m.size(-1)});
  return at::softmax(scores.masked_fill(m, -std::numeric_limits<double>::infinity()), -1);
}

std::tuple<at::Tensor, at::Tensor> native_multi_head_attention(
    const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, int64_t embed_dim, int64_t num_head,
    const at::Tensor& qkv_weight, const at::Tensor& qkv_bias, const at::Tensor& proj_weight,
    const at::Tensor& proj_bias, const std::optional<at::Tensor>& mask, bool need_weights,
    bool average_attn_weights, std::optional<int64_t> mask_type) {
  check_attention_args(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias);
  if (query.numel() == 0) return {at::empty_like(query), at::Tensor()};
  at::Tensor q, k, v;
  if (query.is_same(key) && key.is_same(value)) {
    auto qkv = at::linear(query, qkv_weight, qkv_bias).chunk(3, -1);
    q = qkv[0], k = qkv[1], v = qkv[2];
  } else {
    auto w = qkv_weight.chunk(3, 0), b = qkv_bias.chunk(3, 0);
    q = at::linear(query, w[0], b[0]), k = at::linear(key, w[1], b[1]), v = at::linear(value, w[2], b[2]);
  }
  double scale = 1.0 / std::sqrt(static_cast<double>(embed_dim / num_head));
  at::Tensor scores = at::matmul(split_heads(q, num_head).mul(scale), split_heads(k, num_head).transpose(-2, -1));
  at::Tensor weights = masked_softmax(scores, mask, mask_type);
  at::Tensor context = at::matmul(weights, split_heads(v, num_head)).transpose(1, 2).reshape(query.sizes());
  at::Tensor out = at::linear(context, proj_weight, proj_bias);
  if (!need_weights) return {out, at::Tensor()};
  if (average_attn_weights) weights = weights.sum(1).div(num_head);
  return {out, weights};
}

at::Tensor transformer_encoder_layer_fwd(
    const at::Tensor& src, int64_t embed_dim, int64_t num_heads, const at::Tensor& qkv_weight,
    const at::Tensor& qkv_bias, const at::Tensor& proj_weight, const at::Tensor& proj_bias, bool use_gelu,
    bool norm_first, double eps, const at::Tensor& norm_weight_1, const at::Tensor& norm_bias_1,
    const at::Tensor& norm_weight_2, const at::Tensor& norm_bias_2, const at::Tensor& ffn_weight_1,
    const at::Tensor& ffn_bias_1, const at::Tensor& ffn_weight_2, const at::Tensor& ffn_bias_2,
    const std::optional<at::Tensor>& mask, std::optional<int64_t> mask_type) {
  if (src.numel() == 0) return src.clone();
  auto norm = [&](const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
    return at::layer_norm(x, {embed_dim}, w, b, eps);
  };
  at::Tensor x = norm_first ? norm(src, norm_weight_1, norm_bias_1) : src;
  x = std::get<0>(native_multi_head_attention(x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
                                              proj_bias, mask, false, true, mask_type)).add(src);
  if (!norm_first) x = norm(x, norm_weight_1, norm_bias_1);
  at::Tensor h = at::linear(norm_first ? norm(x, norm_weight_2, norm_bias_2) : x, ffn_weight_1, ffn_bias_1);
  h = at::linear(use_gelu ? at::gelu(h) : at::relu(h), ffn_weight_2, ffn_bias_2);
  x = x.add(h);
  return norm_first ? x : norm(x, norm_weight_2, norm_bias_2);
}

// Whether every sequence's kept positions (mask true) come first: the test
// nn.TransformerEncoder makes before packing; only the mask is read.
bool nested_tensor_from_mask_left_aligned(const at::Tensor&, const at::Tensor& mask) {
  at::Tensor m = mask.to(c10::kCPU, at::kBool);
  at::Tensor lengths = m.sum(-1, /*keepdim=*/true);
  return m.eq(at::arange(m.size(-1)).lt(lengths)).all().item<bool>();
}

at::Tensor nested_tensor_from_mask(const at::Tensor&, const at::Tensor&, bool) {
  TORCH_CHECK_NOT_IMPLEMENTED(false,
                              "The operator 'aten::_nested_tensor_from_mask' is not implemented for the tpu device: "
                              "tpu tensors cannot be nested. nn.TransformerEncoder calls it in eval mode without "
                              "gradients when given a src_key_padding_mask; construct it with "
                              "enable_nested_tensor=False (its layers still take the fast path), or call "
                              "torch.backends.mha.set_fastpath_enabled(False).");
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_native_multi_head_attention", TORCH_FN(native_multi_head_attention));
  m.impl("_nested_tensor_from_mask", TORCH_FN(nested_tensor_from_mask));
  m.impl("_nested_tensor_from_mask_left_aligned", TORCH_FN(nested_tensor_from_mask_left_aligned));
  m.impl("_transformer_encoder_layer_fwd", TORCH_FN(transformer_encoder_layer_fwd));
}

}  // namespace torch_tpu::aten
