"""Multimodal models on tpu: what has been tried, and the model's two calls that
vLLM's runner makes with host tensors.

vLLM's runner encodes a step's new images itself: it batches their processed
pixels (host tensors, as every buffer of this runner) and calls the model's
`embed_multimodal`, keeps the result per image in its encoder cache, and
merges the rows a step schedules into the step's input embeddings through
`embed_input_ids(ids, multimodal_embeddings=..., is_multimodal=mask)`. Here
the first call takes its pixels to tpu and the vision tower and projector run
there, op by op (in the step's defer_and_fuse, a few fused launches); the
encoder cache holds the image embeddings on tpu, and the merge runs on tpu
too, returning the step's embeddings to the host buffer vLLM copies them
into. A multimodal model's every step, text-only ones included, then takes
input embeddings rather than token ids (vLLM's runner does so for all
multimodal models), so its forward runs op by op as prompt embeddings' do
(worker.py), not through the step's captured program.

Tested (tests_vllm/test_multimodal.py): LLaVA (LlavaForConditionalGeneration)
with a CLIP vision tower, images given as pictures. Other architectures,
vision towers and modalities, image embeddings as input and the multimodal
options that change the runner's path are refused at start (`unsupported`).
"""
import torch
from torch.utils._pytree import tree_map_only

# Architecture -> its tested vision towers (the vision config's model_type).
ARCHITECTURES = {"LlavaForConditionalGeneration": ("clip_vision_model",)}

# MultiModalConfig fields, as of vLLM 0.32, that put something untried in the
# runner's path when set away from their defaults. The rest are the
# front-end's (processor arguments and caches, limits, hashing).
_RUNNER_OPTIONS = (
    ("allow_missing_mm_embeddings", False),
    ("enable_mm_embeds", False),
    ("language_model_only", False),
    ("mm_encoder_attn_backend", None),
    ("mm_encoder_attn_dtype", None),
    ("mm_encoder_only", False),
    ("mm_ipc_gpu_memory_gb", 0),
    ("mm_tensor_ipc", "direct_rpc"),
    ("video_pruning_rate", None),
)


def unsupported(vllm_config) -> list[str]:
    """What of a multimodal model's config has not been tried on tpu (one
    entry each); nothing for a text-only model."""
    model = vllm_config.model_config
    if model is None or not model.is_multimodal_model:
        return []
    hf_config = getattr(model, "hf_config", None)
    architectures = list(getattr(hf_config, "architectures", None) or [])
    untried = [a for a in architectures if a not in ARCHITECTURES]
    if untried or not architectures:
        return [f"multimodal models other than {', '.join(ARCHITECTURES)} "
                f"(this one: {', '.join(untried) or 'no architecture named'})"]
    vision = getattr(getattr(hf_config, "vision_config", None), "model_type", None)
    towers = sorted({t for a in architectures for t in ARCHITECTURES[a]})
    parallel = vllm_config.parallel_config
    found = [what for what, used in (
        (f"multimodal vision tower {vision!r} (tested: {', '.join(towers)})", vision not in towers),
        ("multimodal models with LoRA adapters", getattr(vllm_config, "lora_config", None) is not None),
        ("multimodal models with pipeline parallelism", parallel.pipeline_parallel_size > 1),
        ("multimodal models with prompt embeddings (enable_prompt_embeds)",
         bool(getattr(model, "enable_prompt_embeds", False))),
        (f"multimodal models with quantization {model.quantization!r}", model.quantization is not None),
        ("multimodal models with speculative decoding", vllm_config.speculative_config is not None),
        ("multimodal models with tensor parallelism", parallel.tensor_parallel_size > 1),
    ) if used]
    for name, default in _RUNNER_OPTIONS:
        value = getattr(getattr(model, "multimodal_config", None), name, default)
        if value != default:
            found.append(f"multimodal option {name}={value!r}")
    return found


def pixtral_without_torchvision() -> None:
    """vLLM's LLaVA module imports its Pixtral one, which imports one function
    (`_num_image_tokens`) from transformers' Pixtral image processor, a module
    that needs torchvision; torchvision is not installed beside torch_tpu's
    CPU torch (scripts/install_vllm.sh removes it), so LLaVA failed to load.
    transformers' PIL processor of Pixtral defines the same function: it
    stands in under the torchvision module's name. Run in every vLLM process
    (a general plugin: vLLM inspects a model class in a process of its own)."""
    import importlib
    import importlib.util
    import sys
    name = "transformers.models.pixtral.image_processing_pixtral"
    if name in sys.modules or importlib.util.find_spec("torchvision") is not None:
        return
    sys.modules[name] = importlib.import_module("transformers.models.pixtral.image_processing_pil_pixtral")


def _to(x, device):
    """`x`'s tensors, in any nesting of lists, tuples and dicts, on `device`."""
    return tree_map_only(torch.Tensor, lambda t: t.to(device), x)


def install(model, device: torch.device) -> None:
    """Makes `model`'s embed_multimodal and embed_input_ids take vLLM's host
    tensors: their inputs go to `device`, and the image embeddings stay there
    (vLLM's encoder cache holds them until the merge). The runner brings the
    merged embeddings back to the host (worker.py)."""
    embed_multimodal, embed_input_ids = model.embed_multimodal, model.embed_input_ids

    def embed_multimodal_on_device(**kwargs):
        return embed_multimodal(**_to(kwargs, device))

    def embed_input_ids_from_host(input_ids, *args, **kwargs):
        return embed_input_ids(input_ids.to(device), *_to(args, device), **_to(kwargs, device))

    model.embed_multimodal = embed_multimodal_on_device
    model.embed_input_ids = embed_input_ids_from_host
