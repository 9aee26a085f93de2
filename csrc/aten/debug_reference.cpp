#include "aten/debug_reference.h"

#include <ATen/ops/_scaled_dot_product_attention_math.h>
#include <torch/csrc/autograd/autograd.h>

#include "common/warning.h"

namespace torch_tpu::aten {

namespace {

using Tensors = std::vector<at::Tensor>;

// Half types are computed in float32 and rounded back, as the fused lowering
// and the CPU's flash kernel both accumulate; the math path in bfloat16 would
// round every intermediate and miss the tolerance on its own.
at::Tensor widen(const at::Tensor& t) {
  return t.defined() && at::isReducedFloatingType(t.scalar_type()) ? t.to(at::kFloat) : t;
}

std::optional<at::Tensor> opt_tensor(const c10::IValue& v) {
  if (v.isNone() || !v.toTensor().defined()) return std::nullopt;
  return v.toTensor();
}

std::optional<double> opt_double(const c10::IValue& v) {
  return v.isNone() ? std::nullopt : std::optional<double>(v.toDouble());
}

// The fused op reads grouped-query heads from the head counts alone.
bool grouped(const at::Tensor& q, const at::Tensor& k) { return q.dim() >= 3 && q.size(-3) != k.size(-3); }

struct Attention {
  at::Tensor q, k, v;
  std::optional<at::Tensor> bias;
  bool causal;
  std::optional<double> scale;

  at::Tensor forward() const {
    return std::get<0>(at::_scaled_dot_product_attention_math(q, k, v, bias, 0.0, causal, std::nullopt, scale,
                                                              grouped(q, k)));
  }
};

// _scaled_dot_product_fused_attention_overrideable(query, key, value,
// attn_bias, dropout_p, is_causal, return_debug_mask, *, scale): the output.
// A dropout draw cannot be reproduced on the CPU: nothing is compared.
bool with_dropout(const std::string& op, const c10::IValue& p) {
  if (p.toDouble() <= 0) return false;
  warn_once("debug_reference:" + op, "TORCH_TPU_DEBUG_COMPARE_CPU: " + op +
                                         " with dropout_p > 0 draws its own mask; its results are not compared");
  return true;
}

std::optional<Tensors> fused_attention(const std::vector<c10::IValue>& a) {
  if (with_dropout("aten::_scaled_dot_product_fused_attention_overrideable", a[4])) return Tensors{};
  const at::Tensor& q = a[0].toTensor();
  std::optional<at::Tensor> bias = opt_tensor(a[3]);
  if (bias) bias = widen(*bias);
  Attention at{widen(q), widen(a[1].toTensor()), widen(a[2].toTensor()), bias, a[5].toBool(), opt_double(a[7])};
  return Tensors{at.forward().to(q.scalar_type())};
}

// ..._backward(grad_out, query, key, value, attn_bias, grad_input_mask, out,
// logsumexp, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal,
// philox_seed, philox_offset, *, scale): the gradients of the math path's
// output, from autograd.
std::optional<Tensors> fused_attention_backward(const std::vector<c10::IValue>& a) {
  if (with_dropout("aten::_scaled_dot_product_fused_attention_overrideable_backward", a[12])) return Tensors{};
  // The op runs below autograd (its keys are excluded here) and perhaps
  // under a Python mode; the reference needs neither.
  c10::impl::ForceDispatchKeyGuard plain{c10::default_included_set, c10::default_excluded_set};
  at::AutoGradMode grad_mode(true);
  auto leaf = [](const at::Tensor& t) { return widen(t).detach().requires_grad_(true); };
  std::optional<at::Tensor> bias = opt_tensor(a[4]);
  const auto wanted = a[5].toBoolList();  // grad_input_mask
  const bool bias_grad = bias && bias->is_floating_point() && wanted.size() > 3 && wanted.get(3);
  if (bias) bias = bias_grad ? leaf(*bias) : *bias;
  Attention at{leaf(a[1].toTensor()), leaf(a[2].toTensor()), leaf(a[3].toTensor()), bias, a[13].toBool(),
               opt_double(a[16])};
  Tensors inputs{at.q, at.k, at.v};
  if (bias_grad) inputs.push_back(*bias);
  Tensors grads = torch::autograd::grad({at.forward()}, inputs, {widen(a[0].toTensor())});
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = grads[i].to(a[i + 1].toTensor().scalar_type());
  return grads;
}

using Reference = std::optional<Tensors> (*)(const std::vector<c10::IValue>&);

const std::unordered_map<std::string, Reference>& references() {
  static const std::unordered_map<std::string, Reference> table = {
      {"aten::_scaled_dot_product_fused_attention_overrideable", fused_attention},
      {"aten::_scaled_dot_product_fused_attention_overrideable_backward", fused_attention_backward},
  };
  return table;
}

}  // namespace

std::optional<Tensors> backend_only_reference(const std::string& op, const std::vector<c10::IValue>& args) {
  auto it = references().find(op);
  if (it == references().end()) return std::nullopt;
  return it->second(args);
}

}  // namespace torch_tpu::aten
