// The precision of float32 matrix products and convolutions on tpu, as
// PyTorch's float32 matmul precision says (matmul_precision.cpp).
#pragma once

#include <optional>

#include "hlo/builder.h"

namespace torch_tpu::aten {

// What the op being issued now gets: the setting of the open
// torch.tpu.precision block if there is one, else PyTorch's.
hlo::DotPrecision matmul_precision();

// torch.tpu.precision: sets (or, with nullopt, clears) the block's setting
// (process-wide, as PyTorch's); returns the one it replaces.
std::optional<hlo::DotPrecision> set_precision_override(std::optional<hlo::DotPrecision> p);

}  // namespace torch_tpu::aten
