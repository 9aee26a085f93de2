// out= forms op_kernel.cpp cannot route: their functional op both returns
// results and updates arguments (batch norm's running statistics), so the
// out= schema has written arguments of both kinds. Each runs the functional
// op, then checks, resizes and fills the outs as the CPU's kernel does.
#include <ATen/native/Resize.h>

#include "aten/op_kernel.h"

namespace torch_tpu::aten {

at::Tensor& copy_to_out(const at::Tensor& result, at::Tensor& out) {
  at::native::resize_output(out, result.sizes());
  return out.copy_(result);
}

namespace {

void fill_out(const at::Tensor& result, at::Tensor& out) {
  TORCH_CHECK(out.device() == result.device(), "Expected out tensor to have device ", result.device(),
              ", but got ", out.device(), " instead");
  TORCH_CHECK(out.scalar_type() == result.scalar_type(), "expected scalar type ", result.scalar_type(),
              " but found ", out.scalar_type());
  copy_to_out(result, out);
}

std::tuple<at::Tensor&, at::Tensor&, at::Tensor&> batch_norm_legit_out(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    at::Tensor& running_mean, at::Tensor& running_var, bool training, double momentum, double eps, at::Tensor& out,
    at::Tensor& save_mean, at::Tensor& save_invstd) {
  auto [y, mean, invstd] =
      at::_native_batch_norm_legit(input, weight, bias, running_mean, running_var, training, momentum, eps);
  fill_out(y, out);
  // Evaluation saves no statistics: the CPU leaves those outs as they are.
  if (training) {
    fill_out(mean, save_mean);
    fill_out(invstd, save_invstd);
  }
  return {out, save_mean, save_invstd};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_native_batch_norm_legit.out", TORCH_FN(batch_norm_legit_out));
}

}  // namespace torch_tpu::aten
