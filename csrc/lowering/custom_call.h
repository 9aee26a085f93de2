// User kernels (torch_tpu.stablehlo_op, torch_tpu.pallas.jax_op): each
// module text is registered once per process and called by a node of the
// custom-call lowering, so it is fused and captured like any lowered op.
#pragma once

#include <string>

#include "hlo/embedded_module.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

struct CustomModule {
  int id = -1;
  std::string op_name;  // the user's "namespace::name", for messages
  std::string text;     // as given
  hlo::EmbeddedModule embedded;
};

// Registers `text` for `op_name`, or returns the id it already has (the same
// op traced again for a signature it has seen reuses its programs). Throws
// Error(Value) when the text cannot be embedded.
int register_custom_module(const std::string& op_name, const std::string& text);
const CustomModule& custom_module(int id);

// The lowering of a custom call: arguments (Int module id, TensorList
// inputs). It is no ATen operator, so it is not in the registry of ATen
// names; nodes point at it directly.
const Lowering& custom_call_lowering();

}  // namespace torch_tpu::lowering
