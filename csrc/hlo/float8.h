// The two 8-bit float formats PyTorch and StableHLO share, encoded from a
// double as PyTorch's conversions do (c10::Float8_e4m3fn, Float8_e5m2):
// rounded to nearest, ties to even, with subnormals. e4m3fn has no
// infinity: PyTorch saturates what lies past 448, infinities included, to
// +-448 (StableHLO's convert would give NaN; Builder::convert clamps first).
// e5m2 is IEEE-like: what rounds past 57344 is infinity. Constants in programs and Python numbers sent as parameters are
// encoded here, so they round as the CPU's tensors do.
#pragma once

#include <cstdint>

#include "hlo/types.h"

namespace torch_tpu::hlo {

bool is_float8(ElementType t);
uint8_t float8_bits(double v, ElementType t);  // t: F8E4M3FN or F8E5M2
constexpr double kFloat8E4M3FNMax = 448;

}  // namespace torch_tpu::hlo
