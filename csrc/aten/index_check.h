#pragma once

#include "aten/pch.h"

namespace torch_tpu::aten {

// Debug mode: raises IndexError when an indexing op (gather, index_select,
// embedding, index, index_put) gets an index outside its dimension.
void check_indices(const std::string& op, const std::vector<c10::IValue>& values);
// Advanced indexing: `indices` is a Tensor?[] indexing self's leading dims.
void check_list(const std::string& op, const at::Tensor& self, const c10::IValue& indices);

}  // namespace torch_tpu::aten
