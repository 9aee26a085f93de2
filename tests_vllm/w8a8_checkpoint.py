"""A compressed-tensors W8A8-int8 checkpoint of a tiny model, made here with
the `compressed-tensors` package (what llmcompressor's W8A8 recipe writes):
each decoder linear layer's weight as int8 with a float32 scale per output
channel or per tensor (symmetric, compressed-tensors' own scale and
rounding), activations
declared dynamic, symmetric, per token; the embeddings and LM head as they
were."""
import json
import os
import shutil

import torch

SCHEME = "W8A8"
IGNORE = ["lm_head"]


def build(folder: str, root: str, strategy: str = "channel") -> str:
    """The W8A8 copy of the HF model in `folder` under `root`, its weight
    scales per `strategy` ("channel" or "tensor"; built once)."""
    from compressed_tensors.quantization import (QuantizationConfig, QuantizationStatus,
                                                 preset_name_to_scheme)
    from compressed_tensors.quantization.lifecycle.forward import quantize
    from compressed_tensors.quantization.utils import calculate_qparams
    from safetensors.torch import load_file, save_file

    out = os.path.join(root, f"{os.path.basename(folder)}-w8a8-{strategy}")
    if os.path.exists(os.path.join(out, "done")):
        return out
    shutil.copytree(folder, out, dirs_exist_ok=True)
    scheme = preset_name_to_scheme(SCHEME, ["Linear"])
    scheme.weights.strategy = strategy
    dim = 1 if strategy == "channel" else None
    weights = load_file(os.path.join(folder, "model.safetensors"))
    packed = {}
    for name, w in weights.items():
        if not (name.startswith("model.layers.") and name.endswith("_proj.weight")):
            packed[name] = w
            continue
        w = w.float()
        lo, hi = (w.amin(dim=1, keepdim=True), w.amax(dim=1, keepdim=True)) if dim else (w.min(), w.max())
        scale, zero = calculate_qparams(lo.reshape(-1, 1), hi.reshape(-1, 1), scheme.weights)
        packed[name] = quantize(w, scale, zero, scheme.weights, dtype=torch.int8)
        packed[name.removesuffix("weight") + "weight_scale"] = scale.float() if dim else scale.float().reshape(1)
    save_file(packed, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    config_path = os.path.join(out, "config.json")
    config = json.load(open(config_path))
    config["quantization_config"] = QuantizationConfig(
        config_groups={"group_0": scheme}, ignore=IGNORE, format="int-quantized",
        quantization_status=QuantizationStatus.COMPRESSED).model_dump(mode="json")
    json.dump(config, open(config_path, "w"), indent=2)
    open(os.path.join(out, "done"), "w").write(SCHEME)
    return out
