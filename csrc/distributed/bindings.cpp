// torch_tpu._C_dist: the distributed layer's own Python module, living in the
// same shared library as torch_tpu._C (Python finds it through the
// PyInit__C_dist symbol when python/torch_tpu/distributed.py loads the
// library under this name), so the aten layer's bindings stay untouched.
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>

#include "distributed/collective_path.h"
#include "distributed/process_group_tpu.h"
#include "distributed/program_collectives.h"

namespace py = pybind11;
using torch_tpu::distributed::ProcessGroupTpu;

PYBIND11_MODULE(_C_dist, m) {
  m.doc() = "torch_tpu distributed: the tpu_dist c10d backend";
  // c10d::Backend's Python type is registered by torch.distributed; it must
  // be imported before this module (distributed.py does).
  py::class_<ProcessGroupTpu, c10d::Backend, c10::intrusive_ptr<ProcessGroupTpu>>(
      m, "ProcessGroupTPU")
      .def(py::init([](const c10::intrusive_ptr<c10d::Backend>& host_group, int rank, int size,
                       std::chrono::milliseconds timeout) {
             return c10::make_intrusive<ProcessGroupTpu>(host_group, rank, size, timeout);
           }),
           py::arg("host_group"), py::arg("rank"), py::arg("size"), py::arg("timeout"))
      .def_property_readonly("timeout", &ProcessGroupTpu::timeout);
  m.def("_register_program_group", [](const c10::intrusive_ptr<c10d::Backend>& group) {
    return torch_tpu::distributed::register_program_group(group);
  });
  m.def("_program_collective_handlers", []() {
    py::dict d;
    for (const auto& [target, handler] : torch_tpu::distributed::program_collective_handlers())
      d[py::str(target)] = reinterpret_cast<uintptr_t>(handler);
    return d;
  });
  m.def("_collective_path", []() {
    auto p = torch_tpu::distributed::choose_collective_path();
    py::dict d;
    d["path"] = p.name;
    d["reason"] = p.reason;
    d["platform"] = p.platform;
    return d;
  });
}
