"""Block-scaled fp8 linear layers on tpu: vLLM's online `fp8_per_block`.

vLLM's method quantizes each weight [N, K] at load time with its own PyTorch
code (`per_block_cast_to_fp8`: a scale per 128 x 128 block, [N/128, K/128]
rounded up) and asks for a block-scaled kernel whose activations are
quantized per token and group of 128 input channels (1 x 128). vLLM 0.32 has
none an out-of-tree platform can use (its PyTorch one, `torch._scaled_mm`'s
block path, needs CUDA, ROCm or XPU; its CPU ones AMX and vLLM's C++ ops),
and `register_linear_kernel` offers no way to add one: the list it would
append to is `_POSSIBLE_FP8_BLOCK_KERNELS`, which `register` fills for the
out-of-tree platform itself.

`TpuBlockFP8Kernel` keeps the weights fp8 and their block scales on tpu; in
the step's program vLLM's kernel base quantizes the activations with vLLM's
native group quantization (QuantFP8, which runs its PyTorch form on an
out-of-tree platform: scale = max(|group| / 448, vLLM's floor), x / scale,
saturated), and this kernel dequantizes both sides in float32 (each value
times its group's or block's scale) and multiplies them with one float32
matmul. No padding rows need masking: every activation scale is a token's own.
"""
import torch
from vllm.model_executor.kernels import linear as linear_kernels
from vllm.model_executor.kernels.linear.scaled_mm.BlockScaledMMLinearKernel import (
    Fp8BlockScaledMMLinearKernel,
)
from vllm.model_executor.layers.quantization.utils.quant_utils import GroupShape
from vllm.platforms.interface import PlatformEnum

ACTIVATION_GROUP = GroupShape(1, 128)
WEIGHT_BLOCK = GroupShape(128, 128)


def _expand(scales: torch.Tensor, rows: int, cols: int, shape) -> torch.Tensor:
    """Block scales [R, C] as one scale an element of a [rows x cols]-blocked
    matrix of `shape` (the last blocks cut where the shape is no multiple)."""
    r, c = scales.shape
    full = scales[:, None, :, None].expand(r, rows, c, cols).reshape(r * rows, c * cols)
    return full[: shape[0], : shape[1]]


class TpuBlockFP8Kernel(Fp8BlockScaledMMLinearKernel):
    @classmethod
    def is_supported(cls, compute_capability=None):
        return True, None

    @classmethod
    def can_implement(cls, config):
        ok, reason = super().can_implement(config)   # dynamic activations only
        if not ok:
            return ok, reason
        act = config.activation_quant_key.scale.group_shape
        weight = config.weight_quant_key.scale.group_shape
        if act != ACTIVATION_GROUP or weight != WEIGHT_BLOCK:
            return False, (f"takes {ACTIVATION_GROUP} activation groups and {WEIGHT_BLOCK} weight blocks "
                           f"(got {act} and {weight})")
        return True, None

    def get_output_padding(self):
        return None   # vLLM pads tokens for its CUDA kernels only

    def apply_block_scaled_mm(self, A, B, As, Bs):
        """A [M, K] fp8 with As [M, K/128] (vLLM's QuantFP8 made them from the
        layer's input), B [N, K] fp8 with Bs [N/128, K/128]: A @ B.T in float32."""
        a = A.to(torch.float32) * _expand(As.to(torch.float32), 1, ACTIVATION_GROUP.col, A.shape)
        b = B.to(torch.float32) * _expand(Bs.to(torch.float32), WEIGHT_BLOCK.row, WEIGHT_BLOCK.col, B.shape)
        return a @ b.t()


def register() -> None:
    """Offers the kernel to vLLM's block-scaled fp8 kernel choice for the
    out-of-tree platform (once per process, before the model is built)."""
    kernels = linear_kernels._POSSIBLE_FP8_BLOCK_KERNELS.setdefault(PlatformEnum.OOT, [])
    if TpuBlockFP8Kernel not in kernels:
        kernels.append(TpuBlockFP8Kernel)
