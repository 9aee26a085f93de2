#include "kernels/kernels.h"

#ifdef TORCH_TPU_XLA_FFI
#include "kernels/gemm.h"
#include "xla/ffi/api/c_api.h"

// Defined beside their computations (XLA_FFI_DEFINE_HANDLER_SYMBOL).
extern "C" XLA_FFI_Error* torch_tpu_block_sum_host(XLA_FFI_CallFrame* frame);
extern "C" XLA_FFI_Error* torch_tpu_gemm_host(XLA_FFI_CallFrame* frame);
extern "C" XLA_FFI_Error* torch_tpu_paged_attention_host(XLA_FFI_CallFrame* frame);
extern "C" XLA_FFI_Error* torch_tpu_sdpa_backward_host(XLA_FFI_CallFrame* frame);
extern "C" XLA_FFI_Error* torch_tpu_sdpa_forward_host(XLA_FFI_CallFrame* frame);
#endif

namespace torch_tpu::kernels {

const std::vector<Kernel>& table() {
  // Built without XLA's FFI header (no jaxlib), no handler exists: every
  // kernel's fallback runs.
#ifdef TORCH_TPU_XLA_FFI
  static const std::vector<Kernel> kernels = {
      {"block_sum", "torch_tpu_block_sum", "XLA's reduce (lowering/sum_kernel.cpp)",
       {{"Host", reinterpret_cast<void*>(&torch_tpu_block_sum_host)}}},
      {"gemm", "torch_tpu_gemm", "XLA's dot_general (lowering/matmul.cpp)",
       gemm_library_loaded() ? std::vector<Handler>{{"Host", reinterpret_cast<void*>(&torch_tpu_gemm_host)}}
                             : std::vector<Handler>{}},
      {"paged_attention", "torch_tpu_paged_attention",
       "the vLLM backend's composite (integrations/vllm/attention.py)",
       {{"Host", reinterpret_cast<void*>(&torch_tpu_paged_attention_host)}}},
      {"sdpa_backward", "torch_tpu_sdpa_backward", "the composite SDPA backward (lowering/attention.cpp)",
       {{"Host", reinterpret_cast<void*>(&torch_tpu_sdpa_backward_host)}}},
      {"sdpa_forward", "torch_tpu_sdpa_forward", "the composite SDPA (lowering/attention.cpp)",
       {{"Host", reinterpret_cast<void*>(&torch_tpu_sdpa_forward_host)}}},
  };
#else
  static const std::vector<Kernel> kernels = {
      {"block_sum", "torch_tpu_block_sum", "XLA's reduce (lowering/sum_kernel.cpp)", {}},
      {"gemm", "torch_tpu_gemm", "XLA's dot_general (lowering/matmul.cpp)", {}},
      {"paged_attention", "torch_tpu_paged_attention",
       "the vLLM backend's composite (integrations/vllm/attention.py)", {}},
      {"sdpa_backward", "torch_tpu_sdpa_backward", "the composite SDPA backward (lowering/attention.cpp)", {}},
      {"sdpa_forward", "torch_tpu_sdpa_forward", "the composite SDPA (lowering/attention.cpp)", {}},
  };
#endif
  return kernels;
}

}  // namespace torch_tpu::kernels
