// multinomial's checks of the probabilities' values. The CPU rejects a
// negative, infinite or NaN probability and a row that sums to zero, and so
// does CUDA, whose fast path (no replacement, or one sample) reads the
// verdict back with .item(). A device cannot raise, and an invalid row would
// give indices that look fine, so the probabilities are read back here too:
// one documented host sync per call (it waits for the work producing them,
// and cuts a deferred graph), then the lowering samples on the device. The
// argument checks (rank, dtype, counts) are the lowering's, and come first,
// as on the CPU.
#include <cmath>

#include "aten/op_kernel.h"

namespace torch_tpu::aten {

namespace {

// The CPU's messages: its fast path checks the whole tensor, then the row
// sums; its sampler with replacement checks row by row, entry by entry.
void check_values(const at::Tensor& probs, bool fast_path) {
  int64_t c = probs.size(-1);
  TORCH_CHECK(c > 0, "invalid multinomial distribution (sum of probabilities <= 0)");
  at::Tensor host = probs.detach().to(c10::kCPU, c10::kDouble).contiguous().reshape({-1, c});
  const double* p = host.const_data_ptr<double>();
  int64_t rows = host.size(0);
  if (fast_path) {
    for (int64_t i = 0; i < rows * c; ++i)
      TORCH_CHECK(p[i] >= 0 && p[i] < INFINITY, "probability tensor contains either `inf`, `nan` or element < 0");
  }
  for (int64_t r = 0; r < rows; ++r) {
    double total = 0;
    for (int64_t j = 0; j < c; ++j) {
      double v = p[r * c + j];
      TORCH_CHECK(v >= 0, "invalid multinomial distribution (encountering probability entry < 0)");
      TORCH_CHECK(std::isfinite(v), "invalid multinomial distribution (encountering probability entry = infinity or NaN)");
      total += v;
    }
    TORCH_CHECK(total > 0, "invalid multinomial distribution (sum of probabilities <= 0)");
  }
}

// multinomial(self, num_samples, replacement, *, generator[, out]).
void checked_multinomial(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  auto args = torch::jit::last(*stack, op.schema().arguments().size());
  const at::Tensor& self = args[0].toTensor();
  int64_t n = args[1].toInt();
  bool replacement = args[2].toBool();
  // Arguments the lowering rejects (with the CPU's message) go to it first;
  // an empty result reads no values, as on the CPU.
  bool valid_args = (self.dim() == 1 || self.dim() == 2) && at::isFloatingType(self.scalar_type()) && n > 0 &&
                    (replacement || n <= self.size(-1));
  if (valid_args && (self.dim() == 1 || self.size(0) > 0)) check_values(self, !replacement || n == 1);
  lowered_op_kernel(op, stack);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("multinomial", torch::CppFunction::makeFromBoxedFunction<&checked_multinomial>());
  m.impl("multinomial.out", torch::CppFunction::makeFromBoxedFunction<&checked_multinomial>());
}

}  // namespace torch_tpu::aten
