// Kernels that make or reshape tensors without computing: factories, views
// (metadata over the same storage, see runtime/view.h), resize_ and set_.
#include "aten/storage_ops.h"

#include <ATen/native/TensorFactories.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>

#include "aten/tensor_bridge.h"
#include "runtime/runtime.h"

namespace torch_tpu::aten {

namespace {

struct DeviceScope {
  explicit DeviceScope(std::optional<c10::Device> d) : saved(current_device()) {
    if (d && d->has_index()) {
      translate_errors([&] { runtime::Runtime::get().check_device(d->index()); });
      set_current_device(d->index());
    } else {
      translate_errors([&] { runtime::Runtime::get().check_device(current_device()); });
    }
  }
  ~DeviceScope() { set_current_device(saved); }
  int saved;
};

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool>, std::optional<c10::MemoryFormat> memory_format) {
  DeviceScope scope(device);
  c10::ScalarType t = dtype.value_or(at::get_default_dtype_as_scalartype());
  to_hlo(t);  // refuses dtypes the plugin cannot hold
  TORCH_CHECK(!layout || *layout == c10::kStrided, "tpu supports only strided tensors, got ", *layout);
  return at::detail::empty_generic(size, tpu_allocator(),
                                   c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), t,
                                   memory_format);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> device, std::optional<bool>) {
  DeviceScope scope(device);
  c10::ScalarType t = dtype.value_or(at::get_default_dtype_as_scalartype());
  to_hlo(t);
  TORCH_CHECK(!layout || *layout == c10::kStrided, "tpu supports only strided tensors, got ", *layout);
  return at::detail::empty_strided_generic(size, stride, tpu_allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), t);
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size,
                          std::optional<c10::MemoryFormat> memory_format) {
  int64_t numel = c10::multiply_integers(size);
  int64_t needed = (self.storage_offset() + numel) * static_cast<int64_t>(self.itemsize());
  if (needed > static_cast<int64_t>(self.storage().nbytes()))
    resize_storage_bytes(self.storage(), needed);
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  if (memory_format && *memory_format != c10::MemoryFormat::Preserve)
    impl->empty_tensor_restride(*memory_format);
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source, c10::SymInt offset,
                        c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  TORCH_CHECK(source.device().type() == c10::DeviceType::PrivateUse1,
              "set_: expected a tpu storage, got one on ", source.device());
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_storage_keep_dtype(std::move(source));
  impl->set_sizes_and_strides(size, stride, offset);
  return self;
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  int64_t n = static_cast<int64_t>(source.nbytes()) / static_cast<int64_t>(self.itemsize());
  std::vector<c10::SymInt> size{c10::SymInt(n)}, stride{c10::SymInt(1)};
  return set_storage(self, std::move(source), 0, size, stride);
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) {
  return set_storage(self, source.storage(), source.sym_storage_offset(), source.sym_sizes(),
                     source.sym_strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, tpu_allocator(), true);
  std::vector<c10::SymInt> size{c10::SymInt(0)}, stride{c10::SymInt(1)};
  return set_storage(self, std::move(empty), 0, size, stride);
}

}  // namespace

void resize_storage_bytes(const c10::Storage& storage, int64_t nbytes) {
  auto* s = static_cast<runtime::Storage*>(storage.data_ptr().get_context());
  TORCH_CHECK(s != nullptr, "resize: not a tpu storage");
  if (nbytes == s->nbytes) return;
  translate_errors([&] {
    if (s->base->fresh_zeros()) {
      s->base = runtime::DeviceBuffer::deferred_zeros({hlo::ElementType::U8, {nbytes}}, s->device);
    } else {
      // Rare (out= tensors that grow): go through the host, keeping bytes.
      std::vector<uint8_t> bytes(std::max(nbytes, s->nbytes), 0);
      runtime::ViewGeometry all{{s->nbytes}, {1}, 0, hlo::ElementType::U8};
      runtime::read_contiguous({s, all})->to_host(bytes.data());
      s->base = runtime::upload(bytes.data(), {hlo::ElementType::U8, {nbytes}}, s->device);
    }
    s->nbytes = nbytes;
  });
  storage.unsafeGetStorageImpl()->set_nbytes(static_cast<size_t>(nbytes));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("resize_", TORCH_FN(resize_));
  m.impl("set_", TORCH_FN(set_empty));
  m.impl("set_.source_Storage", TORCH_FN(set_source_storage));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage));
  m.impl("set_.source_Tensor", TORCH_FN(set_source_tensor));
  m.impl("unfold", TORCH_FN(at::native::unfold));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("view_as_complex", TORCH_FN(at::native::view_as_complex));
  m.impl("view_as_real", TORCH_FN(at::native::view_as_real));
}

}  // namespace torch_tpu::aten
