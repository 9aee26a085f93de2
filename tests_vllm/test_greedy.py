"""vLLM on tpu gives HF generate()'s greedy tokens (CPU, one prompt at a time)
for every prompt of a batch of different lengths, on tiny Llama, Qwen3, Mistral
(sliding window 8, prompts longer than it) and Gemma2 (sliding window, logit
soft-capping, tied embeddings) built here from random weights; with vLLM's
async scheduling (its default) and without; prompts given as token ids or as
their embeddings."""
import pytest

from conftest import VOCAB, greedy, run_llm
import tiny_models


def check(folder, n, lo, hi, new_tokens, seed=0, **spec):
    prompts = tiny_models.prompts(n, lo, hi, VOCAB, seed=seed)
    expected = tiny_models.hf_greedy(folder, prompts, new_tokens)
    got = run_llm(folder, prompts, greedy(new_tokens), **spec)
    bad = [i for i, (a, b) in enumerate(zip(got["tokens"], expected)) if a != b]
    assert not bad, f"prompts {bad} differ: {[(got['tokens'][i], expected[i]) for i in bad]}"
    assert len(got["tokens"]) == n and all(len(t) == new_tokens for t in got["tokens"])
    # The warm-up at start-up ran every program these steps needed.
    assert got["cache_misses"] == 0
    return got


def test_llama_batch_of_lengths(models):
    got = check(models("llama"), 5, 2, 40, 12)
    # Each step wrote its keys and values into the cache in place (a donated buffer).
    assert got["donated"] > 0
    assert got["async_scheduling"]
    # Decode steps took the last step's tokens on the device, unseen by the host.
    assert got["patched_steps"] > 0


@pytest.mark.slow
def test_llama_without_async_scheduling(models):
    # vLLM's default schedules a step ahead and the runner samples lazily;
    # without it the runner samples each step before the next is scheduled.
    got = check(models("llama"), 5, 2, 40, 12, llm={"async_scheduling": False})
    assert got["async_scheduling"] is False and got["patched_steps"] == 0


@pytest.mark.slow
def test_llama_prompts_as_embeddings(models):
    # vLLM embeds the generated tokens itself (the model's embedding on tpu,
    # its buffers on the host), and the step's logits come back padded. The
    # forward of such a step runs outside the captured programs (docs/vllm.md,
    # Not done), so it may compile: no cache check here.
    folder = models("llama")
    prompts = tiny_models.prompts(4, 2, 30, VOCAB, seed=0)
    expected = tiny_models.hf_greedy(folder, prompts, 8)
    got = run_llm(folder, prompts, greedy(8), llm={"enable_prompt_embeds": True}, as_embeddings=True)
    assert got["tokens"] == expected


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["qwen3", "mistral", "gemma2"])
def test_other_architectures(models, arch):
    check(models(arch), 6, 3, 60, 12, seed=1)
