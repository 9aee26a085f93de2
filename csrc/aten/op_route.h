#pragma once

#include "aten/pch.h"
#include "lowering/registry.h"

namespace torch_tpu::aten {

// Functional: returns new tensors. InPlace: `add_` writes self. Out: `add.out`
// writes kwarg-only outs. Mutating: an op that returns new tensors and also
// updates some arguments (batch norm's running statistics): its lowering
// returns the schema's results followed by the new values of those arguments.
enum class Variant { Functional, InPlace, Out, Mutating };

struct Route {
  std::string op_name;  // "aten::add.Tensor"
  const lowering::Lowering* lowering = nullptr;
  Variant variant = Variant::Functional;
  std::vector<int> written;  // schema indices of mutated arguments, in output order
  // Trailing arguments the functional op has and this variant lacks (out=
  // factories: dtype, layout, device, pin_memory); they take their defaults,
  // and `dtype` takes the out tensor's.
  std::vector<c10::Argument> extra;
  // native_batch_norm updates running_mean/var in training although its
  // schema does not say so: then the mutating twin runs instead.
  const lowering::Lowering* training_twin = nullptr;
};

// The route of an ATen overload (see op_route.cpp); its lowering is null
// when it has none.
const Route& route_of(const c10::OperatorHandle& op);
// The route this call takes: `given`, or for native_batch_norm in training
// its mutating twin, built in `twin`.
const Route& route_for_call(const Route& given, const std::vector<c10::IValue>& values, Route& twin);
// "aten::add.Tensor"
std::string full_name(const c10::OperatorName& n);

}  // namespace torch_tpu::aten
