#pragma once

#include "aten/pch.h"

namespace torch_tpu::aten {

// Whether the op has integer results computed from its arguments (see
// op_results.cpp): its lowering returns two tensors fewer than its schema.
bool has_integer_results(const std::string& op);

// out=: each functional result is checked and copied into the out tensor at
// schema index written[k], resized first when its shape differs.
void copy_into_outs(const c10::FunctionSchema& schema, const std::vector<int>& written,
                    const std::vector<c10::IValue>& values, const std::vector<at::Tensor>& results);

// Pushes a functional op's results as its schema returns them: tensors,
// lists of tensors, or Python numbers. `values`: the op's arguments.
void push_results(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& values,
                  std::vector<at::Tensor>& results, torch::jit::Stack* stack);

}  // namespace torch_tpu::aten
