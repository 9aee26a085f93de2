// A captured torch.compile program and the inputs it takes (capture.cpp
// captures it, compiled_call.cpp calls it).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "aten/pch.h"
#include "runtime/executor.h"

namespace torch_tpu::aten {

// Contiguous from offset 0 over its whole storage.
bool is_whole_base(const at::TensorBase& t);

// The buffer behind a program input. A contiguous tensor covering its whole
// storage qualifies even when the buffer has another shape (a (3,) bias grad
// over a (1, 3) buffer): the program is keyed by the buffer's type and
// reshapes. Raises ValueError ("... whole storage ...") for any other tensor.
std::shared_ptr<runtime::DeviceBuffer> whole_base(const at::Tensor& t, const char* what);

struct CapturedCall {
  std::shared_ptr<runtime::CapturedProgram> program;
  std::vector<int> mutated;  // inputs written by the program, in output order after the plain ones
  int device = 0;

  // Launches with `inputs` (tensors of the captured types); returns the plain
  // results and writes the mutated inputs' new values into them. nullopt,
  // launching nothing, if an input is not its storage's whole buffer.
  std::optional<std::vector<at::Tensor>> run(const std::vector<at::Tensor>& inputs) const;
};

}  // namespace torch_tpu::aten
