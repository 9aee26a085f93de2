"""Which models to run, and how to build each one small, with its inputs."""
import importlib.util
import inspect
import json
import os

import torch

# Each field is shrunk to at most this value where a config has it as an int.
# Widths keep 32 = 4 heads of 8 so every head count below divides them.
SHRINK = {
    "hidden_size": 32, "d_model": 32, "embed_dim": 32, "projection_dim": 32,
    # RWKV's attention width, which its config copies from the default hidden size.
    "attention_hidden_size": 32,
    "intermediate_size": 64, "ffn_dim": 64, "d_ff": 64, "encoder_ffn_dim": 64,
    "decoder_ffn_dim": 64, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32,
    "num_hidden_layers": 2, "num_layers": 2, "encoder_layers": 2, "decoder_layers": 2,
    "num_decoder_layers": 2,
    "num_attention_heads": 4, "encoder_attention_heads": 4, "decoder_attention_heads": 4,
    "num_heads": 4, "num_key_value_heads": 2,
    "head_dim": 8, "d_kv": 8, "rotary_dim": 8,
    "vocab_size": 128, "decoder_vocab_size": 128, "max_position_embeddings": 64,
    "max_source_positions": 32, "max_target_positions": 64,
    "num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4, "num_experts_per_tok": 2,
    "image_size": 32, "patch_size": 8,
    # Widths a model keeps beside its hidden size (ALBERT's and MobileBERT's
    # embeddings, MobileBERT's bottleneck), and the n_/d_ spelling (Funnel, XLNet).
    "embedding_size": 32, "intra_bottleneck_size": 32, "true_hidden_size": 32,
    "n_head": 4, "d_head": 8, "d_inner": 64,
    # Vision towers of multimodal models: their block count, and the width
    # they project to (the text model's).
    "depth": 2, "out_hidden_size": 32,
    # Multi-head latent attention (DeepSeek V2/V3, GLM-4 MoE, Kimi): its head
    # parts and low ranks, and grouped routing that still fits 4 experts,
    # with an MoE layer among the 2.
    "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 8, "q_lora_rank": 16,
    "kv_lora_rank": 16, "n_group": 2, "topk_group": 1, "first_k_dense_replace": 1,
}
# Per-stage lists of layer counts: each entry is capped, the stage count kept
# (the other per-stage lists have its length). Two Swin blocks per stage keep
# the shifted-window block; Funnel needs one per block to stay small.
STAGE_DEPTHS = {"block_sizes": 1, "depths": 2}
# Fields no generic rule derives, per model type (sorted), set after shrink().
# Swin's stages halve the patch grid and its attention bias is sized by the
# configured window, so the last stage's grid must still hold a whole window:
# a 32-pixel image in 2-pixel patches gives 16, 8, 4, 2 patches per side.
_SWIN = {"patch_size": 2, "window_size": 2}
# The RNN-T and TDT heads' LSTM predictor width (640 by default: 7M parameters).
_RNNT = {"decoder_hidden_size": 32}
OVERRIDES = {
    # Its default leaves the experts per token unset (None), which routing cannot take.
    "deepseek_v2": {"num_experts_per_tok": 2},
    "donut-swin": _SWIN,
    # Its default leaves the expert counts unset (None): the expert weights
    # cannot be allocated nor the tokens routed.
    "dots1": {"n_routed_experts": 4, "n_shared_experts": 1, "num_experts_per_tok": 2},
    # Its default is B7 (64M parameters: twice the width, three times the
    # depth); B0's coefficients, whose head width hidden_dim must match.
    "efficientnet": {"depth_coefficient": 1.0, "hidden_dim": 1280, "width_coefficient": 1.0},
    # Its codebook width defaults to the unshrunk hidden size (128), which
    # its quantizer's projection must match; its convolutions double
    # num_filters at each of 4 downsamplings, and its LSTMs are that wide
    # (512 by default, 4M parameters each: 64 here).
    "encodec": {"codebook_dim": 32, "num_filters": 4},
    # Its default has no vocabulary nor pad and mask ids (ESM-2's tokenizer sets them).
    "esm": {"mask_token_id": 32, "pad_token_id": 1, "vocab_size": 128},
    # Its default shares the key/value caches of its last 15 layers (of 35),
    # which needs both attention types among the layers before them: the
    # shape of transformers' own tester (4 layers, the last 2 sharing).
    "gemma3n_text": {"layer_types": ["full_attention", "sliding_attention"] * 2, "num_hidden_layers": 4,
                     "num_kv_shared_layers": 2},
    # Its patch embedding is four stride-2 convolutions whatever patch_size
    # says, and its attention biases are sized by image_size // patch_size:
    # the two agree only at a patch of 16. 64 pixels give 4, 2, 1 per side;
    # its stage widths are not among the shrunk fields.
    "levit": {"hidden_sizes": [32, 64, 96], "image_size": 64, "patch_size": 16},
    # Its pixel decoder's width must be its hidden size (shrunk through
    # hidden_size): where they differ, it projects with convolutions it keeps
    # in a plain list, which .to() does not move.
    "mask2former": {"dim_feedforward": 64, "encoder_feedforward_dim": 64, "feature_size": 32,
                    "mask_feature_size": 32},
    "maskformer-swin": _SWIN,
    # Its rotary part is head_dim * partial_rotary_factor (0.5) wide and must
    # be qk_rope_head_dim: shrinking head_dim to the width per head breaks that.
    "mistral4": {"head_dim": 16},
    "nemotron3_5_asr": _RNNT,
    "nemotron_asr_streaming": _RNNT,
    "parakeet_rnnt": _RNNT,
    "parakeet_tdt": _RNNT,
    "swin": _SWIN,
    "swinv2": _SWIN,
}
HEADS = ("num_attention_heads", "encoder_attention_heads", "decoder_attention_heads", "num_heads",
         "n_head")
TOKEN_IDS = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id",
             "sep_token_id", "cls_token_id", "mask_token_id")
# Audio models whose input_features are (batch, frames, features), against
# Whisper's (batch, features, frames): the FastConformer encoders (Parakeet's
# CTC, RNN-T and TDT heads, Nemotron's RNN-T) and Speech2Text.
FRAMES_FIRST = ("nemotron3_5_asr", "nemotron_asr_streaming", "nemotron_asr_streaming_encoder", "parakeet_ctc",
                "parakeet_encoder", "parakeet_rnnt", "parakeet_tdt", "speech_to_text")
# Audio codecs whose input_values are (batch, channels, samples), against
# wav2vec2's (batch, samples).
WAVEFORM_CHANNELS = ("encodec",)
BATCH, SEQ = 2, 16


class UnknownModel(Exception):
    pass


def _auto():
    from transformers.models.auto import configuration_auto, modeling_auto
    return configuration_auto, modeling_auto


def _class_names(model_type):
    """The class to run for a model type: a masked-LM or causal-LM head when
    there is one (its loss is what training differentiates), else the base model."""
    _, ma = _auto()
    for mapping in (ma.MODEL_FOR_MASKED_LM_MAPPING_NAMES, ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                    ma.MODEL_MAPPING_NAMES):
        name = mapping.get(model_type)
        if isinstance(name, (tuple, list)):
            name = name[0]
        if name:
            return name
    return None


def architectures():
    """[(model_type, class name)] for every model type with a model class."""
    ca, _ = _auto()
    rows = []
    for model_type in sorted(ca.CONFIG_MAPPING_NAMES):
        cls = _class_names(model_type)
        if cls:
            rows.append((model_type, cls))
    return rows


def resolve(name):
    """A spec dict for one --only entry: a model type, an architecture class
    name, a Python file, or a folder with a config.json. Raises UnknownModel."""
    if name.endswith(".py") or os.sep in name or os.path.exists(name):
        path = os.path.abspath(name)
        if not os.path.exists(path):
            raise FileNotFoundError(f"no such file or folder: {name}")
        target = path if os.path.isfile(path) else os.path.join(path, "config.json")
        if not os.access(target, os.R_OK):
            raise PermissionError(f"cannot read {target}")
        if os.path.isfile(path):
            return {"name": name, "kind": "file", "path": path, "cls": os.path.basename(path)}
        with open(target) as f:
            archs = json.load(f).get("architectures") or [None]
        return {"name": name, "kind": "folder", "path": path, "cls": archs[0]}
    by_type = dict(architectures())
    if name in by_type:
        return {"name": name, "kind": "hf", "model_type": name, "cls": by_type[name]}
    _, ma = _auto()
    for attr in dir(ma):
        mapping = getattr(ma, attr)
        if attr.endswith("_MAPPING_NAMES") and isinstance(mapping, dict):
            for model_type, cls in mapping.items():
                if name in ((cls,) if isinstance(cls, str) else tuple(cls)):
                    return {"name": name, "kind": "hf", "model_type": model_type, "cls": name}
    raise UnknownModel(f"unknown model {name!r}: neither a model type of transformers "
                       f"{_transformers_version()}, an architecture class, nor a file or folder")


def _transformers_version():
    import transformers
    return transformers.__version__


def _sub_configs(config):
    from transformers import PreTrainedConfig
    for key in list(vars(config)):
        value = getattr(config, key, None)
        if isinstance(value, PreTrainedConfig):
            yield value


def _set(config, field, value):
    try:
        setattr(config, field, value)
    except (AttributeError, NotImplementedError):
        # A property computed from the other fields (Falcon's head_dim,
        # Funnel's num_hidden_layers: the sum of its block_sizes).
        pass


def _divisor(width, heads):
    """The largest head count up to heads that divides width."""
    return max(h for h in range(1, heads + 1) if width % h == 0)


def shrink(config):
    """Shrink the usual size fields of config (and its sub-configs) in place,
    keeping it consistent: heads divide widths, kv heads divide heads, token
    ids fit the vocabulary, per-layer lists match the layer count."""
    for sub in _sub_configs(config):
        shrink(sub)
    # A model without grouped-query attention keeps none: DeepSeek's latent
    # attention makes a key per query head, whatever num_key_value_heads says.
    mha = getattr(config, "num_key_value_heads", None) == getattr(config, "num_attention_heads", 0)
    for field, small in SHRINK.items():
        value = getattr(config, field, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > small:
            _set(config, field, small)
    width = next((getattr(config, f) for f in ("hidden_size", "d_model", "embed_dim")
                  if isinstance(getattr(config, f, None), int)), None)
    for field, cap in STAGE_DEPTHS.items():
        depths = getattr(config, field, None)
        if isinstance(depths, (list, tuple)) and all(isinstance(d, int) for d in depths):
            setattr(config, field, type(depths)(min(d, cap) for d in depths))
    for field in HEADS:
        heads = getattr(config, field, None)
        if isinstance(heads, int) and width and width % heads:
            setattr(config, field, _divisor(width, heads))
        elif isinstance(heads, (list, tuple)) and width and all(isinstance(h, int) for h in heads):
            # Per-stage heads (Swin): stage widths are multiples of the first,
            # so a divisor of the first width divides every stage's.
            setattr(config, field, type(heads)(_divisor(width, h) for h in heads))
    heads = getattr(config, "num_attention_heads", None)
    kv = getattr(config, "num_key_value_heads", None)
    # None means one per head in most configs; Nemotron's model divides by it as it is.
    unset = kv is None and hasattr(config, "num_key_value_heads")
    if isinstance(heads, int) and (unset or isinstance(kv, int) and (heads % kv or mha)):
        config.num_key_value_heads = heads
    if isinstance(getattr(config, "head_dim", None), int) and width and isinstance(heads, int):
        _set(config, "head_dim", width // heads)
    parts = [getattr(config, f, None) for f in ("qk_nope_head_dim", "qk_rope_head_dim")]
    if isinstance(getattr(config, "qk_head_dim", None), int) and all(isinstance(p, int) for p in parts):
        _set(config, "qk_head_dim", sum(parts))  # derived in the config's __init__
    vocab = getattr(config, "vocab_size", None)
    for field in TOKEN_IDS:
        tid = getattr(config, field, None)
        if isinstance(vocab, int) and isinstance(tid, int) and tid >= vocab:
            setattr(config, field, vocab - 1)
    _shrink_mrope(config, width, heads)
    layers = getattr(config, "num_hidden_layers", None)
    types = getattr(config, "layer_types", None)
    if isinstance(layers, int) and isinstance(types, list) and len(types) > layers:
        config.layer_types = types[:layers]
    if hasattr(config, "use_cache"):
        config.use_cache = False
    return config


def _shrink_mrope(config, width, heads):
    """Multimodal rotary embeddings (Qwen2-VL, GLM-4V) split the rotary
    frequencies into time, height and width sections whose sizes must add up
    to the shrunk head's; the models default to a full-size split when the
    config names none. A config that takes sections says so in the keys its
    rope validation ignores."""
    if "mrope_section" not in getattr(type(config), "ignore_keys_at_rope_validation", ()):
        return
    rope = getattr(config, "rope_parameters", None)
    head = getattr(config, "head_dim", None)
    head = head if isinstance(head, int) else (width // heads if width and isinstance(heads, int) else None)
    if not isinstance(rope, dict) or head is None:
        return
    freqs = int(head * rope.get("partial_rotary_factor", getattr(config, "partial_rotary_factor", 1.0))) // 2
    rope["mrope_section"] = [freqs - 2 * (freqs // 3), freqs // 3, freqs // 3]


def _text(config):
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def _vision(config):
    return getattr(config, "vision_config", None) or config


def _ids(config):
    vocab = getattr(_text(config), "vocab_size", None) or 128
    return torch.randint(0, vocab, (BATCH, SEQ))


def _pixels(config):
    vision = _vision(config)
    size = getattr(vision, "image_size", 32)
    size = size[0] if isinstance(size, (list, tuple)) else size
    return torch.randn(BATCH, getattr(vision, "num_channels", 3), size, size)


def _features(config):
    bins = getattr(config, "num_mel_bins", None) or getattr(config, "feature_size", 80)
    frames = 2 * getattr(config, "max_source_positions", 32)
    if config.model_type in FRAMES_FIRST:
        # Speech2Text reads its features per channel, stacked.
        bins = getattr(config, "input_feat_per_channel", bins) * getattr(config, "input_channels", 1)
        return torch.randn(BATCH, frames, bins)
    return torch.randn(BATCH, bins, frames)


def _waveform(config):
    if config.model_type in WAVEFORM_CHANNELS:
        return torch.randn(BATCH, getattr(config, "audio_channels", 1), 4000)
    return torch.randn(BATCH, 4000)


# One recipe per input a model can take, seeded by the caller.
RECIPES = {
    "input_features": _features,
    "input_ids": _ids,
    "input_values": _waveform,
    "pixel_values": _pixels,
}
IMAGE_TOKENS = ("image_token_id", "image_token_index")


def _two_towers(config):
    """A contrastive text-image model (CLIP, ALIGN, SigLIP...): each tower
    reads its own input. Models that put image features at image tokens in
    the text (LLaVA) are not: their text alone runs."""
    return (getattr(config, "text_config", None) is not None and
            getattr(config, "vision_config", None) is not None and
            not any(getattr(config, f, None) is not None for f in IMAGE_TOKENS))


def _pad(config, inputs, accepts):
    """Pads the text of a model that has a pad token, as a collator would: the
    first row on the right, the second on the left, a quarter of each, with
    the attention mask that says so (where forward takes one) and -100 labels
    there. Padded positions are where PyTorch skips values (padding_idx,
    ignore_index, masked keys), and where a lowering that multiplies by a zero
    mask instead lets a NaN or inf through: those runs are compared too."""
    pad = getattr(_text(config), "pad_token_id", None)
    vocab = getattr(_text(config), "vocab_size", None) or 128
    ids = inputs.get("input_ids")
    if not isinstance(pad, int) or not 0 <= pad < vocab or ids is None or ids.shape[0] < 2:
        return
    n = ids.shape[1] // 4
    padded = torch.zeros_like(ids, dtype=torch.bool)
    padded[0, -n:] = True
    padded[1, :n] = True
    ids[padded] = pad
    if "attention_mask" in accepts:
        inputs["attention_mask"] = (~padded).long()
    if "labels" in inputs:
        inputs["labels"] = ids.masked_fill(padded, -100)


def make_inputs(model, config):
    """Inputs for model's main input (seeded by the caller), plus the other
    inputs it requires or, for two towers, reads; labels when the head
    computes a loss, and decoder ids for encoder-decoders."""
    main = getattr(model, "main_input_name", "input_ids")
    if main not in RECIPES:
        raise ValueError(f"no input recipe for main input {main!r}")
    inputs = {main: RECIPES[main](config)}
    towers = _two_towers(config)
    for name, param in inspect.signature(model.forward).parameters.items():
        required = param.default is inspect.Parameter.empty and param.kind in (
            inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        wanted = required or (towers and name in ("input_ids", "pixel_values"))
        if name in RECIPES and name not in inputs and wanted:
            inputs[name] = RECIPES[name](config)
    # A speech encoder-decoder (Speech2Text) decodes text just as a text one does.
    if getattr(config, "is_encoder_decoder", False) and main in ("input_features", "input_ids"):
        inputs["decoder_input_ids"] = _ids(config)
    name = type(model).__name__
    if main == "input_ids" and ("ForCausalLM" in name or "ForMaskedLM" in name or "LMHead" in name):
        inputs["labels"] = inputs["input_ids"].clone()
    if main == "input_ids":
        _pad(config, inputs, inspect.signature(model.forward).parameters)
    return inputs


def _load_file(path):
    spec = importlib.util.spec_from_file_location("torch_tpu_validate_user_model", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, "validate_model"):
        raise AttributeError(f"{path} defines no validate_model() returning (module, inputs dict)")
    return module.validate_model()


def _wake_zero_parameters(model):
    """Gives each all-zero floating parameter small random values (seeded by
    the caller). A zero-initialized router gate (AFMoE's) scores every expert
    the same, and top-k's choice among ties is the CPU's sorting algorithm's
    accident, not a result; a zero-initialized branch gate makes gradients
    that are exactly zero, which compare nothing."""
    with torch.no_grad():
        for p in model.parameters():
            if p.is_floating_point() and p.numel() > 0 and not p.any():
                p.normal_(0.0, 0.02)
    return model


def build(spec):
    """(model, inputs) on the CPU for a spec from resolve(); seeded by the caller."""
    import transformers
    if spec["kind"] == "file":
        model, inputs = _load_file(spec["path"])
        return model, inputs
    if spec["kind"] == "folder":
        config = transformers.AutoConfig.from_pretrained(spec["path"])
        if hasattr(config, "use_cache"):
            config.use_cache = False
        cls = getattr(transformers, spec["cls"] or _class_names(config.model_type))
        weights = any(f.endswith((".safetensors", ".bin")) for f in os.listdir(spec["path"]))
        model = (cls.from_pretrained(spec["path"], config=config) if weights
                 else _wake_zero_parameters(cls(config)))
        return model, make_inputs(model, config)
    ca, _ = _auto()
    config = shrink(ca.CONFIG_MAPPING[spec["model_type"]]())
    for field, value in OVERRIDES.get(spec["model_type"], {}).items():
        setattr(config, field, value)
    cls = getattr(transformers, spec["cls"])
    model = _wake_zero_parameters(cls(config))
    return model, make_inputs(model, config)
