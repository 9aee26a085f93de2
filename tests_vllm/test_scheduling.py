"""What vLLM's scheduler does, on tpu, checked against HF's greedy tokens:
continuous batching (requests join while others decode), preemption (a KV cache
too small for the load), prefix caching (shared prefixes served from cached
blocks give the same tokens)."""
import pytest

import tiny_models
from conftest import VOCAB, greedy, run_llm

pytestmark = pytest.mark.slow


def _assert_same(got, expected):
    bad = [i for i, (a, b) in enumerate(zip(got, expected)) if a != b]
    assert len(got) == len(expected) and not bad, f"requests {bad} differ"


def test_continuous_batching_16_requests_join_while_others_decode(models):
    folder = models("llama")
    prompts = tiny_models.prompts(16, 2, 60, VOCAB, seed=3)
    expected = tiny_models.hf_greedy(folder, prompts, 10)
    got = run_llm(folder, prompts, greedy(10), waves=4)
    _assert_same(got["tokens"], expected)


def test_preemption_with_a_cache_too_small_for_the_load(models):
    folder = models("llama")
    prompts = tiny_models.prompts(12, 40, 60, VOCAB, seed=4)
    expected = tiny_models.hf_greedy(folder, prompts, 16)
    # 12 requests of up to 76 tokens need ~60 blocks of 16; give the cache 24
    # (one request at its longest needs 5), so running requests get preempted.
    block_bytes = 2 * 16 * 2 * 16 * 4 * 2            # K+V, block, kv heads, head dim, fp32, layers
    got = run_llm(folder, prompts, greedy(16),
                  llm={"kv_cache_memory_bytes": 24 * block_bytes, "enable_prefix_caching": False})
    _assert_same(got["tokens"], expected)
    assert got["preempted"] > 0, "the load did not preempt any request; the test checks nothing"


def test_prefix_caching_gives_the_same_tokens(models):
    folder = models("llama")
    shared = tiny_models.prompts(1, 40, 40, VOCAB, seed=5)[0]
    tails = tiny_models.prompts(6, 1, 20, VOCAB, seed=6)
    prompts = [shared + t for t in tails]
    expected = tiny_models.hf_greedy(folder, prompts, 8)
    on = run_llm(folder, prompts, greedy(8), llm={"enable_prefix_caching": True}, waves=3)
    off = run_llm(folder, prompts, greedy(8), llm={"enable_prefix_caching": False}, waves=3)
    _assert_same(on["tokens"], expected)
    _assert_same(off["tokens"], expected)
    assert on["prefix_cache_hits"] > 0 and off["prefix_cache_hits"] == 0
