// torch.compile's bridge: Python runs an FX graph's ops on real `tpu`
// tensors between _capture_begin and _capture_end; the runtime records them
// into one graph (runtime/executor.h, CapturedProgram) that is compiled once
// and launched on every later call. Inputs must be tensors that are their
// storage's whole base (the Python side makes them so); an input whose
// storage was written during the capture is a mutated input: its new value
// is an extra output of the program, written back into the caller's tensor.
#include <set>
#include <unordered_map>

#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include "aten/generator.h"
#include "common/key_text.h"
#include "aten/tensor_bridge.h"
#include "runtime/dynamic_dims.h"
#include "runtime/executor.h"

namespace py = pybind11;

namespace torch_tpu::aten {

namespace {

// The buffer behind an input. A contiguous tensor covering its whole storage
// qualifies even when the buffer has another shape (a (3,) bias grad over a
// (1, 3) buffer): the program is keyed by the buffer's type and reshapes.
std::shared_ptr<runtime::DeviceBuffer> whole_base(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.defined() && t.device().type() == c10::DeviceType::PrivateUse1, what,
              " must be a tpu tensor");
  runtime::Storage* s = storage_of(t);
  runtime::ViewGeometry g = geometry_of(t);
  // Programs are keyed by their inputs' exact types (runtime/dynamic_dims.h).
  translate_errors([&] { runtime::unpad(*s); });
  // An empty storage keeps the untyped zero-byte buffer it was made with, as
  // nothing ever writes it (a model's zero register tokens): give it one of
  // the tensor's type, which holds the same nothing.
  if (s->nbytes == 0 && s->base->type().dtype != g.dtype)
    s->base = runtime::DeviceBuffer::deferred_zeros({g.dtype, {0}}, s->device);
  TORCH_CHECK_VALUE(runtime::covers_storage(g, s->nbytes) && s->base->type().dtype == g.dtype, what,
                    " must be a contiguous tensor covering its whole storage (call .contiguous())");
  return s->base;
}

std::pair<uint64_t, uint64_t> next_rng(int device, uint64_t count) {
  return default_generator(static_cast<c10::DeviceIndex>(device)).get<TpuGenerator>()->take(count);
}

struct Capture {
  std::vector<at::Tensor> inputs;
  std::vector<std::shared_ptr<runtime::DeviceBuffer>> bases;
};
Capture active;

class Program {
 public:
  Program(std::shared_ptr<runtime::CapturedProgram> p, std::vector<int> mutated, int device)
      : program_(std::move(p)), mutated_(std::move(mutated)), device_(device) {}

  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs) const {
    std::vector<std::shared_ptr<runtime::DeviceBuffer>> bases;
    for (const auto& t : inputs) bases.push_back(whole_base(t, "compiled program input"));
    // The tensor's storage and `bases` hold the buffer: anyone else (a
    // pending graph, another storage, the same input passed twice) reads it.
    std::vector<bool> exclusive;
    for (const auto& b : bases) exclusive.push_back(b.use_count() == 2);
    auto outs = translate_errors([&] {
      py::gil_scoped_release no_gil;
      return program_->run(bases, exclusive, &next_rng);
    });
    size_t n_plain = outs.size() - mutated_.size();
    std::vector<at::Tensor> results;
    for (size_t i = 0; i < n_plain; ++i) results.push_back(wrap_buffer(outs[i], device_));
    for (size_t k = 0; k < mutated_.size(); ++k) assign_base(inputs[mutated_[k]], outs[n_plain + k]);
    return results;
  }

 private:
  std::shared_ptr<runtime::CapturedProgram> program_;
  std::vector<int> mutated_;  // inputs written by the program, in output order after the plain ones
  int device_;
};

// dynamo.py's plan for one call: how each graph input reaches the program
// (see CompiledGraph._plan) and the key of the program for this call. Done
// here because it runs for every input of every call -- hundreds per
// training step -- and the Python version cost a fifth of a small step.
bool is_whole_base(const at::TensorBase& t) {
  return t.is_contiguous() && t.storage_offset() == 0 &&
         t.storage().nbytes() == static_cast<size_t>(t.numel()) * t.element_size();
}

void append_ints(std::string& key, c10::IntArrayRef v) {
  key += '(';
  for (int64_t x : v) append_int(key, x, ',');
  key += ')';
}

py::tuple capture_plan(const py::list& args, const std::set<int64_t>& copy_slots) {
  py::list plan;
  std::vector<int64_t> plain;  // positions of non-tensor arguments
  std::string key;
  key.reserve(64 * args.size());
  std::unordered_map<const c10::TensorImpl*, int64_t> slot_of;
  int64_t slots = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    PyObject* obj = args[i].ptr();
    if (!THPVariable_Check(obj)) {
      plan.append(py::none());
      plain.push_back(static_cast<int64_t>(i));
      continue;
    }
    const at::Tensor& a = THPVariable_Unpack(obj);
    if (a.device().type() != c10::DeviceType::PrivateUse1)
      throw std::runtime_error("torch.compile(backend='tpu'): graph input " + std::to_string(i) +
                               " is on " + a.device().str() + ", expected tpu");
    const char* how = "copy";
    at::Tensor src = a;
    if (copy_slots.count(static_cast<int64_t>(i)) == 0) {
      if (is_whole_base(a)) {
        how = "in";
      } else if (a.is_view() && a._base().device() == a.device() && is_whole_base(a._base())) {
        how = "view";
        src = at::Tensor(a._base());
      }
    }
    int64_t j = slots;
    bool copy = how[0] == 'c';
    if (copy) {
      ++slots;
    } else {
      auto [it, fresh] = slot_of.emplace(src.unsafeGetTensorImpl(), slots);
      if (fresh) ++slots;
      j = it->second;
    }
    plan.append(py::make_tuple(how, j));
    key += how[0];
    append_int(key, j, ':');
    append_int(key, static_cast<int64_t>(a.scalar_type()), ':');
    append_ints(key, a.sizes());
    append_ints(key, a.strides());
    append_int(key, a.storage_offset(), ':');
    // Programs take the device buffers behind the inputs: their shapes (which
    // may differ from the tensors', e.g. (3,) over (1, 3)) key them.
    if (!copy) {  // read exact
      const auto& base = storage_of(src)->base;
      append_ints(key, base->padded() ? c10::IntArrayRef(base->logical_type().shape)
                                      : c10::IntArrayRef(base->type().shape));
    }
    key += ';';
  }
  return py::make_tuple(plan, py::bytes(key), plain);
}

}  // namespace

void bind_capture(py::module& m) {
  m.def("_capture_plan", &capture_plan, "CompiledGraph._plan's per-call work (see dynamo.py)");
  m.def("_is_whole_base", [](const at::Tensor& t) { return is_whole_base(t); },
        "Contiguous from offset 0 over its whole storage");
  py::class_<Program>(m, "CapturedProgram")
      .def("run", &Program::run, "Launch with new inputs (same shapes and dtypes as captured)");

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
    return Program(program, mutated, device);
  });
}

}  // namespace torch_tpu::aten
