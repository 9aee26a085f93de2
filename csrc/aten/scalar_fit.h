#pragma once

#include <vector>

namespace torch_tpu::aten {

// Raises the CPU's "value cannot be converted to type T without overflow"
// when a Scalar argument the CPU converts to the op's element type does not
// fit it (int8 fill_(300), float32 full(1e40)). The device would wrap or
// saturate instead, silently.
void check_scalars_fit(const c10::FunctionSchema& schema, const std::vector<c10::IValue>& values);

}  // namespace torch_tpu::aten
