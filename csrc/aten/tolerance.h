// The one tolerance table: how far a tpu result may be from the CPU's.
// Defaults are torch.testing.assert_close's per dtype; per-op overrides (for
// ops whose XLA algorithm differs from the CPU kernel's, each with its
// reason) are kept sorted by op name. Tests read it through
// torch_tpu.tolerance(); debug mode's CPU comparison uses it directly.
// It lives beside those two readers: keyed by hlo's element types, it
// cannot sit in common/, the floor that includes nothing above it.
#pragma once

#include <string>

#include "hlo/types.h"

namespace torch_tpu::aten {

struct Tolerance {
  double rtol = 0, atol = 0;
};

Tolerance tolerance(hlo::ElementType dtype, const std::string& op = "");

}  // namespace torch_tpu::aten
