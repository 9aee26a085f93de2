#include "kernels/kernels.h"

#ifdef TORCH_TPU_XLA_FFI
#include "xla/ffi/api/c_api.h"

// Defined beside their computations (XLA_FFI_DEFINE_HANDLER_SYMBOL).
extern "C" XLA_FFI_Error* torch_tpu_paged_attention_host(XLA_FFI_CallFrame* frame);
#endif

namespace torch_tpu::kernels {

const std::vector<Kernel>& table() {
  // Built without XLA's FFI header (no jaxlib), no handler exists: every
  // kernel's fallback runs.
#ifdef TORCH_TPU_XLA_FFI
  static const std::vector<Kernel> kernels = {
      {"paged_attention", "torch_tpu_paged_attention",
       "the vLLM backend's composite (integrations/vllm/attention.py)",
       {{"Host", reinterpret_cast<void*>(&torch_tpu_paged_attention_host)}}},
  };
#else
  static const std::vector<Kernel> kernels = {
      {"paged_attention", "torch_tpu_paged_attention",
       "the vLLM backend's composite (integrations/vllm/attention.py)", {}},
  };
#endif
  return kernels;
}

}  // namespace torch_tpu::kernels
