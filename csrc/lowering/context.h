// What a lowering may ask of the program being built besides the builder:
// numbers and generator states become parameters of the program, so one
// executable serves every value (runtime/ records them and feeds them on
// each launch).
#pragma once

#include <string>

#include "hlo/builder.h"
#include "lowering/arg.h"

namespace torch_tpu::lowering {

class Context {
 public:
  explicit Context(hlo::Builder& b, hlo::ElementType default_float)
      : b(b), default_float(default_float) {}
  virtual ~Context() = default;

  // The value of a Number argument as a rank-0 parameter of type t.
  virtual hlo::Value number(const Arg& a, hlo::ElementType t) = 0;
  // The generator state of an Rng argument as a ui64[2] parameter.
  virtual hlo::Value rng_state(const Arg& a) = 0;
  // The custom-call target of platform kernel `name` (csrc/kernels/kernels.h)
  // with its handler registered, or "" where its composite lowering runs.
  // A lowering that emits the call (Builder::custom_call) keeps the composite
  // for "".
  virtual std::string kernel_target(const std::string& name) = 0;

  hlo::Builder& b;
  // torch.get_default_dtype(): the type of Python floats in promotion.
  const hlo::ElementType default_float;
};

}  // namespace torch_tpu::lowering
