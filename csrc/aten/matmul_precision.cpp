// PyTorch keeps the float32 matmul precision in two vocabularies that can
// disagree: the legacy one (torch.set_float32_matmul_precision,
// torch.backends.cuda.matmul.allow_tf32) and the per-backend fp32_precision
// of torch 2.9+ (torch.backends.cuda.matmul.fp32_precision, mkldnn's).
// set_float32_matmul_precision writes both: "highest" -> cuda "ieee",
// "high" -> cuda "tf32" and mkldnn "tf32", "medium" -> cuda "tf32" and
// mkldnn "bf16"; allow_tf32 writes cuda's. torch.get_float32_matmul_precision()
// raises when the two disagree (set "high", then allow_tf32 = False), so it
// cannot be asked on every op. The per-backend values always answer, and a
// tpu plays the role the CUDA device plays for its user: cuda's matmul value
// says whether precision may be lowered at all ("tf32", directly or
// inherited from torch.backends.fp32_precision), and mkldnn's "bf16" -- only
// "medium" sets it -- how far. torch.backends.cudnn.allow_tf32 is not read:
// it is True by default, which would lower every convolution's precision
// unasked; convolutions follow the matmul setting, as on the CPU.
#include "aten/matmul_precision.h"

#include <ATen/Context.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <string>

namespace torch_tpu::aten {

namespace {

// Process-wide, as PyTorch's own setting is: the backward of a block's ops
// runs on autograd's device thread, and must see the block's setting too.
// -1: no block is open.
std::atomic<int> override_precision{-1};

}  // namespace

hlo::DotPrecision matmul_precision() {
  int overridden = override_precision.load(std::memory_order_relaxed);
  if (overridden >= 0) return static_cast<hlo::DotPrecision>(overridden);
  const at::Context& ctx = at::globalContext();
  if (ctx.float32Precision(at::Float32Backend::CUDA, at::Float32Op::MATMUL) != at::Float32Precision::TF32)
    return hlo::DotPrecision::Highest;
  if (ctx.float32Precision(at::Float32Backend::MKLDNN, at::Float32Op::MATMUL) == at::Float32Precision::BF16)
    return hlo::DotPrecision::Default;
  return hlo::DotPrecision::High;
}

std::optional<hlo::DotPrecision> set_precision_override(std::optional<hlo::DotPrecision> p) {
  int previous = override_precision.exchange(p ? static_cast<int>(*p) : -1);
  if (previous < 0) return std::nullopt;
  return static_cast<hlo::DotPrecision>(previous);
}

namespace {

// PyTorch's names for the three settings.
const char* torch_name(hlo::DotPrecision p) {
  switch (p) {
    case hlo::DotPrecision::Default: return "medium";
    case hlo::DotPrecision::High: return "high";
    case hlo::DotPrecision::Highest: return "highest";
  }
  return "highest";
}

std::optional<hlo::DotPrecision> from_torch_name(const std::optional<std::string>& name) {
  if (!name) return std::nullopt;
  for (auto p : {hlo::DotPrecision::Default, hlo::DotPrecision::High, hlo::DotPrecision::Highest})
    if (*name == torch_name(p)) return p;
  TORCH_CHECK_VALUE(false, "torch.tpu.precision: expected 'highest', 'high' or 'medium', got '", *name, "'");
}

}  // namespace

void bind_matmul_precision(pybind11::module& m) {
  m.def("_matmul_precision", [] { return std::string(torch_name(matmul_precision())); },
        "The float32 matmul precision ops issued now get ('highest', 'high' or 'medium')");
  m.def(
      "_set_matmul_precision_override",
      [](std::optional<std::string> name) -> std::optional<std::string> {
        auto previous = set_precision_override(from_torch_name(name));
        if (!previous) return std::nullopt;
        return std::string(torch_name(*previous));
      },
      "Sets torch.tpu.precision (None clears it); returns the previous one");
}

}  // namespace torch_tpu::aten
