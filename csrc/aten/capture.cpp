// torch.compile's bridge: Python runs an FX graph's ops on real `tpu`
// tensors between _capture_begin and _capture_end; the runtime records them
// into one graph (runtime/executor.h, CapturedProgram) that is compiled once
// and launched on every later call. Inputs must be tensors that are their
// storage's whole base (the Python side makes them so); an input whose
// storage was written during the capture is a mutated input: its new value
// is an extra output of the program, written back into the caller's tensor.
#include <torch/csrc/utils/pybind.h>

#include "aten/compiled_call.h"
#include "aten/tensor_bridge.h"
#include "runtime/executor.h"

namespace py = pybind11;

namespace torch_tpu::aten {

namespace {

struct Capture {
  std::vector<at::Tensor> inputs;
  std::vector<std::shared_ptr<runtime::DeviceBuffer>> bases;
};
Capture& active = *new Capture;  // never destroyed: it holds tensors

}  // namespace

void bind_capture(py::module& m) {
  // Opaque: compiled_call.cpp's CompiledCall launches it.
  py::class_<CapturedCall>(m, "CapturedProgram");

  m.def("_capture_begin", [](int device, const std::vector<at::Tensor>& inputs) {
    Capture c;
    for (const auto& t : inputs) {
      c.inputs.push_back(t);
      c.bases.push_back(whole_base(t, "captured input"));
    }
    translate_errors([&] { runtime::begin_capture(device); });
    active = std::move(c);
  });
  m.def("_capture_abort", []() {
    for (size_t i = 0; i < active.inputs.size(); ++i) assign_base(active.inputs[i], active.bases[i]);
    active = Capture();
    runtime::abort_capture();
  });
  m.def("_capture_end", [](const std::vector<at::Tensor>& outputs) {
    Capture c = std::move(active);
    active = Capture();
    std::vector<std::shared_ptr<runtime::DeviceBuffer>> outs;
    for (const auto& t : outputs) {
      TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1,
                  "compiled graph output must be a tpu tensor, got ", t.device());
      outs.push_back(translate_errors([&] { return runtime::read_contiguous(input_of(t)); }));
    }
    std::vector<int> mutated;
    std::vector<int> updates(c.inputs.size(), -1);
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      runtime::Storage* s = storage_of(c.inputs[i]);
      if (s->base != c.bases[i]) {
        mutated.push_back(static_cast<int>(i));
        updates[i] = static_cast<int>(outs.size());
        outs.push_back(s->base);
        s->base = c.bases[i];  // the capture computed nothing real: restore
      }
    }
    int device = c.inputs.empty() ? current_device() : c.inputs[0].device().index();
    auto program = translate_errors([&] { return runtime::end_capture(c.bases, outs, updates); });
    return CapturedCall{program, mutated, device};
  });
}

}  // namespace torch_tpu::aten
