// Ops without a lowering. By default they raise NotImplementedError naming
// the op; with TORCH_TPU_CPU_FALLBACK=1 they run on the CPU (inputs copied
// to the host, results and mutated arguments copied back) with one warning
// per op.
#include <ATen/native/CPUFallback.h>

#include <mutex>
#include <set>

#include "aten/op_kernel.h"
#include "common/env.h"

namespace torch_tpu::aten {

void unsupported_op(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& name = op.schema().operator_name();
  std::string full = name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
  TORCH_CHECK_NOT_IMPLEMENTED(env().cpu_fallback, "The operator '", full,
                              "' is not implemented for the tpu device (no StableHLO lowering). "
                              "Set TORCH_TPU_CPU_FALLBACK=1 to run it on the CPU instead.");
  static std::mutex mu;
  static std::set<std::string> warned;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (warned.insert(full).second)
      TORCH_WARN("The operator '", full, "' has no tpu lowering and runs on the CPU "
                 "(TORCH_TPU_CPU_FALLBACK=1); this costs two copies per call.");
  }
  at::native::cpu_fallback(op, stack);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&unsupported_op>());
}

}  // namespace torch_tpu::aten
