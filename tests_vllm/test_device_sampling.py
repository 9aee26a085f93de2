"""Greedy steps are sampled on `tpu` (integrations/vllm/sampling.py): the step's
program ends with the argmax of the sampled rows' logits and only the token
ids come to the host. The tokens stay HF generate()'s (CPU, one prompt at a
time); a step that asks for more than the argmax (here: logprobs) is sampled
on the host as before, and so is every step with the device path switched
off; neither compiles anything after the warm-up."""
import pytest
import torch

from conftest import VOCAB, greedy, run_llm
import tiny_models
from torch_tpu.integrations.vllm import sampling


def test_argmax_ties_take_the_lowest_index():
    # vLLM's greedy sampler is torch.argmax on the host, which breaks ties at
    # the lowest index; the program's argmax must too.
    logits = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0], [0.0, -1.0, 5.0, 5.0]])
    wide = torch.randn(4, 1000)
    wide[:, [7, 900]] = 100.0
    for x in (logits, wide):
        params = [p.to("tpu") for p in sampling.placeholder_inputs(x.shape[0], x.shape[1])]
        assert torch.equal(sampling.token_ids(x.to("tpu"), *params).cpu(), x.argmax(dim=-1))


def _run(folder, prompts, **spec):
    got = run_llm(folder, prompts, greedy(10), **spec)
    assert got["cache_misses"] == 0   # the warm-up compiled the one program per bucket
    return got


def test_greedy_batch_samples_on_device(models):
    folder = models("llama")
    prompts = tiny_models.prompts(5, 2, 40, VOCAB, seed=3)
    expected = tiny_models.hf_greedy(folder, prompts, 10)
    got = _run(folder, prompts)
    assert got["tokens"] == expected
    assert got["sampled_steps"]["host"] == 0 and got["sampled_steps"]["device"] > 0


def test_logprobs_in_the_batch_fall_back_to_the_host(models):
    # Every other request asks for logprobs: every step of the batch is
    # sampled on the host, the greedy requests' tokens and the others'
    # logprobs as without device sampling.
    folder = models("llama")
    prompts = tiny_models.prompts(4, 2, 40, VOCAB, seed=4)
    expected = tiny_models.hf_greedy(folder, prompts, 10)
    per_prompt = [{"logprobs": 1} if i % 2 else {} for i in range(len(prompts))]
    got = _run(folder, prompts, per_prompt=per_prompt)
    assert got["tokens"] == expected
    assert got["sampled_steps"]["device"] == 0 and got["sampled_steps"]["host"] > 0
    assert all((e["logprobs"] is not None) == bool(i % 2) for i, e in enumerate(got["extra"]))


@pytest.mark.slow
def test_switched_off_samples_on_the_host(models):
    folder = models("llama")
    prompts = tiny_models.prompts(3, 2, 40, VOCAB, seed=5)
    expected = tiny_models.hf_greedy(folder, prompts, 10)
    got = _run(folder, prompts, llm={"additional_config": {sampling.OPTION: False}})
    assert got["tokens"] == expected
    assert got["sampled_steps"]["device"] == 0 and got["sampled_steps"]["host"] > 0
