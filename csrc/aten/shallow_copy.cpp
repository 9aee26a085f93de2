// Which tensors may take over another tensor's TensorImpl fields in place
// (`var.data = t`, `var.set_data(t)`), and so why `module.to("tpu")` keeps
// Parameter identity.
//
// nn.Module._apply moves each parameter with `param.data = moved` when
// `torch._has_compatible_shallow_copy_type(param, moved)` holds; otherwise it
// wraps the moved tensor in a *new* Parameter per module. The new-Parameter path
// breaks everything that holds the old object: a weight shared by two modules
// (tied embeddings and output heads) becomes two tensors that each get part of
// the gradient, an optimizer built before the move keeps updating the CPU
// tensors, hooks registered on the Parameter stay behind. `set_data` itself asks
// the same operator before it shallow-copies (storage, sizes, strides, dtype,
// device, dispatch keys) into the existing TensorImpl, keeping its autograd
// metadata (hooks, requires_grad, version counter).
//
// The default answer (TensorImpl::has_compatible_shallow_copy_type) is true for
// equal key sets or for two dense tensors of a built-in backend (CPU, CUDA, MPS,
// HIP, XPU, HPU, MTIA); PrivateUse1 is not in that list, and PyTorch leaves the
// answer for it to the backend through this operator. A `tpu` tensor is a plain
// strided TensorImpl whose storage holds a runtime::Storage (no TensorImpl
// subclass, no extra fields), so a shallow copy between it and any dense tensor
// loses nothing: we answer as PyTorch does for CUDA, with PrivateUse1 counted
// among the dense backends. Sparse, quantized, nested and meta tensors keep
// PyTorch's own answer.
#include "aten/pch.h"

namespace torch_tpu::aten {

namespace {

bool is_dense_strided(const at::Tensor& t) {
  constexpr auto dense_backends = c10::DispatchKeySet(
      {c10::BackendComponent::CPUBit, c10::BackendComponent::CUDABit,
       c10::BackendComponent::HIPBit, c10::BackendComponent::HPUBit,
       c10::BackendComponent::MPSBit, c10::BackendComponent::MTIABit,
       c10::BackendComponent::PrivateUse1Bit, c10::BackendComponent::XPUBit});
  const c10::DispatchKeySet ks = t.key_set();
  return t.layout() == c10::kStrided && !t.is_quantized() && !t.is_nested() &&
         ks.has(c10::DispatchKey::Dense) &&
         ks.has_any(dense_backends);
}

bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  if (is_dense_strided(self) && is_dense_strided(from)) return true;
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
}

}  // namespace torch_tpu::aten
