"""Weight-only integer linear layers on tpu: compressed-tensors W4A16/W8A16
(pack-quantized), GPTQ and AWQ checkpoints.

vLLM 0.32 serves all three through its mixed-precision kernel choice
(`choose_mp_linear_kernel`), whose per-platform lists hold CUDA, ROCm, XPU
and CPU kernels only; `TpuWNA16Kernel` is offered for the out-of-tree
platform through `register_linear_kernel`. At load it brings the three
layouts to one: the integers packed into int32 along the input dimension
([K * bits / 32, N], kept packed on the device), the scales [groups, N] in
float32, the zero points [groups, N] (asymmetric types) unpacked at load.
Each step's program unpacks and dequantizes the weight (packed_int.py) and
multiplies in float32, the result cast back to the activations' dtype.

Two of vLLM's GPTQ/AWQ linear methods need CUDA on a platform that is not
the CPU: GPTQ's checks that Marlin runs (it asks the device's capability),
AWQ's falls back to `awq_gemm`. `register()` makes both configs build the
mixed-precision methods vLLM's CPU platform uses, without the Marlin check
(module functions of theirs replaced in this process; the layers and the
weight loading are vLLM's own).
"""
import torch
from vllm.model_executor.kernels.linear import register_linear_kernel
from vllm.model_executor.kernels.linear.mixed_precision.MPLinearKernel import MPLinearKernel
from vllm.model_executor.utils import replace_parameter
from vllm.platforms.interface import PlatformEnum
from vllm.scalar_type import scalar_types

from .packed_int import dequantize, unpack_rows

# Symmetric types carry their zero in the type (a bias: stored value - bias),
# the others a zero point per group and channel in the checkpoint.
_TYPES = (scalar_types.uint4, scalar_types.uint4b8, scalar_types.uint8, scalar_types.uint8b128)


class TpuWNA16Kernel(MPLinearKernel):
    @classmethod
    def get_min_capability(cls) -> int:
        return -1

    @classmethod
    def can_implement(cls, c):
        k, n = c.partition_weight_shape
        per_word = 32 // c.weight_type.size_bits
        if c.weight_type not in _TYPES:
            return False, f"weight type {c.weight_type} (takes {', '.join(map(str, _TYPES))})"
        if c.zero_points == bool(c.weight_type.bias):
            return False, f"weight type {c.weight_type} with zero points {c.zero_points}"
        if c.group_size != -1 and k % c.group_size:
            return False, f"input size {k} not a multiple of the group size {c.group_size}"
        if k % per_word or (c.zero_points and n % per_word):
            return False, f"weight [{k}, {n}] does not fill whole int32 words of {per_word}"
        return True, None

    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        w_q, w_s, w_zp = self._get_weight_params(layer)
        if w_q.packed_dim != w_q.input_dim:
            raise NotImplementedError(f"vLLM on tpu: {self.w_q_name} is packed along its output "
                                      "dimension (takes weights packed along the input)")
        # compressed-tensors stores [N, K / per_word] and scales [N, groups];
        # GPTQ (and AWQ as vLLM converts it) [K / per_word, N] and [groups, N].
        packed = w_q.t() if w_q.input_dim == 1 else w_q
        scales = w_s.t() if w_s.output_dim == 0 else w_s
        replace_parameter(layer, self.w_q_name, packed.contiguous())
        replace_parameter(layer, self.w_s_name, scales.to(torch.float32).contiguous())
        if self.config.zero_points:
            # [N / per_word, groups] packed along the output dimension.
            zeros = unpack_rows(w_zp.data, self.config.weight_type.size_bits).t()
            replace_parameter(layer, self.w_zp_name, zeros.to(torch.float32).contiguous())
        elif w_zp is not None:   # GPTQ's qzeros of a symmetric type: the bias says it
            delattr(layer, self.w_zp_name)

    def apply_weights(self, layer, x, bias=None):
        w_q, w_s, w_zp = self._get_weight_params(layer)
        zeros = w_zp if self.config.zero_points else float(self.config.weight_type.bias)
        w = dequantize(w_q, self.config.weight_type.size_bits, w_s, zeros)
        out = x.reshape(-1, x.shape[-1]).to(torch.float32) @ w
        if bias is not None:
            out = out + bias
        return out.to(x.dtype).reshape(*x.shape[:-1], w.shape[1])


def _gptq_linear_method():
    from vllm.model_executor.layers.quantization import auto_gptq

    class TpuGPTQLinearMethod(auto_gptq.AutoGPTQLinearMethod):
        def __init__(self, quant_config):
            # Not AutoGPTQLinearMethod's: it checks that Marlin runs here.
            self.quant_config = quant_config
            self.input_dtype = None
            self.quant_type = quant_config.quant_type

    original = auto_gptq.AutoGPTQConfig.get_quant_method

    def get_quant_method(self, layer, prefix):
        if isinstance(layer, auto_gptq.RoutedExperts):
            return original(self, layer, prefix)
        return auto_gptq.get_linear_quant_method(self, layer, prefix, TpuGPTQLinearMethod)

    auto_gptq.AutoGPTQConfig.get_quant_method = get_quant_method


def _awq_linear_method():
    from vllm.model_executor.layers.quantization import auto_awq

    class TpuAWQLinearMethod(auto_awq.AutoAWQMarlinLinearMethod):
        def __init__(self, quant_config):
            # Not AutoAWQMarlinLinearMethod's: it checks that Marlin runs here.
            self.quant_config = quant_config
            self.quant_type = scalar_types.uint4
            self.input_dtype = None

    original = auto_awq.AutoAWQConfig.get_quant_method

    def get_quant_method(self, layer, prefix):
        method = original(self, layer, prefix)
        # What vLLM builds where Marlin does not run: a layer of CUDA ops.
        return TpuAWQLinearMethod(self) if type(method) is auto_awq.AutoAWQLinearMethod else method

    auto_awq.AutoAWQConfig.get_quant_method = get_quant_method


_registered = False


def register() -> None:
    """Offers the kernel to vLLM's mixed-precision kernel choice and makes
    GPTQ and AWQ layers use it (once per process, before the model is built)."""
    global _registered
    if not _registered:
        register_linear_kernel(TpuWNA16Kernel, PlatformEnum.OOT, "mp")
        _gptq_linear_method()
        _awq_linear_method()
        _registered = True
