// Ops without a lowering. By default they raise NotImplementedError naming
// the op; with TORCH_TPU_CPU_FALLBACK=1 they run on the CPU (inputs copied
// to the host, results and mutated arguments copied back) with one warning
// per op.
//
// Sparse and quantized tensors have dispatch keys of their own: a tpu
// buffer holds a dense array, so every op on such a tensor (its creation by
// .to("tpu") first) raises NotImplementedError naming the op and the layout,
// instead of PyTorch's generic "could not run" or a half-made tensor.
#include <ATen/native/CPUFallback.h>

#include <mutex>
#include <set>

#include "aten/op_kernel.h"
#include "common/env.h"

namespace torch_tpu::aten {

namespace {

std::string op_name(const c10::OperatorHandle& op) {
  const auto& name = op.schema().operator_name();
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

}  // namespace

void unsupported_op(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  std::string full = op_name(op);
  TORCH_CHECK_NOT_IMPLEMENTED(env().cpu_fallback, "The operator '", full,
                              "' is not implemented for the tpu device (no StableHLO lowering). "
                              "Set TORCH_TPU_CPU_FALLBACK=1 to run it on the CPU instead.");
  static std::mutex mu;
  static auto& warned = *new std::set<std::string>;  // never destroyed: used during exit
  {
    std::lock_guard<std::mutex> lock(mu);
    if (warned.insert(full).second)
      TORCH_WARN("The operator '", full, "' has no tpu lowering and runs on the CPU "
                 "(TORCH_TPU_CPU_FALLBACK=1); this costs two copies per call.");
  }
  at::native::cpu_fallback(op, stack);
}

namespace {

template <const char* kLayout, const char* kInstead>
void unsupported_layout(const c10::OperatorHandle& op, torch::jit::Stack*) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, "The operator '", op_name(op), "' got a ", kLayout,
                              " tensor on tpu: tpu holds dense (strided) tensors only. ",
                              kInstead);
}

constexpr char kSparse[] = "sparse";
constexpr char kQuantized[] = "quantized";
constexpr char kToDense[] = "Call .to_dense() before moving the tensor to tpu.";
constexpr char kDequantize[] = "Call .dequantize() before moving the tensor to tpu.";

}  // namespace

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&unsupported_op>());
}

TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&unsupported_layout<kQuantized, kDequantize>>());
}

TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&unsupported_layout<kSparse, kToDense>>());
}

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&unsupported_layout<kSparse, kToDense>>());
}

}  // namespace torch_tpu::aten
