"""TorchTitan's Trainer on `tpu`: it refuses at start the options that only
CUDA has, builds the block-causal mask for BlockCausalSDPA from each batch's
positions, and reports MFU against the device's peak FLOPS or says it does
not know them (TorchTitan alone would divide by an A100's figure)."""
import json
from dataclasses import dataclass

import torch
from torchtitan.distributed.activation_checkpoint import FullAC
from torchtitan.models.common.attention import FlexAttention, VarlenAttention
from torchtitan.tools.logging import logger
from torchtitan.trainer import Trainer

from . import compat
from .attention import BlockCausalSDPA, block_causal_mask

compat.install()

# Dense bfloat16 peak FLOPS per chip by the name libtpu gives the device
# (Google Cloud's TPU pages); the longest matching prefix wins.
TPU_PEAK_FLOPS = {
    "TPU v4": 275e12,
    "TPU v5 lite": 197e12,
    "TPU v5e": 197e12,
    "TPU v5p": 459e12,
    "TPU v5": 459e12,
    "TPU v6 lite": 918e12,
    "TPU v6e": 918e12,
}


def peak_flops(device_name: str):
    """Peak FLOPS of a `tpu` device by name, None when unknown (the CPU
    plugin, and any chip not in TPU_PEAK_FLOPS)."""
    matches = [k for k in TPU_PEAK_FLOPS if device_name.startswith(k)]
    return TPU_PEAK_FLOPS[max(matches, key=len)] if matches else None


def cuda_only_options(config) -> list[str]:
    """The options of a Trainer.Config that need CUDA, each with how it was asked for."""
    found = []
    if config.compile.enable and config.compile.backend != "tpu":
        found.append(f"--compile.backend {config.compile.backend} (use --compile.backend tpu)")
    if not config.training.disable_cuda_graphs:
        found.append("CUDA graphs (--training.no-disable_cuda_graphs)")
    if config.parallelism.enable_fsdp_symm_mem:
        found.append("symmetric memory (--parallelism.enable_fsdp_symm_mem)")
    if config.compile.enable_async_tensor_parallel:
        found.append("async tensor parallel, on symmetric memory (--compile.enable_async_tensor_parallel)")
    if config.model_spec is not None:
        model = config.model_spec.model
        if any(True for _ in model.traverse(FlexAttention.Config)):
            found.append("FlexAttention (attn_backend flex/flex_flash; torch_tpu uses BlockCausalSDPA)")
        if any(True for _ in model.traverse(VarlenAttention.Config)):
            found.append("varlen flash attention (attn_backend varlen; torch_tpu uses BlockCausalSDPA)")
        quantized = sorted({type(c).__qualname__ for _, c, _, _ in model.traverse(object, recurse=True)
                            if type(c).__module__.startswith("torchtitan.components.quantization")})
        if quantized:
            found.append(f"low-precision training (float8/MX/NVFP4 converters: {', '.join(quantized)})")
    return found


class TpuTrainer(Trainer):
    @dataclass(kw_only=True, slots=True)
    class Config(Trainer.Config):
        metrics_jsonl: str = ""
        """File to append each logged step's metrics to, one JSON object per
        line at full precision (the console line rounds the loss to 5 places)."""

        def __post_init__(self):
            Trainer.Config.__post_init__(self)
            refused = cuda_only_options(self)
            if refused:
                raise ValueError("torch_tpu: these TorchTitan options need CUDA and are not available on tpu: "
                                 + "; ".join(refused))
            if self.compile.enable and "model" in self.compile.components \
                    and isinstance(self.activation_checkpoint, FullAC.Config):
                # Recomputing SDPA (tagged as random) under AOTAutograd saves the RNG
                # state through torch._prims.rng_prims, which knows only cuda/cpu/hpu/xpu.
                raise ValueError("torch_tpu: --compile.enable with activation-checkpoint:full is not available on "
                                 "tpu with torch 2.13 (use activation-checkpoint:selective, the default, or eager)")

    def __init__(self, config: Config):
        super().__init__(config)
        name = self.metrics_processor.device_memory_monitor.device_name
        peak = peak_flops(name)
        if peak is None:
            logger.info(f"torch_tpu: peak FLOPS of '{name}' unknown: mfu is N/A (not an A100's figure)")
            # TorchTitan's switch for printing mfu as N/A (it uses it when quantized).
            self.metrics_processor.has_quantization = True
        else:
            self.metrics_processor.gpu_peak_flops = peak
        if config.metrics_jsonl and torch.distributed.get_rank() == 0:
            self.metrics_processor.logger = _JsonlTee(self.metrics_processor.logger, config.metrics_jsonl)

    def post_dataloading_process(self, input_dict, labels):
        inputs, labels, extra = super().post_dataloading_process(input_dict, labels)
        positions = extra.get("positions")
        uses_mask = any(True for _ in self.config.model_spec.model.traverse(BlockCausalSDPA.Config))
        if uses_mask:
            if positions is None:
                raise ValueError("BlockCausalSDPA needs per-document positions from the dataloader; this batch has none")
            extra["attention_masks"] = block_causal_mask(positions.to(self.device))
        return inputs, labels, extra


class _JsonlTee:
    """TorchTitan's metric logger, also appending each step's metrics to a file."""

    def __init__(self, inner, path: str):
        self.inner, self.path = inner, path

    def log(self, metrics, step):
        self.inner.log(metrics, step)
        with open(self.path, "a") as f:
            f.write(json.dumps({"step": step, **{k: float(v) for k, v in metrics.items()}}) + "\n")

    def __getattr__(self, name):
        return getattr(self.inner, name)
