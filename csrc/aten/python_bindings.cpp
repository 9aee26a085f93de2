// torch_tpu._C: what the Python package needs from C++. Errors raised in the
// C++ layers reach Python as the matching exception class via
// translate_errors (c10 exceptions are translated by torch's pybind setup).
#include <torch/csrc/Dtype.h>
#include <torch/csrc/utils/pybind.h>

#include <set>

#include "aten/debug_compare.h"
#include "aten/generator.h"
#include "aten/op_kernel.h"
#include "aten/origin.h"
#include "aten/tensor_bridge.h"
#include "common/env.h"
#include "common/tolerance.h"
#include "lowering/registry.h"
#include "runtime/disk_cache.h"
#include "runtime/eager_mode.h"
#include "runtime/executor.h"
#include "runtime/memory_stats.h"
#include "runtime/runtime.h"

namespace py = pybind11;
using namespace torch_tpu;

namespace {

runtime::Runtime& rt() {
  return aten::translate_errors([]() -> runtime::Runtime& { return runtime::Runtime::get(); });
}

void init(std::vector<std::string> package_roots, std::vector<std::string> internal_dirs) {
  static bool done = false;
  if (done) return;
  runtime::Runtime::set_package_roots(std::move(package_roots));
  aten::set_internal_dirs(std::move(internal_dirs));
  runtime::set_origin_provider(&aten::python_origin);
  static torch::Library lib(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__,
                            __LINE__);
  aten::register_lowered_ops(lib);
  done = true;
}

aten::TpuGenerator* gen(int device) {
  return aten::default_generator(static_cast<c10::DeviceIndex>(device)).get<aten::TpuGenerator>();
}

}  // namespace

namespace torch_tpu::aten {
void bind_capture(py::module& m);
void bind_custom_call(py::module& m);
}

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_tpu native extension";
  aten::bind_capture(m);
  aten::bind_custom_call(m);
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
  m.def("_counters", []() {
    py::dict d;
    for (const auto& [k, v] : rt().counters()) d[py::str(k)] = v;
    return d;
  });
  m.def("_reset_counters", []() { rt().reset_counters(); });
  m.def("_flush", [](const std::string& reason) {
    static std::set<std::string> reasons;  // flush reasons must outlive the call
    const char* r = reasons.insert(reason).first->c_str();
    py::gil_scoped_release no_gil;
    aten::translate_errors([&] { runtime::flush_all(r); });
  });
  m.def("_hold_repeat_cuts", [](bool hold) { runtime::hold_repeat_cuts(hold); });
  m.def("_eager_mode", []() { return std::string(runtime::eager_mode_name(runtime::eager_mode())); });
  m.def("_set_eager_mode", [](const std::string& name) {
    runtime::EagerMode m;
    if (name == "strict") m = runtime::EagerMode::Strict;
    else if (name == "debug") m = runtime::EagerMode::Debug;
    else if (name == "defer_and_fuse") m = runtime::EagerMode::DeferAndFuse;
    else throw py::value_error("unknown eager mode '" + name +
                               "': expected 'strict', 'debug' or 'defer_and_fuse'");
    py::gil_scoped_release no_gil;
    aten::translate_errors([&] { runtime::set_eager_mode(m); });
  });
  m.def("_tolerance", [](const std::string& dtype, const std::string& op) {
    py::object d = py::module::import("torch").attr(dtype.c_str());
    auto t = tolerance(aten::to_hlo(reinterpret_cast<THPDtype*>(d.ptr())->scalar_type), op);
    return py::make_tuple(t.rtol, t.atol);
  });
  m.def("_cache_dir", []() { return runtime::disk_cache().dir(); });
  m.def("_fail_next_launch", [](std::string msg) { rt().fail_next_launch(std::move(msg)); },
        "Test hook: the next launched op fails as if the device reported an error");
  m.def("_offset_next_cpu_reference", &aten::offset_next_reference,
        "Test hook: shift the next debug-mode CPU reference so a mismatch is reported");
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
