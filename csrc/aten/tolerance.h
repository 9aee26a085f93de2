// The one tolerance table: how far a tpu result may be from the CPU's.
// Defaults are torch.testing.assert_close's per dtype; per-op overrides (for
// ops whose XLA algorithm differs from the CPU kernel's, each with its
// reason) are kept sorted by op name. Tests read it through
// torch_tpu.tolerance(); debug mode's CPU comparison uses it directly.
#pragma once

#include <string>

#include "hlo/types.h"

namespace torch_tpu {

struct Tolerance {
  double rtol = 0, atol = 0;
};

Tolerance tolerance(hlo::ElementType dtype, const std::string& op = "");

}  // namespace torch_tpu
