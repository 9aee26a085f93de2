// The GEMM kernel's handler (kernels/gemm.cpp) runs MKL as PyTorch's CPU
// wheel carries it; the table offers the handler only where that library is
// loaded in the process.
#pragma once

namespace torch_tpu::kernels {

bool gemm_library_loaded();

}  // namespace torch_tpu::kernels
