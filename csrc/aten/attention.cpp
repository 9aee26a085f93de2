// scaled_dot_product_attention asks a per-backend stub which fused kernel to
// use; `tpu` answers "overrideable", so SDPA reaches
// _scaled_dot_product_fused_attention_overrideable, which lowers to one
// StableHLO computation (csrc/lowering/attention.cpp). The math path, which
// PyTorch composes from matmuls and a safe softmax that broadcast as on the
// CPU, runs instead when the head counts differ without enable_gqa (PyTorch
// raises its own error there, or broadcasts a single head) and when the batch
// dimensions of query, key and value differ but broadcast (the fused op
// requires them equal).
#include <ATen/native/transformers/attention.h>
#include <ATen/SDPBackend.h>

#include "aten/pch.h"

namespace torch_tpu::aten {

namespace {

int64_t tpu_sdp_choice(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                       const std::optional<at::Tensor>& attn_mask, double dropout_p, bool is_causal,
                       std::optional<double> scale, bool enable_gqa) {
  bool heads_differ = query.dim() >= 3 && key.dim() >= 3 && query.size(-3) != key.size(-3);
  if (heads_differ && !enable_gqa) return static_cast<int64_t>(at::SDPBackend::math);
  if (query.dim() != key.dim() || query.dim() != value.dim()) return static_cast<int64_t>(at::SDPBackend::math);
  for (int64_t d = 0; d + 3 < query.dim(); ++d)
    if (key.size(d) != query.size(d) || value.size(d) != query.size(d))
      return static_cast<int64_t>(at::SDPBackend::math);
  return static_cast<int64_t>(at::SDPBackend::overrideable);
}

}  // namespace

}  // namespace torch_tpu::aten

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_tpu::aten::tpu_sdp_choice);
}
