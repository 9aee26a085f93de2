// Ops whose CPU kernels check the values of an input, not only its shape,
// before computing: embedding_renorm_ (each index names a row of the table),
// multilabel_margin_loss (each target is a class or -1), torch.histogram /
// histc over the data's own range (it must be finite) and _assert_async (its
// one value is nonzero). A device cannot raise, and the results would look
// plausible, so the verdict is read back first, as multinomial.cpp does: one
// documented host sync per call (it waits for the work producing the values
// and cuts a deferred graph), then the lowering runs. The argument checks
// (rank, dtype) are the lowering's and come first, as on the CPU: the values
// are read only for valid arguments.
#include <cmath>
#include <string>

#include "aten/op_kernel.h"

namespace torch_tpu::aten {

namespace {

// embedding_renorm_(self, indices, max_norm, norm_type). The CPU renorms
// self[i] for each distinct index in ascending order: the first it cannot
// select is the smallest index outside [-rows, rows).
void checked_embedding_renorm(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  auto args = torch::jit::last(*stack, op.schema().arguments().size());
  const at::Tensor& self = args[0].toTensor();
  const at::Tensor& indices = args[1].toTensor();
  bool index_type = indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt;
  if (self.dim() == 2 && index_type && indices.numel() > 0) {
    int64_t rows = self.size(0);
    at::Tensor bad = indices.lt(-rows).logical_or(indices.ge(rows));
    if (bad.any().item<bool>()) {
      int64_t first = indices.masked_select(bad).min().item<int64_t>();
      TORCH_CHECK_INDEX(false, "select(): index ", first, " out of range for tensor of size ", self.sizes(),
                        " at dimension 0");
    }
  }
  lowered_op_kernel(op, stack);
}

// multilabel_margin_loss_forward(self, target, reduction[, *, output, is_target]):
// every target value is a class of self's last dimension or -1 (its end mark).
void checked_multilabel_margin_loss(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  auto args = torch::jit::last(*stack, op.schema().arguments().size());
  const at::Tensor& self = args[0].toTensor();
  const at::Tensor& target = args[1].toTensor();
  if (self.dim() <= 2 && target.scalar_type() == at::kLong && target.sizes() == self.sizes() &&
      target.numel() > 0) {
    int64_t classes = self.dim() == 0 ? 1 : self.size(-1);
    TORCH_CHECK(target.ge(-1).logical_and(target.lt(classes)).all().item<bool>(),
                "argument #2 'target' is out of range");
  }
  lowered_op_kernel(op, stack);
}

// The data's [min, max] when a histogram takes its range from the data; NaN
// anywhere makes both NaN, as the CPU's reduction does.
std::pair<double, double> data_range(const at::Tensor& self) {
  auto [lo, hi] = at::aminmax(self);
  return {lo.item<double>(), hi.item<double>()};
}

// histogram.bin_ct(self, bins, *, range=None, weight, density[, out...]).
void checked_histogram(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  auto args = torch::jit::last(*stack, op.schema().arguments().size());
  const at::Tensor& self = args[0].toTensor();
  bool counted_type = self.scalar_type() == at::kFloat || self.scalar_type() == at::kDouble;
  if (args[2].isNone() && counted_type && self.numel() > 0) {
    auto [lo, hi] = data_range(self);
    TORCH_CHECK(std::isfinite(lo) && std::isfinite(hi), "torch.histogramdd: dimension 0's range [", lo, ", ", hi,
                "] is not finite");
  }
  lowered_op_kernel(op, stack);
}

// histc(self, bins, min, max[, *, out]): min == max takes the data's range.
void checked_histc(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  auto args = torch::jit::last(*stack, op.schema().arguments().size());
  const at::Tensor& self = args[0].toTensor();
  if (args[2].toScalar().toDouble() == args[3].toScalar().toDouble() && at::isFloatingType(self.scalar_type()) &&
      self.numel() > 0) {
    auto [lo, hi] = data_range(self);
    TORCH_CHECK(std::isfinite(lo) && std::isfinite(hi), "torch.histc: range of [", lo, ", ", hi, "] is not finite");
  }
  lowered_op_kernel(op, stack);
}

// _assert_async(self[, assert_msg]): raises when self's one value is zero.
// CUDA checks on the device and reports later; here the value is read back,
// so the error comes at the call, as on the CPU. (Under torch.compile the
// check is a program output instead: python/torch_tpu/compile/dynamo.py.)
void assert_nonzero(const at::Tensor& self, const char* message) {
  TORCH_CHECK(self.numel() != 0, "Boolean value of Tensor with no values is ambiguous");
  TORCH_CHECK(self.numel() == 1, "Boolean value of Tensor with more than one value is ambiguous");
  TORCH_CHECK(self.ne(0).item<bool>(), message);
}
void assert_async(const at::Tensor& self) {
  assert_nonzero(self, "Expected Tensor with single nonzero value, but got zero");
}
void assert_async_msg(const at::Tensor& self, c10::string_view message) {
  assert_nonzero(self, std::string(message).c_str());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_assert_async", &assert_async);
  m.impl("_assert_async.msg", &assert_async_msg);
  m.impl("embedding_renorm_", torch::CppFunction::makeFromBoxedFunction<&checked_embedding_renorm>());
  m.impl("histc", torch::CppFunction::makeFromBoxedFunction<&checked_histc>());
  m.impl("histc.out", torch::CppFunction::makeFromBoxedFunction<&checked_histc>());
  m.impl("histogram.bin_ct", torch::CppFunction::makeFromBoxedFunction<&checked_histogram>());
  m.impl("histogram.bin_ct_out", torch::CppFunction::makeFromBoxedFunction<&checked_histogram>());
  for (const char* name : {"multilabel_margin_loss_forward", "multilabel_margin_loss_forward.output"})
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&checked_multilabel_margin_loss>());
}

}  // namespace torch_tpu::aten
