"""Tensor parallelism on tpu: `tensor_parallel_size=2` over two worker
processes (vLLM's multiprocessing executor), each with its own tpu device,
gives the greedy tokens of `tensor_parallel_size=1`. Its collectives are
inside the captured step (communicator.py), so each worker launches the
programs one device launches, and serving after the warm-up compiles
nothing. Pipeline parallelism is refused at start."""
import tiny_models
from conftest import VOCAB, greedy, run_llm


def test_tensor_parallel_2_equals_1(models):
    folder = models("llama")
    prompts = tiny_models.prompts(5, 2, 40, VOCAB, seed=0)
    one = run_llm(folder, prompts, greedy(12))
    two = run_llm(folder, prompts, greedy(12), llm={"tensor_parallel_size": 2})
    assert two["tokens"] == one["tokens"]
    assert all(len(t) == 12 for t in two["tokens"])
    # The counters are both workers' together: each launched what the
    # single device did (a program a step, none per collective), from the
    # warm-up's programs, and wrote its KV cache in place.
    assert two["launched"] == 2 * one["launched"]
    assert two["cache_misses"] == 0 and one["cache_misses"] == 0
    assert two["donated"] > 0


def test_pipeline_parallel_is_refused_at_start(models):
    got = run_llm(models("llama"), [], {}, expect_error=True, llm={"pipeline_parallel_size": 2})
    assert "pipeline parallelism (pipeline_parallel_size=2)" in got["error"]
