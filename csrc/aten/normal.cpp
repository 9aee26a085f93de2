// normal(mean, std) with a tensor mean or std: a standard normal draw on the
// device (normal_, lowered), scaled by std and shifted by mean there. The CPU
// rejects a negative (or NaN) std element; a device cannot raise, so, as
// multinomial.cpp does for its probabilities, the verdict is read back: one
// documented host sync per call (a one-element read that waits for the work
// producing std and cuts a deferred graph).
#include <ATen/ExpandUtils.h>

#include "aten/op_kernel.h"

namespace torch_tpu::aten {

namespace {

// The CPU's checks and messages, in its order.
void check_std_tensor(const at::Tensor& std) {
  TORCH_CHECK(!std.is_complex(), "normal expects standard deviation to be non-complex");
  TORCH_CHECK(std.numel() == 0 || std.min().ge(0).item<bool>(), "normal expects all elements of std >= 0.0");
}

void check_std_number(double std) { TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std); }

at::Tensor normal_tensor_float(const at::Tensor& mean, double std, std::optional<at::Generator> gen) {
  check_std_number(std);
  at::Tensor out = at::empty_like(mean, at::MemoryFormat::Contiguous);
  out.normal_(0, std, gen);
  return out.add_(mean);
}

at::Tensor normal_float_tensor(double mean, const at::Tensor& std, std::optional<at::Generator> gen) {
  check_std_tensor(std);
  at::Tensor out = at::empty_like(std, at::MemoryFormat::Contiguous);
  out.normal_(0, 1, gen);
  return out.mul_(std).add_(mean);
}

at::Tensor normal_tensor_tensor(const at::Tensor& mean, const at::Tensor& std, std::optional<at::Generator> gen) {
  check_std_tensor(std);
  at::Tensor out = at::empty(at::infer_size(mean.sizes(), std.sizes()), mean.options());
  out.normal_(0, 1, gen);
  return out.mul_(std).add_(mean);
}

at::Tensor& normal_tensor_float_out(const at::Tensor& mean, double std, std::optional<at::Generator> gen,
                                    at::Tensor& out) {
  return copy_to_out(normal_tensor_float(mean, std, gen), out);
}

at::Tensor& normal_float_tensor_out(double mean, const at::Tensor& std, std::optional<at::Generator> gen,
                                    at::Tensor& out) {
  return copy_to_out(normal_float_tensor(mean, std, gen), out);
}

at::Tensor& normal_tensor_tensor_out(const at::Tensor& mean, const at::Tensor& std, std::optional<at::Generator> gen,
                                     at::Tensor& out) {
  return copy_to_out(normal_tensor_tensor(mean, std, gen), out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("normal.Tensor_float", TORCH_FN(normal_tensor_float));
  m.impl("normal.Tensor_float_out", TORCH_FN(normal_tensor_float_out));
  m.impl("normal.Tensor_Tensor", TORCH_FN(normal_tensor_tensor));
  m.impl("normal.Tensor_Tensor_out", TORCH_FN(normal_tensor_tensor_out));
  m.impl("normal.float_Tensor", TORCH_FN(normal_float_tensor));
  m.impl("normal.float_Tensor_out", TORCH_FN(normal_float_tensor_out));
}

}  // namespace torch_tpu::aten
