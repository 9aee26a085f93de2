// torch_tpu._C: what the Python package needs from C++. Errors raised in the
// C++ layers reach Python as the matching exception class via
// translate_errors (c10 exceptions are translated by torch's pybind setup).
#include <torch/csrc/utils/pybind.h>

#include "aten/generator.h"
#include "aten/op_kernel.h"
#include "aten/tensor_bridge.h"
#include "common/env.h"
#include "lowering/registry.h"
#include "runtime/memory_stats.h"
#include "runtime/runtime.h"

namespace py = pybind11;
using namespace torch_tpu;

namespace {

runtime::Runtime& rt() {
  return aten::translate_errors([]() -> runtime::Runtime& { return runtime::Runtime::get(); });
}

void init(std::vector<std::string> package_roots) {
  static bool done = false;
  if (done) return;
  runtime::Runtime::set_package_roots(std::move(package_roots));
  static torch::Library lib(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__,
                            __LINE__);
  aten::register_lowered_ops(lib);
  done = true;
}

aten::TpuGenerator* gen(int device) {
  return aten::default_generator(static_cast<c10::DeviceIndex>(device)).get<aten::TpuGenerator>();
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_tpu native extension";
  m.def("_init", &init, "Set plugin search roots and register lowered ops");
  m.def("_load_runtime", []() { rt(); }, "Load the PJRT plugin now (raises if it cannot)");
  m.def("_runtime_loaded", &runtime::Runtime::initialized);
  m.def("_device_count", []() { return rt().device_count(); });
  m.def("_current_device", &aten::current_device);
  m.def("_set_device", [](int d) {
    aten::translate_errors([&] { rt().check_device(d); });
    aten::set_current_device(d);
  });
  m.def("_platform", []() {
    auto& r = rt();
    py::dict d;
    d["plugin_path"] = r.plugin_choice().path;
    d["plugin_reason"] = r.plugin_choice().reason;
    d["platform_name"] = aten::translate_errors([&] { return r.client().platform_name(); });
    d["platform_version"] = aten::translate_errors([&] { return r.client().platform_version(); });
    d["pjrt_api_version"] = std::to_string(r.client().plugin().api_major()) + "." +
                            std::to_string(r.client().plugin().api_minor());
    return d;
  });
  m.def("_device_info", [](int i) {
    auto info = aten::translate_errors([&] { return rt().client().device_info(i); });
    py::dict d;
    d["id"] = info.id;
    d["kind"] = info.kind;
    d["debug_string"] = info.debug_string;
    return d;
  });
  m.def("_synchronize", [](int i) {
    py::gil_scoped_release no_gil;
    aten::translate_errors([&] { rt().synchronize(i); });
  });
  m.def("_memory_stats", [](int i) {
    aten::translate_errors([&] { rt().check_device(i); });
    auto s = runtime::memory_stats(i);
    py::dict d;
    d["allocated_bytes.all.current"] = s.allocated;
    d["allocated_bytes.all.peak"] = s.peak;
    d["allocation.all.allocated"] = s.num_allocs;
    d["allocation.all.freed"] = s.num_frees;
    d["allocation.all.current"] = s.num_allocs - s.num_frees;
    return d;
  });
  m.def("_reset_peak_memory_stats", [](int i) {
    aten::translate_errors([&] { rt().check_device(i); });
    runtime::reset_peak(i);
  });
  m.def("_cache_stats", []() {
    auto s = rt().cache_stats();
    py::dict d;
    d["hits"] = s.hits;
    d["misses"] = s.misses;
    d["compiled"] = s.compiled;
    d["launches"] = s.launches;
    d["donated_buffers"] = s.donated_buffers;
    return d;
  });
  m.def("_fail_next_launch", [](std::string msg) { rt().fail_next_launch(std::move(msg)); },
        "Test hook: the next launched op fails as if the device reported an error");
  m.def("_lowered_ops", &lowering::registered_names);
  m.def("_env_table", []() {
    py::list rows;
    for (const auto& e : env_table()) rows.append(py::make_tuple(e.name, e.meaning, e.value));
    return rows;
  });
  m.def("_manual_seed", [](int d, uint64_t seed) { gen(d)->set_current_seed(seed); });
  m.def("_initial_seed", [](int d) { return gen(d)->current_seed(); });
  m.def("_seed", [](int d) { return gen(d)->seed(); });
  m.def("_get_rng_state", [](int d) { return at::Tensor(gen(d)->get_state()); });
  m.def("_set_rng_state", [](int d, const at::Tensor& state) {
    gen(d)->set_state(*state.unsafeGetTensorImpl());
  });
  m.def("_default_generator", [](int d) {
    return aten::default_generator(static_cast<c10::DeviceIndex>(d));
  });
}
