// Host bytes of a number in any element type: how numbers become program
// parameters.
#pragma once

#include <cstdint>

#include "hlo/types.h"
#include "lowering/arg.h"

namespace torch_tpu::runtime {

// Writes hlo::byte_size(t) bytes (at most 16) to `out`, converting like a
// C++ static_cast (floats to ints truncate; half types round to nearest even).
void encode_number(const lowering::Number& n, hlo::ElementType t, uint8_t* out);

uint16_t float_to_half(float f);
uint16_t float_to_bfloat16(float f);

}  // namespace torch_tpu::runtime
