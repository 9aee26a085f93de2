"""Quantized checkpoints of a tiny model, written here: each decoder linear
layer's weight quantized, the embeddings, norms and LM head as they were.

- compressed-tensors (`w8a8`, `w4a16`, `w4a16-asym`, `w8a16`), with the
  `compressed-tensors` package (what llmcompressor writes): its presets, its
  own scales, zero points and rounding, its int8 or pack-quantized format.
  W8A8: int8 weights with a float32 scale per output channel or per tensor,
  activations declared dynamic, symmetric, per token. WNA16: 4- or 8-bit
  integers packed into int32 with a scale per group of input channels (or
  per output channel), symmetric or with zero points.
- GPTQ and AWQ 4-bit (`gptq`, `awq`), written from their formats (AutoGPTQ's
  and AutoAWQ's GEMM layout) with round-to-nearest values (GPTQ's and AWQ's
  searches choose other values, stored the same way). GPTQ: symmetric,
  value = round(w / s) + 8 in [0, 15], s = max|group| / 7.5 (2 max / 15),
  `qweight` [K/8, N] packed along K, `qzeros` [G, N/8] holding 8 - 1 (its
  v1 convention), `scales` [G, N] float16, `g_idx` [K] (k // group_size: no
  activation order). AWQ: asymmetric, s = (max - min) / 15, zero =
  round(-min / s), value = round(w / s) + zero in [0, 15]; `qweight` [K, N/8]
  and `qzeros` [G, N/8] packed along N in AWQ's order of columns (0, 2, 4,
  6, 1, 3, 5, 7 in a word's nibbles from the lowest), `scales` [G, N] float16.
"""
import json
import os
import shutil

import torch

CT_PRESETS = {"w4a16": "W4A16", "w4a16-asym": "W4A16_ASYM", "w8a16": "W8A16", "w8a8": "W8A8"}
SCHEMES = (*CT_PRESETS, "awq", "gptq")
IGNORE = ["lm_head"]
AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)


def build(folder: str, root: str, scheme: str = "w8a8", strategy: str = "channel", group_size: int = 32) -> str:
    """The `scheme` copy of the HF model in `folder` under `root` (built once).
    `strategy`: compressed-tensors' "channel", "tensor" (W8A8) or "group"
    (`group_size` input channels a scale; GPTQ and AWQ always group)."""
    if scheme not in SCHEMES:
        raise ValueError(f"no checkpoint scheme {scheme!r} (known: {', '.join(SCHEMES)})")
    from safetensors.torch import load_file, save_file

    tag = strategy if scheme in CT_PRESETS else "group"
    out = os.path.join(root, f"{os.path.basename(folder)}-{scheme}-{tag}"
                             f"{group_size if tag == 'group' else ''}")
    if os.path.exists(os.path.join(out, "done")):
        return out
    shutil.copytree(folder, out, dirs_exist_ok=True)
    if scheme in CT_PRESETS:
        quantize, quantization_config = _compressed_tensors(scheme, strategy, group_size)
    else:
        quantize, quantization_config = _FORMATS[scheme](group_size)
    written = {}
    for name, w in load_file(os.path.join(folder, "model.safetensors")).items():
        if name.startswith("model.layers.") and name.endswith("_proj.weight"):
            written.update({name.removesuffix("weight") + k: v for k, v in quantize(w.float()).items()})
        else:
            written[name] = w
    save_file(written, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    config_path = os.path.join(out, "config.json")
    config = json.load(open(config_path))
    config["quantization_config"] = quantization_config
    json.dump(config, open(config_path, "w"), indent=2)
    open(os.path.join(out, "done"), "w").write(scheme)
    return out


def _compressed_tensors(scheme, strategy, group_size):
    from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor
    from compressed_tensors.quantization import QuantizationConfig, QuantizationStatus, preset_name_to_scheme
    from compressed_tensors.quantization.lifecycle.forward import quantize
    from compressed_tensors.quantization.utils import calculate_qparams

    preset = preset_name_to_scheme(CT_PRESETS[scheme], ["Linear"])
    args = preset.weights
    args.strategy = strategy
    args.group_size = group_size if strategy == "group" else None
    packed = preset.input_activations is None

    def quantize_weight(w):
        rows = w.shape[0]
        if strategy == "tensor":
            lo, hi = w.min().reshape(1, 1), w.max().reshape(1, 1)
        else:
            grouped = w.reshape(rows, -1, group_size if strategy == "group" else w.shape[1])
            lo, hi = grouped.amin(dim=-1), grouped.amax(dim=-1)
        scale, zero = calculate_qparams(lo, hi, args)
        if packed:
            tensors = {"weight": w, "weight_scale": scale}
            if not args.symmetric:
                tensors["weight_zero_point"] = zero
            return dict(PackedQuantizationCompressor.compress(tensors, preset))
        return {"weight": quantize(w, scale, zero, args, dtype=torch.int8),
                "weight_scale": scale.float().reshape(1) if strategy == "tensor" else scale.float()}

    config = QuantizationConfig(config_groups={"group_0": preset}, ignore=IGNORE,
                                format="pack-quantized" if packed else "int-quantized",
                                quantization_status=QuantizationStatus.COMPRESSED).model_dump(mode="json")
    return quantize_weight, config


def _pack(values: torch.Tensor, dim: int, order=range(8)) -> torch.Tensor:
    """4-bit `values` (int, [0, 15]) packed 8 an int32 along `dim`, the
    word's i-th nibble from the lowest holding the `order[i]`-th of its 8."""
    v = values.to(torch.int64).movedim(dim, -1)
    v = v.reshape(*v.shape[:-1], -1, 8)[..., list(order)]
    words = sum(v[..., i] << (4 * i) for i in range(8))
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32).movedim(-1, dim).contiguous()


def _groups(w: torch.Tensor, group_size: int) -> torch.Tensor:
    """w [N, K] as [K / group_size, group_size, N]: a group's rows of w.T."""
    return w.t().reshape(-1, group_size, w.shape[0])


def _gptq(group_size):
    def quantize_weight(w):
        g = _groups(w, group_size)
        scale = (2 * g.abs().amax(dim=1) / 15).clamp(min=1e-8).half()
        q = ((g / scale.float()[:, None, :]).round() + 8).clamp(0, 15).reshape(w.shape[1], w.shape[0])
        return {"qweight": _pack(q, 0), "qzeros": _pack(torch.full_like(scale, 7, dtype=torch.int64), 1),
                "scales": scale, "g_idx": torch.arange(w.shape[1], dtype=torch.int32) // group_size}

    return quantize_weight, {"quant_method": "gptq", "bits": 4, "group_size": group_size, "desc_act": False,
                             "sym": True, "checkpoint_format": "gptq"}


def _awq(group_size):
    def quantize_weight(w):
        g = _groups(w, group_size)
        lo, hi = g.amin(dim=1), g.amax(dim=1)
        scale = ((hi - lo) / 15).clamp(min=1e-5).half()
        zero = (-lo / scale.float()).round().clamp(0, 15)
        q = ((g / scale.float()[:, None, :]).round() + zero[:, None, :]).clamp(0, 15)
        return {"qweight": _pack(q.reshape(w.shape[1], w.shape[0]), 1, AWQ_ORDER),
                "qzeros": _pack(zero, 1, AWQ_ORDER), "scales": scale}

    return quantize_weight, {"quant_method": "awq", "bits": 4, "group_size": group_size, "zero_point": True,
                             "version": "gemm"}


_FORMATS = {"awq": _awq, "gptq": _gptq}
