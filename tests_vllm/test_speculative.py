"""Speculative decoding on tpu: with n-gram drafts (prompt lookup), a draft
model and an EAGLE head, greedy tokens equal plain greedy decoding's (HF generate() on
the CPU), with drafts proposed and some of them, not all, accepted (so the
verification path ran: several sampled rows a sequence, the rejection
sampler, bonus tokens). Methods not tried are refused at start
(test_refusals.py)."""
import pytest

import eagle_head
import tiny_models
from conftest import VOCAB, greedy, run_llm

NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3}


def _prompts(n, seed):
    # Each prompt repeats a stretch of itself, so the n-gram lookup finds
    # matches in the prompt as well as in the model's output.
    return [p + p[: len(p) // 2] for p in tiny_models.prompts(n, 4, 24, VOCAB, seed=seed)]


def check(folder, prompts, new_tokens, speculative=NGRAM, **spec):
    expected = tiny_models.hf_greedy(folder, prompts, new_tokens)
    got = run_llm(folder, prompts, greedy(new_tokens), llm={"speculative_config": speculative}, **spec)
    bad = [i for i, (a, b) in enumerate(zip(got["tokens"], expected)) if a != b]
    assert not bad, f"prompts {bad} differ: {[(got['tokens'][i], expected[i]) for i in bad]}"
    drafted = got["spec_decode"]
    assert drafted["draft_tokens"] > 0 and 0 < drafted["accepted"] < drafted["draft_tokens"], drafted
    return got


def test_ngram_equals_greedy(models):
    got = check(models("llama"), _prompts(4, seed=3), 16)
    # The warm-up's programs cover a step's sampled rows with drafts too.
    assert got["cache_misses"] == 0


@pytest.mark.slow
def test_ngram_with_requests_joining(models):
    # Continuous batching: requests join while others verify drafts.
    check(models("qwen3"), _prompts(12, seed=4), 20, waves=3)


@pytest.mark.slow
def test_draft_model_equals_greedy(models, tmp_path):
    # The draft is the target with noise on its weights: it agrees often,
    # not always. Its forward runs op by op (docs/vllm.md), so no cache check.
    folder = models("llama")
    draft = tiny_models.perturbed(folder, str(tmp_path), 0.5)
    check(folder, _prompts(4, seed=5), 16,
          speculative={"method": "draft_model", "model": draft, "num_speculative_tokens": 3})


@pytest.mark.slow
def test_eagle_equals_greedy(models, tmp_path):
    # vLLM's EAGLE proposer on the target's hidden states; the head is
    # random, made to be accepted now and then (eagle_head.py). Its forward
    # runs op by op, as the draft model's.
    folder = models("llama")
    head = eagle_head.build(folder, str(tmp_path))
    check(folder, _prompts(4, seed=5), 16,
          speculative={"method": "eagle", "model": head, "num_speculative_tokens": 3})
