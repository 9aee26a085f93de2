// User kernels from Python (python/torch_tpu/kernels/custom_ops.py, kernels/jax_op.py): a module
// text is registered once, then every call of the user's op records one
// custom-call node through runtime::run_op, as the lowered ATen ops do, so it
// runs in every eager mode, fuses under defer_and_fuse and is captured by
// torch.compile.
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/utils/pybind.h>

#include "aten/tensor_bridge.h"
#include "lowering/custom_call.h"
#include "runtime/disk_cache.h"
#include "runtime/runtime.h"

namespace py = pybind11;

namespace torch_tpu::aten {

namespace {

py::list types_to_python(const std::vector<hlo::TensorType>& types) {
  py::list out;
  for (const auto& t : types) {
    py::object dtype = py::reinterpret_borrow<py::object>(
        reinterpret_cast<PyObject*>(torch::getTHPDtype(to_aten(t.dtype))));
    out.append(py::make_tuple(dtype, py::tuple(py::cast(t.shape))));
  }
  return out;
}

std::vector<at::Tensor> custom_call(int id, const std::vector<at::Tensor>& given) {
  const lowering::CustomModule& m = translate_errors([&]() -> const lowering::CustomModule& {
    return lowering::custom_module(id);
  });
  const auto& want = m.embedded.inputs;
  TORCH_CHECK_TYPE(given.size() == want.size(), m.op_name, ": expected ", want.size(),
                   " tensor arguments, got ", given.size());
  runtime::OpCall call;
  call.lowering = &lowering::custom_call_lowering();
  call.default_float = to_hlo(at::get_default_dtype_as_scalartype());
  call.device = -1;
  std::vector<at::Tensor> resolved;  // alive until the node is recorded
  std::vector<std::optional<runtime::TensorInput>> ins;
  for (size_t i = 0; i < given.size(); ++i) {
    const at::Tensor& t = given[i];
    TORCH_CHECK_TYPE(t.defined(), m.op_name, ": argument ", i, " is undefined");
    TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, m.op_name, ": argument ", i,
                " is on ", t.device(), "; the kernel runs on tpu (move it with .to('tpu'))");
    TORCH_CHECK(call.device < 0 || call.device == t.device().index(), m.op_name,
                ": expected all tensors on one device, found tpu:", call.device, " and ",
                t.device());
    call.device = t.device().index();
    hlo::TensorType have{to_hlo(t.scalar_type()), t.sizes().vec()};
    TORCH_CHECK_TYPE(have == want[i], m.op_name, ": argument ", i, " is ", t.scalar_type(), " ",
                     t.sizes(), " but the kernel was built for ", hlo::short_name(want[i].dtype),
                     " ", hlo::shape_str(want[i].shape));
    resolved.push_back(t.resolve_conj().resolve_neg());
    ins.push_back(input_of(resolved.back()));
  }
  if (call.device < 0) call.device = current_device();
  lowering::Arg module;
  module.kind = lowering::Arg::Kind::Int;
  module.index = 0;
  module.i = id;
  lowering::Arg tensors;
  tensors.kind = lowering::Arg::Kind::TensorList;
  tensors.index = 1;
  call.args = {module, tensors};
  call.inputs = {{}, std::move(ins)};
  auto outputs = translate_errors([&] { return runtime::run_op(call); });
  std::vector<at::Tensor> results;
  results.reserve(outputs.size());
  for (auto& buf : outputs) results.push_back(wrap_buffer(buf, call.device));
  return results;
}

// Compiles the text as it was given, alone, so that the plugin's parser
// reports problems with line numbers of the user's text.
void check_custom_module(int id, int device) {
  translate_errors([&] {
    const lowering::CustomModule& m = lowering::custom_module(id);
    auto& rt = runtime::Runtime::get();
    rt.check_device(device);
    try {
      rt.compile(m.text, m.embedded.outputs, device);
    } catch (const Error& e) {
      fail(ErrorKind::Value, m.op_name, ": the PJRT plugin (", rt.plugin_choice().path,
           ") rejects the StableHLO module: ", e.what());
    }
  });
}

// A traced kernel's entry in the persistent cache: keyed by the plugin as
// executables are (a module was checked against this plugin), not by
// XLA_FLAGS or the device, which do not change what JAX emits.
runtime::CacheKey trace_key(const std::string& key) {
  auto& client = runtime::Runtime::get().client();
  return runtime::CacheKey{"jax_op trace", client.plugin().identity(), client.platform_version(),
                           "", 0, key};
}

}  // namespace

void bind_custom_call(py::module& m) {
  m.def("_custom_module", [](const std::string& op_name, const std::string& text) {
    int id = translate_errors([&] { return lowering::register_custom_module(op_name, text); });
    const auto& mod = lowering::custom_module(id);
    return py::make_tuple(id, types_to_python(mod.embedded.inputs),
                          types_to_python(mod.embedded.outputs));
  }, "Registers a StableHLO module for a user op: (id, input types, output types)");
  m.def("_check_custom_module", &check_custom_module,
        "Compiles a registered module alone (raises with the plugin's message)");
  m.def("_custom_call", &custom_call, "Records one call of a registered module");
  m.def("_stablehlo_window", []() -> py::object {
    auto w = runtime::Runtime::get().client().plugin().stablehlo_window();
    if (!w) return py::none();
    return py::make_tuple(w->minimum, w->current);
  }, "(minimum, current) StableHLO version the plugin reads, or None when it does not say");
  m.def("_trace_cache_load", [](const std::string& key) -> py::object {
    auto found = translate_errors([&] { return runtime::disk_cache().load(trace_key(key)); });
    if (!found) return py::none();
    return py::bytes(*found);
  }, "A traced kernel's entry in the persistent cache, or None (missing or damaged)");
  m.def("_trace_cache_store", [](const std::string& key, const py::bytes& payload) {
    std::string data = payload;
    translate_errors([&] { runtime::disk_cache().store(trace_key(key), data); });
  }, "Stores a traced kernel's entry in the persistent cache");
}

}  // namespace torch_tpu::aten
