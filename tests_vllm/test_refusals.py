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
    ({"enable_lora": True}, "does not support LoRA adapters (enable_lora)"),
    ({"quantization": "fp8_per_channel"}, "does not support quantization 'fp8_per_channel'"),
    ({"speculative_config": {"method": "ngram_gpu", "num_speculative_tokens": 2}},
     "speculative decoding method 'ngram_gpu'"),
    ({"tensor_parallel_size": 2}, "not supported yet (world size 2)"),
])
def test_untested_options_fail_at_start(models, llm, message):
    error = _refused(models, llm)
    assert message in error and "\n" not in error, error


@pytest.mark.slow
def test_mixture_of_experts_fails_at_start(models):
    error = _refused(models, {}, arch="qwen3-moe")
    assert error.startswith("NotImplementedError") and "mixture-of-experts layers (vLLM's FusedMoE)" in error


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
