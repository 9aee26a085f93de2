// The shape classes where the log_softmax kernel replaces the composite. The
// kernel is a custom call: opaque to XLA, which fuses nothing into it, so it
// pays off where the composite's passes over the data cost more than the
// kernel's one: long rows (a vocabulary) of enough data.
#include "lowering/log_softmax_kernel.h"

namespace torch_tpu::lowering {

namespace {

using E = ElementType;

// Below either bound the composite runs.
constexpr int64_t kMinClasses = 1024;
constexpr int64_t kMinElements = int64_t(1) << 20;

// The target where x's [rows, classes] view over its last dim `dim` runs the
// kernel `name`, else "".
std::string kernel_for(Context& ctx, const char* name, const Value& x, int64_t dim) {
  if (x.dtype() != E::F32 || x.rank() < 1 || dim != x.rank() - 1) return "";
  const int64_t classes = x.shape().back(), elements = x.type.numel();
  if (classes < kMinClasses || elements < kMinElements) return "";
  return ctx.kernel_target(name);
}

Shape matrix(const Value& x) { return {x.type.numel() / x.shape().back(), x.shape().back()}; }

}  // namespace

std::optional<Value> log_softmax_kernel(Context& ctx, const Value& x, int64_t dim) {
  std::string target = kernel_for(ctx, "log_softmax", x, dim);
  if (target.empty()) return std::nullopt;
  hlo::Builder& b = ctx.b;
  const Shape m = matrix(x);
  Value r = b.custom_call(target, {b.reshape(x, m)}, {hlo::TensorType{E::F32, m}}, {})[0];
  return b.reshape(r, x.shape());
}

std::optional<Value> log_softmax_backward_kernel(Context& ctx, const Value& grad, const Value& out, int64_t dim) {
  if (grad.dtype() != out.dtype() || grad.shape() != out.shape()) return std::nullopt;
  std::string target = kernel_for(ctx, "log_softmax_backward", out, dim);
  if (target.empty()) return std::nullopt;
  hlo::Builder& b = ctx.b;
  const Shape m = matrix(out);
  Value r = b.custom_call(target, {b.reshape(grad, m), b.reshape(out, m)}, {hlo::TensorType{E::F32, m}}, {})[0];
  return b.reshape(r, out.shape());
}

}  // namespace torch_tpu::lowering
