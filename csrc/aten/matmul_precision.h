// The precision of float32 matrix products and convolutions on tpu, as
// PyTorch's float32 matmul precision says (matmul_precision.cpp).
#pragma once

#include <optional>

#include "hlo/builder.h"

namespace torch_tpu::aten {

// What the op being issued now gets: the torch.tpu.precision block's
// setting on this thread if one is open, else PyTorch's global setting.
hlo::DotPrecision matmul_precision();

// torch.tpu.precision: sets (or, with nullopt, clears) this thread's
// setting; returns the one it replaces.
std::optional<hlo::DotPrecision> set_precision_override(std::optional<hlo::DotPrecision> p);

}  // namespace torch_tpu::aten
