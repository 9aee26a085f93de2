// Automatic dynamic dimensions: a dimension whose size varies is padded
// without being marked.
//
// Where user code copies tensors from the host to the device (not torch's
// own code, so never Module.to's parameters), each is remembered by its
// place: the Python line that copied it (aten/origin.h), its dtype, rank and
// device. When a tensor at a place differs from the one before it there in
// exactly one dimension, that dimension of the place becomes dynamic, and
// from then on the tensors copied there are padded along it to their bucket
// (runtime/dynamic_dims.h), so the ops reading them compile per bucket.
// Two unrelated tensors sharing a place can only make a dimension dynamic
// that need not be: padding changes no value (every op either has a rule
// that keeps the padding out of valid results or reads the exact tensor), so
// the cost of a wrong guess is time, never a result.
#pragma once

#include <optional>
#include <string>

#include "hlo/types.h"

namespace torch_tpu::runtime {

// Off: TORCH_TPU_AUTO_DYNAMIC=0, or torch_tpu.dynamic.config(automatic=False).
bool auto_dynamic_enabled();
void set_auto_dynamic(bool enabled);

// The dimension along which a tensor of `type` copied to `device` from
// `place` is padded, if any. The caller asks only while auto_dynamic_enabled()
// (before it looks the place up) and leaves the dimension static where the
// user marked it so (torch._dynamo.mark_static).
std::optional<int> auto_dynamic_dim(const std::string& place, const hlo::TensorType& type, int device);

// Forgets every place (for tests).
void reset_auto_dynamic();

}  // namespace torch_tpu::runtime
