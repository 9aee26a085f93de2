// torch_tpu._C: what the Python package needs from C++. Errors raised in the
// C++ layers reach Python as the matching exception class via
// translate_errors (c10 exceptions are translated by torch's pybind setup).
#include <torch/csrc/Dtype.h>
#include <torch/csrc/utils/pybind.h>

#include <set>

#include "aten/debug_compare.h"
#include "aten/generator.h"
#include "aten/interrupt_hooks.h"
#include "aten/op_kernel.h"
#include "aten/origin.h"
#include "aten/pinned_memory.h"
#include "aten/tensor_bridge.h"
#include "aten/tolerance.h"
#include "common/env.h"
#include "common/fork_guard.h"
#include "common/host_cpu.h"
#include "common/warning.h"
#include "lowering/registry.h"
#include "runtime/auto_dynamic.h"
#include "runtime/counters.h"
#include "runtime/device_copy.h"
#include "runtime/device_memory.h"
#include "runtime/device_timeline.h"
#include "runtime/disk_cache.h"
#include "runtime/dynamic_dims.h"
#include "runtime/eager_mode.h"
#include "runtime/executor.h"
#include "runtime/failure_scope.h"
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
  set_warning_sink([](const std::string& message) { TORCH_WARN(message); });
  aten::install_interrupt_hooks();
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
void bind_compiled_call(py::module& m);
void bind_custom_call(py::module& m);
void bind_ffi(py::module& m);
void bind_memory_history(py::module& m);
void bind_matmul_precision(py::module& m);
}

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_tpu native extension";
  aten::bind_capture(m);
  aten::bind_compiled_call(m);
  aten::bind_custom_call(m);
  aten::bind_ffi(m);
  aten::bind_memory_history(m);
  aten::bind_matmul_precision(m);
  m.def("_init", &init, "Set plugin search roots and register lowered ops");
  m.def("_load_runtime", []() { rt(); }, "Load the PJRT plugin now (raises if it cannot)");
  m.def("_runtime_loaded", &runtime::Runtime::initialized);
  m.def("_is_in_bad_fork", &in_bad_fork);
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
    py::dict attributes;
    for (const auto& [k, v] : r.client().plugin().attributes()) attributes[py::str(k)] = v;
    d["plugin_attributes"] = attributes;
    return d;
  });
  m.def("_host_cpu", []() {
    py::dict d;
    d["avx512f"] = host_has_avx512f();
    d["intel"] = host_is_intel();
    return d;
  }, "The host CPU's features that kernel choices depend on (common/host_cpu.h)");
  m.def("_set_device_thread_nice", [](int nice) { rt().set_device_thread_nice(nice); },
        "The plugin's worker threads' nice value, unless TORCH_TPU_DEVICE_THREAD_NICE sets it");
  m.def("_device_info", [](int i) {
    auto info = aten::translate_errors([&] { return rt().client().device_info(i); });
    py::dict d;
    d["id"] = info.id;
    d["kind"] = info.kind;
    d["debug_string"] = info.debug_string;
    py::dict attributes;
    for (const auto& [k, v] : info.attributes) attributes[py::str(k)] = v;
    d["attributes"] = attributes;
    return d;
  });
  m.def("_synchronize", [](int i) {
    py::gil_scoped_release no_gil;
    aten::translate_errors([&] { rt().synchronize(i); });
    aten::wait_for_pinned_reads();
  });
  m.def("_pending_pinned_reads", &aten::pending_pinned_reads);
  m.def("_mem_get_info", [](int i) {
    auto info = aten::translate_errors([&] { return runtime::device_memory_info(i); });
    return py::make_tuple(info.free, info.total, info.source);
  });
  m.def("_set_memory_fraction", [](double f, int i) {
    aten::translate_errors([&] { runtime::set_memory_fraction(i, f); });
  });
  m.def("_memory_fraction", [](int i) { return runtime::memory_fraction(i); });
  m.def("_device_busy_fraction", [](int i, double window_s) {
    aten::translate_errors([&] { rt().check_device(i); });
    return runtime::busy_fraction(i, window_s);
  });
  m.def("_counters", []() {
    py::dict d;
    for (const auto& [k, v] : runtime::counter_values()) d[py::str(k)] = v;
    return d;
  });
  m.def("_reset_counters", []() { runtime::reset_counters(); });
  m.def(
      "_flush",
      [](const std::string& reason, bool settle) {
        // flush reasons must outlive the call
        static auto& reasons = *new std::set<std::string>;
        const char* r = reasons.insert(reason).first->c_str();
        py::gil_scoped_release no_gil;
        aten::translate_errors([&] { runtime::flush_all(r, settle); });
      },
      py::arg("reason"), py::arg("settle") = true);
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
    auto t = aten::tolerance(aten::to_hlo(reinterpret_cast<THPDtype*>(d.ptr())->scalar_type), op);
    return py::make_tuple(t.rtol, t.atol);
  });
  m.def("_cache_dir", []() { return runtime::disk_cache().dir(); });
  m.def("_clear_programs_for_test", []() { rt().clear_programs_for_test(); },
        "Test hook: forget the in-memory programs (the disk cache is read again)");
  m.def(
      "_pad_dimension",
      [](const at::Tensor& t, int64_t dim) {
        return aten::translate_errors([&] {
          auto buffer = runtime::pad_dimension(aten::input_of(t), static_cast<int>(dim));
          return aten::wrap_buffer(std::move(buffer), t.device().index());
        });
      },
      "A copy of the tpu tensor padded along `dim` (runtime/dynamic_dims.h)");
  m.def("_auto_dynamic", &runtime::auto_dynamic_enabled,
        "Whether varying dimensions of copies to tpu become dynamic (runtime/auto_dynamic.h)");
  m.def("_set_auto_dynamic", &runtime::set_auto_dynamic);
  m.def(
      "_unpad", [](const at::Tensor& t) { aten::translate_errors([&] { runtime::unpad(*aten::storage_of(t)); }); },
      "Makes the tensor's storage exact (runtime/dynamic_dims.h)");
  m.def("_reset_auto_dynamic", &runtime::reset_auto_dynamic, "Test hook: forget every copy's place");
  m.def(
      "_padding",
      [](const at::Tensor& t) -> py::object {
        const auto& base = aten::storage_of(t)->base;
        if (!base->padded()) return py::none();
        return py::make_tuple(base->padding().dim, base->padding().size,
                              base->type().shape[base->padding().dim]);
      },
      "(dim, size, bound) of the tensor's padded buffer, or None");
  m.def("_graphs_in_flight", &runtime::graphs_in_flight,
        "Graphs compiling or launching on the worker, not settled yet (does not wait)");
  m.def("_launches_in_progress", []() { return rt().launches_in_progress(); },
        "Launches not finished yet (does not wait)");
  m.def("_fail_next_launch", [](std::string msg) { rt().fail_next_launch(std::move(msg)); },
        "Test hook: the next launched op fails as if the device reported an error");
  m.def("_reject_op_for_test", &runtime::reject_op_for_test,
        "Test hook: programs holding this op fail to compile with the message ('' ends it)");
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
  m.def("_placement", [](const at::Tensor& t) {
    TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "_placement: not a tpu tensor");
    return aten::translate_errors([&] { return runtime::placement_of(*aten::storage_of(t)->base); });
  }, "The addressable device the plugin holds a tpu tensor's storage on");
}
