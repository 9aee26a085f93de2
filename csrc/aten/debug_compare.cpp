#include "aten/debug_compare.h"

#include "aten/debug_reference.h"
#include "aten/origin.h"
#include "aten/tensor_bridge.h"
#include "aten/tolerance.h"
#include "common/warning.h"

namespace torch_tpu::aten {

namespace {

// Test hook: the next comparison shifts the CPU reference by this much, so
// tests can see a mismatch reported without a wrong lowering.
double reference_offset = 0;

c10::IValue to_host(const c10::IValue& v) {
  // A factory op's device argument (arange(..., device="tpu")): left on tpu,
  // the CPU reference would dispatch back here, without end.
  if (v.isDevice() && v.toDevice().type() == c10::DeviceType::PrivateUse1) return c10::IValue(c10::Device(c10::kCPU));
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    return t.defined() ? c10::IValue(t.detach().to(c10::kCPU).clone()) : v;
  }
  if (v.isTensorList()) {
    std::vector<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorVector())
      out.push_back(t.defined() ? t.detach().to(c10::kCPU).clone() : t);
    return c10::IValue(out);
  }
  if (v.isList()) {
    c10::impl::GenericList out(v.toList().elementType());
    for (const c10::IValue& e : v.toListRef()) out.push_back(to_host(e));
    return c10::IValue(out);
  }
  return v;
}

void compare(const std::string& op, const at::Tensor& tpu, const at::Tensor& cpu) {
  if (!tpu.defined() || !cpu.defined()) return;
  at::Tensor got = tpu.detach().to(c10::kCPU);
  TORCH_CHECK(got.sizes() == cpu.sizes(), "TORCH_TPU_DEBUG_COMPARE_CPU: tpu op '", op, "'",
              " returned shape ", got.sizes(), " but the CPU returns ", cpu.sizes());
  if (got.numel() == 0) return;
  Tolerance tol = tolerance(to_hlo(cpu.scalar_type()), op);
  at::Tensor a = got.to(c10::kDouble), b = cpu.to(c10::kDouble) + reference_offset;
  reference_offset = 0;
  if (cpu.is_complex()) {
    a = at::view_as_real(got.to(c10::kComplexDouble));
    b = at::view_as_real(cpu.to(c10::kComplexDouble));
  }
  at::Tensor both_nan = a.isnan().logical_and(b.isnan());
  at::Tensor diff = (a - b).abs().masked_fill(both_nan, 0);
  at::Tensor same_inf = a.eq(b);  // equal infinities have an inf - inf = nan difference
  diff = diff.masked_fill(same_inf, 0);
  at::Tensor allowed = b.abs() * tol.rtol + tol.atol;
  bool ok = diff.le(allowed).all().item<bool>();
  if (ok) return;
  double max_abs = diff.max().item<double>();
  double max_rel = (diff / b.abs().clamp_min(1e-30)).max().item<double>();
  auto origin = python_origin();
  TORCH_CHECK(false, "TORCH_TPU_DEBUG_COMPARE_CPU: tpu op '", op, "'",
              origin ? " (at " + *origin + ")" : std::string(), " differs from the CPU: max abs error ",
              max_abs, ", max rel error ", max_rel, " (allowed rtol ", tol.rtol, ", atol ", tol.atol,
              ", dtype ", cpu.scalar_type(), ")");
}

}  // namespace

void offset_next_reference(double delta) { reference_offset = delta; }

std::vector<c10::IValue> host_copies(const std::vector<c10::IValue>& values) {
  std::vector<c10::IValue> out;
  out.reserve(values.size());
  for (const auto& v : values) out.push_back(to_host(v));
  return out;
}

void compare_with_cpu(const c10::OperatorHandle& op, std::vector<c10::IValue> host_args,
                      const std::vector<int>& written, const std::vector<at::Tensor>& tpu_results) {
  const auto& name = op.schema().operator_name();
  std::string full = name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
  std::vector<at::Tensor> cpu_results;
  if (auto reference = backend_only_reference(full, host_args)) {
    cpu_results = std::move(*reference);
  } else {
    torch::jit::Stack stack(host_args.begin(), host_args.end());
    try {
      op.callBoxed(&stack);
    } catch (const c10::NotImplementedError&) {
      // An op only backends define, with no reference of our own: it is
      // left uncompared, and said so once.
      warn_once("debug_compare:" + full, "TORCH_TPU_DEBUG_COMPARE_CPU: " + full +
                                             " has no CPU kernel; its results are not compared");
      return;
    }
    if (!written.empty()) {
      for (int w : written)
        if (host_args[w].isTensor()) cpu_results.push_back(host_args[w].toTensor());
    } else {
      for (const auto& v : stack) {
        if (v.isTensor()) cpu_results.push_back(v.toTensor());
        else if (v.isTensorList())
          for (const auto& t : v.toTensorVector()) cpu_results.push_back(t);
      }
    }
  }
  for (size_t i = 0; i < cpu_results.size() && i < tpu_results.size(); ++i)
    compare(full, tpu_results[i], cpu_results[i]);
}

}  // namespace torch_tpu::aten
