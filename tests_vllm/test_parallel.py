"""Tensor and pipeline parallelism on tpu: `tensor_parallel_size=2` and
`pipeline_parallel_size=2` over two worker processes (vLLM's multiprocessing
executor), each with its own tpu device, give the greedy tokens of one
device. Tensor parallelism's collectives are inside the captured step
(communicator.py), so each worker launches the programs one device launches;
each pipeline stage runs its layers as one captured program a step, the
hidden states passed between stages through the host (pipeline.py). With
expert parallelism each worker holds whole experts, half of them (moe.py).
Serving after the warm-up compiles nothing. What they have not been tested
with is refused at start."""
import json
import os

import pytest

import quantized_reference
import tiny_models
from conftest import VOCAB, greedy, run_llm

NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 2}


# Small limits: 20 step programs to compile in each configuration.
SMALL = {"max_num_seqs": 8, "max_num_batched_tokens": 128}


def compare(folder, layout, one_device=None, **llm):
    """Greedy tokens on two workers (`layout`) and on one device
    (`one_device`: its own options), the same, and serving after the
    warm-up compiling nothing on either."""
    llm = {**SMALL, **llm}
    prompts = tiny_models.prompts(5, 2, 40, VOCAB, seed=0)
    one = run_llm(folder, prompts, greedy(12), llm={**llm, **(one_device or {})})
    two = run_llm(folder, prompts, greedy(12), llm={**llm, **layout})
    assert two["tokens"] == one["tokens"]
    assert all(len(t) == 12 for t in two["tokens"])
    assert two["cache_misses"] == 0 and one["cache_misses"] == 0
    assert two["donated"] > 0   # the KV caches written in place
    return one, two


def check(folder, **llm):
    one, two = compare(folder, {"tensor_parallel_size": 2}, **llm)
    # The counters are both workers' together: each launched what the
    # single device did (no program per collective).
    assert two["launched"] == 2 * one["launched"] > 0
    return one, two


def check_pipeline(folder):
    # One device scheduling as the pipeline does: vLLM turns its async
    # scheduling off with pipeline parallelism.
    one, two = compare(folder, {"pipeline_parallel_size": 2}, {"async_scheduling": False})
    assert not two["async_scheduling"]
    # Both stages' counters together: each stage launches one program a
    # step (the last also gathers the sampled rows, as one device does).
    steps = sum(two["sampled_steps"].values())
    assert two["launched"] == one["launched"] + steps > steps


@pytest.mark.parametrize("layout", [{"tensor_parallel_size": 2}, {"pipeline_parallel_size": 2}])
def test_two_workers_give_hf_greedy(models, layout):
    # The CI slice: one engine each, against HF's greedy tokens on the CPU
    # (which one device gives for these prompts: test_greedy.py).
    folder = models("llama")
    prompts = tiny_models.prompts(5, 2, 40, VOCAB, seed=0)
    got = run_llm(folder, prompts, greedy(12), llm={**SMALL, **layout})
    assert got["tokens"] == tiny_models.hf_greedy(folder, prompts, 12)
    assert got["cache_misses"] == 0 and got["donated"] > 0


EXPERT_PARALLEL = {"tensor_parallel_size": 2, "enable_expert_parallel": True}


def check_expert_shares(folder, got):
    """Each worker holds half of every MoE layer's experts, whole (tensor
    parallelism alone would give each all of them, half their inner size)."""
    config = json.load(open(os.path.join(folder, "config.json")))
    experts = config.get("num_experts") or config["num_local_experts"]
    inner = config.get("moe_intermediate_size") or config["intermediate_size"]
    hidden = config["hidden_size"]
    for worker in got["parameter_shapes"]:
        w13 = {n: s for n, s in worker.items() if n.endswith("w13_weight")}
        assert len(w13) == config["num_hidden_layers"], worker
        assert all(s == [experts // 2, 2 * inner, hidden] for s in w13.values()), worker


@pytest.mark.parametrize("arch", ["qwen3-moe", pytest.param("mixtral", marks=pytest.mark.slow)])
def test_expert_parallel_gives_hf_greedy(models, arch):
    # The CI slice (Qwen3-MoE): one engine, against HF's greedy tokens on the
    # CPU (which one device gives: test_moe.py). Were the two workers'
    # experts not each a different half, or a token's other experts not
    # added by the all-reduce, the tokens would differ.
    folder = models(arch)
    prompts = tiny_models.prompts(5, 2, 40, VOCAB, seed=0)
    got = run_llm(folder, prompts, greedy(12), llm={**SMALL, **EXPERT_PARALLEL}, parameter_shapes="experts")
    assert got["tokens"] == tiny_models.hf_greedy(folder, prompts, 12)
    assert got["cache_misses"] == 0 and got["donated"] > 0
    check_expert_shares(folder, got)


@pytest.mark.slow
def test_expert_parallel_equals_one_device(models):
    one, two = compare(models("qwen3-moe"), EXPERT_PARALLEL)
    assert two["launched"] == 2 * one["launched"] > 0


@pytest.mark.slow
def test_tensor_parallel_2_equals_1(models):
    check(models("llama"))


@pytest.mark.slow
def test_tensor_parallel_mixture_of_experts(models):
    # FusedMoE's experts sharded across the ranks, summed by an all-reduce.
    check(models("qwen3-moe"))


@pytest.mark.slow
def test_tensor_parallel_ngram_drafts(models):
    one, two = check(models("llama"), speculative_config=NGRAM)
    assert two["spec_decode"] == one["spec_decode"]


@pytest.mark.slow
def test_pipeline_parallel_2_equals_1(models):
    check_pipeline(models("llama"))


@pytest.mark.slow
def test_pipeline_parallel_mixture_of_experts(models):
    check_pipeline(models("qwen3-moe"))


@pytest.mark.slow
def test_tensor_parallel_int8_experts(models):
    # int8_per_channel_weight_only quantizes the experts (moe_int8.py). Each
    # worker quantizes its shards, a sharded weight's scale taken over the
    # whole weight (vLLM all-reduces its amax at load: communicator.py), so
    # the int8 weights are one device's, and the activations are not
    # quantized: the bar is one device's (test_quantization.py), the CPU
    # reference with the same int8 experts.
    from test_quantization import _agrees_with_reference
    folder = models("qwen3-moe")
    prompts = tiny_models.prompts(6, 3, 30, VOCAB, seed=5)
    llm = {"quantization": "int8_per_channel_weight_only", "dtype": "float16", "max_num_seqs": 8,
           "max_num_batched_tokens": 128}
    got = run_llm(folder, prompts, {**greedy(12), "logprobs": 0}, llm={**llm, "tensor_parallel_size": 2})
    assert got["cache_misses"] == 0 and got["graphs_compiled"] == 0
    # One device's tokens (the logprobs differ by the float16 rounding of
    # the all-reduced partial sums: 0.002 at most, measured).
    assert got["tokens"] == run_llm(folder, prompts, greedy(12), llm=llm)["tokens"]
    ref, other = (quantized_reference.load_int8_moe(folder, attention=a) for a in ("sdpa", "eager"))
    _agrees_with_reference(got, prompts, ref, other, quantized_reference.load(folder, None))


@pytest.mark.slow
@pytest.mark.parametrize("llm, message", [
    ({"tensor_parallel_size": 2, "quantization": "fp8_per_channel", "dtype": "float16"},
     "tensor parallelism (tensor_parallel_size=2) with quantization 'fp8_per_channel'"),
    ({"tensor_parallel_size": 2, "pipeline_parallel_size": 2},
     "pipeline parallelism (pipeline_parallel_size=2) with tensor parallelism (tensor_parallel_size=2)"),
])
def test_untested_layouts_are_refused_at_start(models, llm, message):
    # The engine's own start (test_refusals.py checks each class on configs).
    got = run_llm(models("llama"), [], {}, expect_error=True, llm=llm)
    assert message in got["error"] and "\n" not in got["error"], got["error"]
