// A StableHLO module written elsewhere (by JAX, by hand) made callable from
// the modules the builder prints: its functions are copied into ours as
// private functions and its `@main` is called with `func.call`.
#pragma once

#include <string>
#include <vector>

#include "hlo/types.h"

namespace torch_tpu::hlo {

struct EmbeddedModule {
  std::string entry;       // symbol of the renamed @main, without '@'
  std::vector<TensorType> inputs, outputs;  // @main's signature
  std::string functions;   // the module's func.func ops, renamed, all private
};

// Every symbol the module defines gets `prefix` in front, so that modules
// embedded in one program never clash (and never clash with our @main).
// Location information is dropped. Throws Error(Value) naming what it cannot
// read: no @main, a type that is not a static tensor of a known element type.
EmbeddedModule embed_module(const std::string& text, const std::string& prefix);

// "tensor<2x3xf32>" -> TensorType; throws Error(Value) otherwise.
TensorType parse_tensor_type(const std::string& text);

}  // namespace torch_tpu::hlo
