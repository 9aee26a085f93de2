// Runs one ATen op as one program. The program takes the base buffers of the
// storages involved as parameters, reads each input through its view, applies
// the lowering, and for in-place writes computes the storage's new base
// (runtime/view.h), so a launch needs no separate gather or scatter.
//
// Cache key: the lowering name, the default float type, and for every
// argument its kind and attributes; tensors contribute their storage slot
// (which storages are the same), base type and view geometry; numbers only
// their kind (their values are parameters); destinations their view, whether
// they replace the whole storage, and whether the old base is donated. A hit
// costs building that string and a hash lookup.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lowering/registry.h"
#include "runtime/storage.h"
#include "runtime/view.h"

namespace torch_tpu::runtime {

struct TensorInput {
  Storage* storage = nullptr;
  ViewGeometry view;
};

struct Destination {
  TensorInput target;
  // In-place ops may not narrow the result type (float into an int tensor);
  // copy_ may.
  bool check_cast = true;
};

struct OpCall {
  const lowering::Lowering* lowering = nullptr;
  lowering::Args args;  // tensor values are filled in while building
  // inputs[i] holds the tensors of args[i]: one for Tensor, one per entry for
  // TensorList (nullopt for None entries), none otherwise.
  std::vector<std::vector<std::optional<TensorInput>>> inputs;
  // destinations[j] receives output j; outputs past the end or without a
  // destination become new buffers.
  std::vector<std::optional<Destination>> destinations;
  int device = 0;
  hlo::ElementType default_float = hlo::ElementType::F32;
};

// Returns one buffer per lowering output; null for outputs written into a
// destination. Throws torch_tpu::Error for bad input (nothing launched).
std::vector<std::shared_ptr<DeviceBuffer>> run_op(OpCall& call);

// Uploads row-major host data as a new buffer.
std::shared_ptr<DeviceBuffer> upload(const void* data, const hlo::TensorType& type, int device);

// A contiguous buffer holding the view (the base itself when it is one).
std::shared_ptr<DeviceBuffer> read_contiguous(const TensorInput& input);

// Writes `src` (broadcast and converted) through the view `dst`. When `dst`
// covers its whole storage and `src` is already the right buffer, the
// storages share it instead (buffers are immutable, so sharing is a copy).
void copy_into(const TensorInput& dst, const TensorInput& src);

}  // namespace torch_tpu::runtime
