// Copies between `tpu` and the host, and within `tpu`. copy_ is registered
// for PrivateUse1, which outranks CPU in dispatch, so every copy that touches
// a `tpu` tensor lands here, whichever side it is on. Host -> device with
// non_blocking=True from pinned memory returns before the bytes are read;
// every other copy to the device has read its source when it returns, and
// device -> host copies wait for the data.
#include <Python.h>

#include <ATen/MemoryOverlap.h>
#include <ATen/ops/_local_scalar_dense_native.h>

#include "aten/origin.h"
#include "aten/pinned_memory.h"
#include "aten/tensor_bridge.h"
#include "runtime/auto_dynamic.h"
#include "runtime/device_copy.h"
#include "runtime/dynamic_dims.h"
#include "runtime/host_transfer.h"
#include "runtime/runtime.h"

namespace torch_tpu::aten {

namespace {

bool on_tpu(const at::Tensor& t) { return t.device().type() == c10::DeviceType::PrivateUse1; }

// A CPU tensor with the contents of a `tpu` tensor (same sizes and dtype).
// The lazy conjugate and negative bits travel with it: the device holds the
// un-conjugated values, as PyTorch's storage does.
void read_into(const at::Tensor& src, void* dst) {
  translate_errors([&] {
    auto buffer = runtime::read_contiguous(input_of(src));
    buffer->to_host(dst);
  });
}

at::Tensor to_host(const at::Tensor& src) {
  at::Tensor host = at::empty(src.sizes(), src.options().device(c10::kCPU).dtype(src.scalar_type()));
  read_into(src, host.data_ptr());
  if (src.is_conj()) host = host.conj();
  if (src.is_neg()) host = host._neg_view();
  return host;
}

// Whether the device's bytes can land directly in `dst` (what .cpu() and
// host staging ask for): a fresh host tensor and a second copy into `dst`
// would double the memory traffic and the page faults of large reads.
bool reads_directly(const at::Tensor& dst, const at::Tensor& src) {
  return dst.is_contiguous() && dst.scalar_type() == src.scalar_type() &&
         dst.sizes() == src.sizes() && !dst.is_conj() && !dst.is_neg() && !src.is_conj() &&
         !src.is_neg();
}

// non_blocking from pinned memory, when no conversion is needed: PJRT reads
// the pinned bytes after copy_ returns (pinned_memory.cpp keeps them alive).
bool upload_pinned_async(const at::Tensor& dst, const at::Tensor& src) {
  if (!src.is_contiguous() || src.scalar_type() != dst.scalar_type() || src.sizes() != dst.sizes() ||
      src.is_conj() || src.is_neg() || !is_pinned(src.const_data_ptr()))
    return false;
  translate_errors([&] {
    runtime::Storage* s = storage_of(dst);
    hlo::TensorType type{to_hlo(dst.scalar_type()), {dst.sizes().begin(), dst.sizes().end()}};
    runtime::check_writable(geometry_of(dst), "copy_");
    runtime::Storage staging(type.nbytes(), s->device);
    std::unique_ptr<pjrt::Event> host_done;
    staging.base = runtime::upload_async(src.const_data_ptr(), type, s->device, &host_done);
    keep_until_read(src.const_data_ptr(), std::move(host_done));
    runtime::copy_into(input_of(dst), {&staging, runtime::whole_view(type)});
  });
  return true;
}

// The dimensions torch._dynamo.mark_static (or torch_tpu.dynamic.mark_static)
// set on the host tensor, as bits.
uint64_t static_dims(const at::Tensor& src) {
  PyObject* obj = src.unsafeGetTensorImpl()->pyobj_slot()->load_pyobj();
  if (!obj || !Py_IsInitialized()) return 0;
  PyGILState_STATE gil = PyGILState_Ensure();
  uint64_t bits = 0;
  if (PyObject* dims = PyObject_GetAttrString(obj, "_dynamo_static_indices")) {
    if (PyObject* it = PyObject_GetIter(dims)) {
      while (PyObject* d = PyIter_Next(it)) {
        long v = PyLong_AsLong(d);
        if (v >= 0 && v < 64) bits |= uint64_t{1} << v;
        Py_DECREF(d);
      }
      Py_DECREF(it);
    }
    Py_DECREF(dims);
  }
  PyErr_Clear();
  PyGILState_Release(gil);
  return bits;
}

// A fresh tensor filled from the host whose place made a dimension dynamic
// (runtime/auto_dynamic.h) gets a padded buffer straight away.
bool upload_auto_padded(const at::Tensor& dst, const at::Tensor& src, const at::Tensor& host,
                        const hlo::TensorType& type) {
  runtime::Storage* s = storage_of(dst);
  if (!runtime::auto_dynamic_enabled() || s->nbytes != type.nbytes() ||
      !runtime::is_identity(geometry_of(dst), type))
    return false;
  // Copies made inside torch (Module.to's parameters) or torch_tpu are
  // never guessed at: only user code's.
  auto place = python_caller();
  if (!place) return false;
  auto dim = runtime::auto_dynamic_dim(*place, type, s->device);
  if (!dim || (static_dims(src) >> *dim & 1)) return false;
  s->base = runtime::upload_padded(host.data_ptr(), type, *dim, s->device);
  return true;
}

void copy_host_to_device(const at::Tensor& dst, const at::Tensor& src) {
  // Convert and broadcast on the host, upload once, then write the view.
  at::Tensor host =
      src.resolve_conj().resolve_neg().to(dst.scalar_type()).expand(dst.sizes()).contiguous();
  translate_errors([&] {
    runtime::Storage* s = storage_of(dst);
    hlo::TensorType type{to_hlo(dst.scalar_type()), {dst.sizes().begin(), dst.sizes().end()}};
    runtime::check_writable(geometry_of(dst), "copy_");
    if (upload_auto_padded(dst, src, host, type)) return;
    runtime::Storage staging(type.nbytes(), s->device);
    staging.base = runtime::upload(host.data_ptr(), type, s->device);
    runtime::copy_into(input_of(dst), {&staging, runtime::whole_view(type)});
  });
}

// tpu:i -> tpu:j: the source's bytes move device to device (PJRT), then the
// destination's view is written on its own device, converting and
// broadcasting there as a copy within one device does.
void copy_across_devices(const at::Tensor& dst, const at::Tensor& src, int transform) {
  translate_errors([&] {
    runtime::check_writable(geometry_of(dst), "copy_");
    runtime::Storage* s = storage_of(dst);
    hlo::TensorType type{to_hlo(src.scalar_type()), {src.sizes().begin(), src.sizes().end()}};
    runtime::Storage staging(type.nbytes(), s->device);
    staging.base = runtime::copy_to_device(input_of(src), s->device);
    runtime::copy_into(input_of(dst), {&staging, runtime::whole_view(type)}, transform);
  });
}

at::Tensor& copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  if (self.numel() == 0) return self;
  if (on_tpu(self) && on_tpu(src)) {
    at::assert_no_partial_overlap(self, src);
    // A lazy conjugate or negative bit that differs between the two is
    // applied while copying (as the CPU's copy_ does).
    int transform = (src.is_conj() != self.is_conj() ? runtime::kCopyConjugate : 0) |
                    (src.is_neg() != self.is_neg() ? runtime::kCopyNegate : 0);
    if (self.device() != src.device()) {
      copy_across_devices(self, src, transform);
      return self;
    }
    translate_errors([&] { runtime::copy_into(input_of(self), input_of(src), transform); });
  } else if (on_tpu(self)) {
    TORCH_CHECK(src.device().is_cpu(), "copy_: cannot copy from ", src.device(), " to ", self.device());
    if (!(non_blocking && upload_pinned_async(self, src))) copy_host_to_device(self, src);
  } else {
    TORCH_CHECK(self.device().is_cpu(), "copy_: cannot copy from ", src.device(), " to ", self.device());
    if (reads_directly(self, src))
      read_into(src, self.data_ptr());
    else
      self.copy_(to_host(src));
  }
  return self;
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  at::Tensor d = dst;
  copy_(d, self, non_blocking);
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  at::Tensor d = dst;
  if (d.sizes() != self.sizes()) d.resize_(self.sizes());
  copy_(d, self, false);
  return dst;
}

c10::Scalar local_scalar_dense(const at::Tensor& self) {
  return at::native::_local_scalar_dense_cpu(to_host(self));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
  m.impl("copy_", TORCH_FN(copy_));
}

}  // namespace torch_tpu::aten
