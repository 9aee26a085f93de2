"""What vLLM on tpu has been tested with, checked when vLLM's config is made.

Many of vLLM's options change what the model runner does (LoRA, speculative
decoding, quantization, mixture-of-experts layers, disaggregated prefill...).
Untried, they fail deep in serving or, worse, run and give wrong tokens (n-gram
speculative decoding once did). So the platform checks the config at engine
start (`TpuPlatform.check_and_update_config`) and refuses what tests_vllm/ does
not cover, one line naming each option. It is an allow-list: every field of
vLLM's VllmConfig is either reviewed here (`REVIEWED`) or refused when set away
from its default, so an option a newer vLLM adds is refused until it is tried.
Quantization methods are vLLM's own allow-list (`TpuPlatform.
supported_quantization`); the attention backend refuses the attention
variants it does not cover (platform.get_attn_backend_cls).
"""
import dataclasses

from . import multimodal

# Speculative decoding methods whose tokens equal plain greedy decoding's
# (tests_vllm/test_speculative.py; EAGLE with a random head made there).
# EAGLE-3 and MTP were not tried; suffix decoding needs arctic-inference;
# ngram_gpu is the GPU runner's.
SPECULATIVE_METHODS = ("draft_model", "eagle", "ngram")

# VllmConfig's fields as of vLLM 0.32, each checked below or harmless to the
# runner (front-end, logging, scheduling policy, the configs the platform
# rewrites itself).
REVIEWED = frozenset({
    "additional_config", "attention_config", "aux_output_config", "cache_config",
    "compilation_config", "device_config", "diffusion_config", "ec_manager_config",
    "ec_transfer_config", "engram_config", "instance_id", "kernel_config", "kv_events_config",
    "kv_transfer_config", "load_config", "logging_config", "lora_config", "mamba_config",
    "model_config", "observability_config", "offload_config", "optimization_level",
    "parallel_config", "performance_mode", "profiler_config", "quant_config", "reasoning_config",
    "scheduler_config", "shutdown_timeout", "speculative_config", "structured_outputs_config",
    "watermark_config", "weight_transfer_config",
})

# Optional configs that, when present, put a feature in the runner's path.
_ABSENT = (
    ("diffusion_config", "diffusion language models"),
    ("ec_transfer_config", "encoder cache transfer (ec_transfer_config)"),
    ("engram_config", "Engram n-gram embeddings"),
    ("kv_transfer_config", "KV cache transfer / disaggregated prefill (kv_transfer_config)"),
    ("watermark_config", "watermarking (watermark_config)"),
    ("weight_transfer_config", "weight transfer (weight_transfer_config)"),
)


# Quantization methods of FusedMoE layers: moe_int8.py's (moe.py is the
# unquantized method).
MOE_QUANTIZATION = ("int8_per_channel_weight_only",)

# compressed-tensors' schemes with a kernel on tpu, each part's fields and
# their tested values (None: the part absent). W8A8-int8 (integrations/vllm/
# int8.py): int8 weights, a static symmetric scale per channel or tensor; int8
# activations, dynamic, symmetric, per token. WNA16 (wna16.py): 4- or 8-bit
# integer weights packed into int32, a scale (and, asymmetric, a zero point)
# per group of input channels or per output channel, no activation order.
COMPRESSED_TENSORS_SCHEMES = {
    "W8A8-int8": {
        "weights": {"num_bits": 8, "type": "int", "symmetric": True, "dynamic": False,
                    "strategy": ("channel", "tensor")},
        "input_activations": {"num_bits": 8, "type": "int", "symmetric": True, "dynamic": True,
                              "strategy": ("token",)},
    },
    "WNA16": {
        "weights": {"num_bits": (4, 8), "type": "int", "symmetric": (True, False), "dynamic": False,
                    "strategy": ("channel", "group"), "actorder": None},
        "input_activations": None,
    },
}


def _fits(group, scheme):
    """Whether a config group quantizes the parts `scheme` does, each field
    one of its tested values."""
    for part in ("weights", "input_activations", "output_activations"):
        args, fields = group.get(part), scheme.get(part)
        if not args or not fields:
            if args or fields:
                return False
        elif not all(args.get(key) in (want if isinstance(want, tuple) else (want,))
                     for key, want in fields.items()):
            return False
    return True


def _compressed_tensors_features(model):
    """A compressed-tensors checkpoint's config groups that no scheme of
    COMPRESSED_TENSORS_SCHEMES covers."""
    if model.quantization != "compressed-tensors":
        return ()
    config = getattr(model.hf_config, "quantization_config", None) or {}
    found = [what for key, what in (("kv_cache_scheme", "a compressed-tensors KV cache scheme"),
                                    ("sparsity_config", "compressed-tensors sparsity"),
                                    ("transform_config", "compressed-tensors transforms"))
             if config.get(key)]
    for name, group in sorted(config.get("config_groups", {}).items()):
        if not any(_fits(group, scheme) for scheme in COMPRESSED_TENSORS_SCHEMES.values()):
            found.append(f"compressed-tensors config group {name!r} ({_describe(group)}; tested: W8A8-int8, "
                         "int8 weights per channel or tensor, int8 dynamic per-token activations; WNA16, "
                         "int4 or int8 weights per group or channel, symmetric or not, no activation order)")
    return tuple((what, True) for what in found)


# GPTQ and AWQ checkpoints (wna16.py) as tested: 4-bit, the LM head and
# per-module overrides (GPTQModel's `dynamic`) not quantized.
GPTQ_AWQ_BITS = (4,)


def _gptq_awq_features(model):
    if model.quantization not in ("auto_awq", "auto_gptq"):
        return ()
    config = getattr(model.hf_config, "quantization_config", None) or {}
    bits = config.get("bits", config.get("w_bit"))
    name = model.quantization.removeprefix("auto_").upper()
    return ((f"{name} checkpoints of {bits}-bit weights (tested: {GPTQ_AWQ_BITS})", bits not in GPTQ_AWQ_BITS),
            (f"{name} checkpoints with a quantized LM head (lm_head)", bool(config.get("lm_head"))),
            (f"{name} checkpoints with per-module overrides (dynamic)", bool(config.get("dynamic"))))


def _describe(group):
    parts = []
    for part in ("weights", "input_activations", "output_activations"):
        args = group.get(part)
        if args:
            parts.append(f"{part} {args.get('type')}{args.get('num_bits')} {args.get('strategy')}"
                         f"{' dynamic' if args.get('dynamic') else ''}"
                         f"{'' if args.get('symmetric', True) else ' asymmetric'}")
    return ", ".join(parts) or "no quantized tensors"


def _model_features(model):
    return (
        (f"mixture-of-experts layers (vLLM's FusedMoE) with quantization {model.quantization!r} "
         f"(tested: {', '.join(MOE_QUANTIZATION)})",
         model.is_moe and model.quantization not in (None, *MOE_QUANTIZATION)),
        ("encoder-decoder models", model.is_encoder_decoder),
        ("hybrid and attention-free models (Mamba layers)", model.is_hybrid or model.is_attention_free),
        # 'draft': a speculative draft model's own config.
        (f"runner {model.runner_type!r} (only 'generate')", model.runner_type not in ("generate", "draft")),
        (f"model implementation {model.model_impl!r} (only vLLM's own)",
         str(getattr(model.model_impl, "value", model.model_impl)) not in ("auto", "vllm")),
        ("custom logits processors (logits_processors)", bool(model.logits_processors)),
        ("sleep mode (enable_sleep_mode)", model.enable_sleep_mode),
    )


def _cache_features(cache):
    return (
        ("KV cache offloading (kv_offloading_size)", bool(cache.kv_offloading_size)),
        # The runner allocates every layer's cache in kv_cache_dtype (worker.py).
        ("kv_cache_dtype_skip_layers", bool(cache.kv_cache_dtype_skip_layers)),
        ("kv_sharing_fast_prefill", cache.kv_sharing_fast_prefill),
    )


def _kv_cache_dtype_features(vllm_config):
    """An fp8 KV cache (kv_cache_fp8.py) is tested with unquantized dense
    models on one device, with chunked prefill and prefix caching
    (tests_vllm/test_kv_cache_fp8.py); what else it meets is not."""
    dtype = getattr(vllm_config.cache_config, "cache_dtype", "auto")
    if dtype == "auto":
        return ()
    model, parallel = vllm_config.model_config, vllm_config.parallel_config
    cache = f"an {dtype} KV cache (kv_cache_dtype={dtype!r})"
    quantization = getattr(model, "quantization", None)
    return ((f"{cache} with LoRA adapters", getattr(vllm_config, "lora_config", None) is not None),
            (f"{cache} with speculative decoding", vllm_config.speculative_config is not None),
            (f"{cache} with tensor or pipeline parallelism",
             parallel.tensor_parallel_size > 1 or parallel.pipeline_parallel_size > 1),
            (f"{cache} with quantization {quantization!r}", quantization is not None),
            (f"{cache} with a multimodal model", model is not None and bool(model.is_multimodal_model)),
            (f"{cache} with prompt embeddings (enable_prompt_embeds)",
             model is not None and bool(getattr(model, "enable_prompt_embeds", False))))


def _parallel_features(parallel):
    return (
        (f"data parallelism (data_parallel_size={parallel.data_parallel_size})",
         parallel.data_parallel_size > 1),
        ("context parallelism", parallel.decode_context_parallel_size > 1
         or parallel.prefill_context_parallel_size > 1),
        # moe.py's expert parallelism is vLLM's tensor-parallel layout (no
        # all-to-all); at tensor_parallel_size=1 vLLM ignores the option.
        ("expert parallelism (enable_expert_parallel) without tensor parallelism",
         parallel.enable_expert_parallel and parallel.tensor_parallel_size == 1),
        ("expert load balancing (enable_eplb)", parallel.enable_eplb),
    )


def _pipeline_parallel_features(vllm_config):
    """Pipeline parallelism (pipeline.py) is tested alone, with unquantized
    dense and MoE models (tests_vllm/test_parallel.py)."""
    size = vllm_config.parallel_config.pipeline_parallel_size
    if size == 1:
        return ()
    model = vllm_config.model_config
    quantization = getattr(model, "quantization", None)
    pp = f"pipeline parallelism (pipeline_parallel_size={size})"
    return ((f"{pp} with tensor parallelism (tensor_parallel_size="
             f"{vllm_config.parallel_config.tensor_parallel_size})",
             vllm_config.parallel_config.tensor_parallel_size > 1),
            (f"{pp} with quantization {quantization!r}", quantization is not None),
            (f"{pp} with LoRA adapters", getattr(vllm_config, "lora_config", None) is not None),
            (f"{pp} with speculative decoding", vllm_config.speculative_config is not None),
            (f"{pp} with prompt embeddings (enable_prompt_embeds)",
             model is not None and bool(getattr(model, "enable_prompt_embeds", False))))


def _lora_features(vllm_config):
    lora = getattr(vllm_config, "lora_config", None)
    if lora is None:
        return ()
    model = vllm_config.model_config
    # lora.py's punica wrapper covers vLLM's dense LoRA layers (not MoE or
    # fully sharded ones); a speculative drafter's forward and a step with
    # prompt embeddings run outside the captured step, untried with adapters.
    return (("LoRA adapters on mixture-of-experts models", model is not None and model.is_moe),
            ("fully sharded LoRA layers (fully_sharded_loras)", lora.fully_sharded_loras),
            ("LoRA adapters with speculative decoding", vllm_config.speculative_config is not None),
            ("LoRA adapters with prompt embeddings (enable_prompt_embeds)",
             model is not None and bool(getattr(model, "enable_prompt_embeds", False))))


# Quantization methods tested with tensor parallelism (tests_vllm/
# test_parallel.py): each worker quantizes its shards, a sharded weight's
# scale taken over the whole weight (communicator.py). fp8 and W8A8 also
# quantize activations, which a row-parallel layer's worker does over its
# half of the features: another quantization than one device's, whose
# tokens it does not give (fp8_per_channel: docs/vllm.md).
TENSOR_PARALLEL_QUANTIZATION = ("int8_per_channel_weight_only",)


def _tensor_parallel_features(vllm_config):
    """Tensor parallelism (communicator.py) is tested with dense and MoE
    models, the quantization methods above and n-gram drafts
    (tests_vllm/test_parallel.py)."""
    size = vllm_config.parallel_config.tensor_parallel_size
    if size == 1:
        return ()
    model, spec = vllm_config.model_config, vllm_config.speculative_config
    quantization = getattr(model, "quantization", None)
    return ((f"tensor parallelism (tensor_parallel_size={size}) with quantization {quantization!r} "
             f"(tested: {', '.join(TENSOR_PARALLEL_QUANTIZATION)})",
             quantization not in (None, *TENSOR_PARALLEL_QUANTIZATION)),
            (f"expert parallelism with quantization {quantization!r}",
             vllm_config.parallel_config.enable_expert_parallel and quantization is not None),
            ("tensor parallelism with LoRA adapters", getattr(vllm_config, "lora_config", None) is not None),
            (f"tensor parallelism with speculative decoding method {getattr(spec, 'method', None)!r} "
             "(tested: ngram)", spec is not None and spec.method != "ngram"))


def _additional_config_features(vllm_config):
    # additional_config is the platform's own table: a key it does not read
    # (a misspelt option) would be ignored without a word.
    from .sampling import OPTION
    known = (OPTION,)
    given = getattr(vllm_config, "additional_config", None) or {}
    return tuple((f"additional_config key {key!r} (known: {', '.join(known)})", True)
                 for key in sorted(given) if key not in known)


def _speculative_features(spec):
    if spec is None:
        return ()
    return ((f"speculative decoding method {spec.method!r} (tested: {', '.join(SPECULATIVE_METHODS)})",
             spec.method not in SPECULATIVE_METHODS),)


def _unreviewed(vllm_config):
    """VllmConfig fields this file does not know, set away from their defaults."""
    named = []
    for f in dataclasses.fields(vllm_config):
        if f.name in REVIEWED:
            continue
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = None
        if getattr(vllm_config, f.name) != default:
            named.append(f"{f.name} (not tried with vLLM on tpu)")
    return named


def _untested_features(vllm_config) -> list[str]:
    """The options reviewed here that `vllm_config` uses and no test covers."""
    found = [what for name, what in _ABSENT if getattr(vllm_config, name, None) is not None]
    found += multimodal.unsupported(vllm_config)
    features = (_additional_config_features(vllm_config)
                + _cache_features(vllm_config.cache_config)
                + _kv_cache_dtype_features(vllm_config)
                + _lora_features(vllm_config)
                + _parallel_features(vllm_config.parallel_config)
                + _pipeline_parallel_features(vllm_config)
                + _speculative_features(vllm_config.speculative_config)
                + _tensor_parallel_features(vllm_config))
    if vllm_config.model_config is not None:
        features = (_model_features(vllm_config.model_config)
                    + _compressed_tensors_features(vllm_config.model_config)
                    + _gptq_awq_features(vllm_config.model_config) + features)
    return found + [what for what, used in features if used]


def unsupported(vllm_config) -> list[str]:
    """The options of `vllm_config` that vLLM on tpu has not been tested with."""
    return _untested_features(vllm_config) + _unreviewed(vllm_config)


def check(vllm_config) -> None:
    """Refuses, in one line, every option of `vllm_config` not tested on tpu."""
    found = unsupported(vllm_config)
    if found:
        raise NotImplementedError(f"vLLM on tpu does not support {'; '.join(found)}: "
                                  "it has not been tested with the plugin (docs/vllm.md)")
