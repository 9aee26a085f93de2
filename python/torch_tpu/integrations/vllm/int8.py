"""int8 linear layers on tpu: compressed-tensors W8A8-int8 checkpoints (int8
weights with a scale per output channel or per tensor, activations quantized
to int8 per token, dynamically and symmetrically).

vLLM picks an int8 layer's kernel from per-platform lists (its CPU's runs
oneDNN through vLLM's C++ ops); the out-of-tree platform's is this one,
registered through `register_linear_kernel`. It quantizes each token as
vLLM's kernels do (scale = its absolute maximum / 127, rounded to nearest
even), then multiplies the integers as float32: their products and sums are
exact while a row's sum stays under 2^24 (127 * 128 * K, so K up to 1032),
and past that round as a float32 GEMM does. All of it is PyTorch ops, recorded
into the step's program.
"""
import torch
from vllm.model_executor.kernels.linear import register_linear_kernel
from vllm.model_executor.kernels.linear.scaled_mm.ScaledMMLinearKernel import Int8ScaledMMLinearKernel
from vllm.model_executor.layers.quantization.utils.w8a8_utils import convert_to_channelwise
from vllm.model_executor.utils import replace_parameter
from vllm.platforms.interface import PlatformEnum

from . import moe_int8

_INT8_MAX = 127.0


class TpuInt8Kernel(Int8ScaledMMLinearKernel):
    @classmethod
    def is_supported(cls, compute_capability=None):
        return True, None

    @classmethod
    def can_implement(cls, c):
        if c.is_static_input_scheme or not c.input_symmetric:
            return False, ("takes dynamic symmetric per-token activations only (static "
                           f"{c.is_static_input_scheme}, symmetric {c.input_symmetric})")
        return True, None

    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        w_name, s_name, *_ = self.layer_param_names
        scale = getattr(layer, s_name)
        if not self.config.is_channelwise:   # a scale per fused part (qkv, gate/up)
            scale = convert_to_channelwise(scale, layer.logical_widths)
        # Stored as the matmul takes them: the weight [K, N], the scales a row.
        replace_parameter(layer, w_name, getattr(layer, w_name).t().contiguous())
        replace_parameter(layer, s_name, scale.reshape(1, -1).to(torch.float32).contiguous())

    def apply_weights(self, layer, x, bias=None):
        w, w_scale, *_ = self._get_layer_params(layer)
        x_2d = x.reshape(-1, x.shape[-1]).to(torch.float32)
        amax = x_2d.abs().amax(dim=-1, keepdim=True)
        # An all-zero row quantizes to zeros (scale 0), not NaN.
        inverse = torch.where(amax > 0, _INT8_MAX / amax, torch.zeros_like(amax))
        x_q = (x_2d * inverse).round().clamp(-128, 127)
        out = (x_q @ w.to(torch.float32)) * (amax / _INT8_MAX) * w_scale
        if bias is not None:
            out = out + bias
        return out.to(x.dtype).reshape(*x.shape[:-1], w.shape[1])


_registered = False


def register() -> None:
    """Offers the kernel to vLLM's int8 kernel choice, and moe_int8's method
    for int8 MoE layers (once per process, before the model is built)."""
    global _registered
    if not _registered:
        register_linear_kernel(TpuInt8Kernel, PlatformEnum.OOT, "int8")
        moe_int8.register()
        _registered = True
