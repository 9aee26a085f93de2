#pragma once

#include "aten/pch.h"

namespace torch_tpu::aten {

// The boxed kernel of every lowered op (see op_kernel.cpp).
void lowered_op_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// Registers lowered_op_kernel for every ATen overload that routes to a lowering.
void register_lowered_ops(torch::Library& lib);
// An op without a lowering: NotImplementedError naming it, or with
// TORCH_TPU_CPU_FALLBACK=1 the CPU kernel, warning once per op.
void unsupported_op(const c10::OperatorHandle& op, torch::jit::Stack* stack);
// An out= argument given a result computed by the functional op: resized as
// ATen's out= kernels resize (a warning when it had elements), then filled.
at::Tensor& copy_to_out(const at::Tensor& result, at::Tensor& out);

}  // namespace torch_tpu::aten
