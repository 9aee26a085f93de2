"""vLLM options the plugin has not been tested with fail at engine start
with one line naming them (supported.py, the platform's quantization
allow-list, the attention backend), never mid-serving and never by a silent
fallback to the CPU; and the allow-list refuses an option it does not know."""
import dataclasses

import pytest

from conftest import run_llm
from torch_tpu.integrations.vllm import supported


def _refused(models, llm, arch="llama"):
    got = run_llm(models(arch), [[5]], {"max_tokens": 1}, llm=llm, expect_error=True)
    assert got["error"], "the engine started"
    return got["error"]


@pytest.mark.parametrize("llm, message", [
    ({"enable_lora": True, "speculative_config": {"method": "ngram", "num_speculative_tokens": 2,
                                                  "prompt_lookup_max": 2}},
     "LoRA adapters with speculative decoding"),
    ({"quantization": "mxfp8", "dtype": "bfloat16"}, "does not support quantization 'mxfp8'"),
    ({"speculative_config": {"method": "ngram_gpu", "num_speculative_tokens": 2}},
     "speculative decoding method 'ngram_gpu'"),
    ({"pipeline_parallel_size": 2, "enable_lora": True},
     "pipeline parallelism (pipeline_parallel_size=2) with LoRA adapters"),
])
def test_untested_options_fail_at_start(models, llm, message):
    error = _refused(models, llm)
    assert message in error and "\n" not in error, error


@pytest.mark.slow
@pytest.mark.parametrize("llm, message", [
    # Expert parallelism is not done (moe.py shards experts by TP only).
    ({"enable_expert_parallel": True}, "expert parallelism (enable_expert_parallel)"),
    # FusedMoE's methods are moe.py's (unquantized) and moe_int8.py's.
    ({"quantization": "fp8_per_tensor", "dtype": "bfloat16"},
     "mixture-of-experts layers (vLLM's FusedMoE) with quantization 'fp8_per_tensor' "
     "(tested: int8_per_channel_weight_only)"),
    # lora.py covers dense LoRA layers.
    ({"enable_lora": True}, "LoRA adapters on mixture-of-experts models"),
])
def test_untested_mixture_of_experts_options_fail_at_start(models, llm, message):
    error = _refused(models, llm, arch="qwen3-moe")
    assert error.startswith("NotImplementedError") and message in error and "\n" not in error, error


def test_every_vllm_config_field_is_reviewed():
    # A field vLLM adds is refused when set (below) until it is reviewed here.
    from vllm.config import VllmConfig
    assert {f.name for f in dataclasses.fields(VllmConfig)} == supported.REVIEWED


def test_an_unknown_option_set_is_refused():
    @dataclasses.dataclass
    class Config:
        model_config: object = None
        new_feature: object = None
        new_table: dict = dataclasses.field(default_factory=dict)

    assert supported._unreviewed(Config()) == []
    assert supported._unreviewed(Config(new_feature=1, new_table={"a": 1})) == [
        "new_feature (not tried with vLLM on tpu)", "new_table (not tried with vLLM on tpu)"]


def _config(model=None, cache=None, parallel=None, **optional):
    """A VllmConfig's fields as supported.py reads them, all at what the plugin accepts."""
    from types import SimpleNamespace as NS
    model = NS(**{"is_moe": False, "quantization": None, "is_multimodal_model": False, "is_encoder_decoder": False,
                  "is_hybrid": False, "is_attention_free": False, "runner_type": "generate",
                  "model_impl": "auto", "logits_processors": None, "enable_sleep_mode": False,
                  **(model or {})})
    cache = NS(**{"cache_dtype": "auto", "kv_offloading_size": None, "kv_cache_dtype_skip_layers": [], "kv_sharing_fast_prefill": False,
                  **(cache or {})})
    parallel = NS(**{"data_parallel_size": 1, "decode_context_parallel_size": 1,
                     "prefill_context_parallel_size": 1, "enable_expert_parallel": False,
                     "enable_eplb": False, "pipeline_parallel_size": 1, "tensor_parallel_size": 1,
                     **(parallel or {})})
    return NS(model_config=model, cache_config=cache, parallel_config=parallel,
              speculative_config=optional.pop("speculative_config", None), **optional)


@pytest.mark.parametrize("config, named", [
    ({"model": {"is_moe": True, "quantization": "fp8"}}, "mixture-of-experts layers (vLLM's FusedMoE) with quantization 'fp8'"),
    ({"model": {"quantization": "compressed-tensors", "hf_config": type("C", (), {"quantization_config": {
        "config_groups": {"group_0": {"weights": {"num_bits": 4, "type": "int", "symmetric": True,
                                                  "strategy": "group", "group_size": 128, "dynamic": False,
                                                  "actorder": "group"}}}}})}},
     "compressed-tensors config group 'group_0' (weights int4 group; tested: W8A8-int8"),
    ({"model": {"quantization": "auto_gptq", "hf_config": type("C", (), {"quantization_config": {
        "quant_method": "gptq", "bits": 8, "group_size": 128, "desc_act": False, "sym": True}})}},
     "GPTQ checkpoints of 8-bit weights (tested: (4,))"),
    ({"model": {"quantization": "auto_awq", "hf_config": type("C", (), {"quantization_config": {
        "quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "lm_head": True}})}},
     "AWQ checkpoints with a quantized LM head"),
    ({"model": {"is_multimodal_model": True}}, "multimodal models"),
    ({"model": {"is_encoder_decoder": True}}, "encoder-decoder models"),
    ({"model": {"is_hybrid": True}}, "hybrid and attention-free models"),
    ({"model": {"runner_type": "pooling"}}, "runner 'pooling'"),
    ({"model": {"model_impl": "transformers"}}, "model implementation 'transformers'"),
    ({"model": {"logits_processors": ["x.Y"]}}, "custom logits processors"),
    ({"model": {"enable_sleep_mode": True}}, "sleep mode"),
    ({"additional_config": {"torch_tpu_device_sampling": False, "torch_tpu_device_sampler": False}},
     "additional_config key 'torch_tpu_device_sampler' (known: torch_tpu_device_sampling)"),
    ({"cache": {"kv_offloading_size": 4.0}}, "KV cache offloading"),
    ({"cache": {"kv_cache_dtype_skip_layers": ["0"]}}, "kv_cache_dtype_skip_layers"),
    ({"cache": {"cache_dtype": "fp8"}, "lora_config": type("L", (), {"fully_sharded_loras": False})()},
     "an fp8 KV cache (kv_cache_dtype='fp8') with LoRA adapters"),
    ({"cache": {"cache_dtype": "fp8_e5m2"}, "speculative_config": type("S", (), {"method": "ngram"})()},
     "an fp8_e5m2 KV cache (kv_cache_dtype='fp8_e5m2') with speculative decoding"),
    ({"cache": {"cache_dtype": "fp8"}, "model": {"quantization": "fp8_per_tensor"}},
     "an fp8 KV cache (kv_cache_dtype='fp8') with quantization 'fp8_per_tensor'"),
    ({"cache": {"cache_dtype": "fp8_e4m3"}, "model": {"enable_prompt_embeds": True}},
     "an fp8_e4m3 KV cache (kv_cache_dtype='fp8_e4m3') with prompt embeddings"),
    ({"parallel": {"data_parallel_size": 2}}, "data parallelism (data_parallel_size=2)"),
    ({"parallel": {"decode_context_parallel_size": 2}}, "context parallelism"),
    ({"parallel": {"enable_expert_parallel": True}}, "expert parallelism"),
    ({"parallel": {"pipeline_parallel_size": 2, "tensor_parallel_size": 2}},
     "pipeline parallelism (pipeline_parallel_size=2) with tensor parallelism (tensor_parallel_size=2)"),
    ({"parallel": {"pipeline_parallel_size": 2}, "model": {"quantization": "fp8"}},
     "pipeline parallelism (pipeline_parallel_size=2) with quantization 'fp8'"),
    ({"parallel": {"pipeline_parallel_size": 2}, "lora_config": type("L", (), {"fully_sharded_loras": False})()},
     "pipeline parallelism (pipeline_parallel_size=2) with LoRA adapters"),
    ({"parallel": {"pipeline_parallel_size": 2}, "speculative_config": type("S", (), {"method": "ngram"})()},
     "pipeline parallelism (pipeline_parallel_size=2) with speculative decoding"),
    ({"parallel": {"pipeline_parallel_size": 2}, "model": {"enable_prompt_embeds": True}},
     "pipeline parallelism (pipeline_parallel_size=2) with prompt embeddings"),
    ({"parallel": {"tensor_parallel_size": 2}, "model": {"quantization": "fp8"}},
     "tensor parallelism (tensor_parallel_size=2) with quantization 'fp8'"),
    ({"parallel": {"tensor_parallel_size": 2}, "lora_config": type("L", (), {"fully_sharded_loras": False})()},
     "tensor parallelism with LoRA adapters"),
    ({"parallel": {"tensor_parallel_size": 2}, "speculative_config": type("S", (), {"method": "draft_model"})()},
     "tensor parallelism with speculative decoding method 'draft_model'"),
    ({"kv_transfer_config": object()}, "KV cache transfer / disaggregated prefill"),
    ({"speculative_config": type("S", (), {"method": "eagle3"})()}, "speculative decoding method 'eagle3'"),
    ({"lora_config": type("L", (), {"fully_sharded_loras": True})()}, "fully sharded LoRA layers"),
    ({"lora_config": type("L", (), {"fully_sharded_loras": False})(), "model": {"enable_prompt_embeds": True}},
     "LoRA adapters with prompt embeddings"),
])
def test_each_class_of_untested_option_is_named(config, named):
    # The same checks the engine start runs (above), on configs built here:
    # each names its option, and the accepted baseline names none.
    assert supported._untested_features(_config()) == []
    found = supported._untested_features(_config(**config))
    assert len(found) == 1 and named in found[0], found
