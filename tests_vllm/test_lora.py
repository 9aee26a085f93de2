"""LoRA adapters on tpu (lora.py): adapters made here with PEFT (random,
non-zero A and B, saved with save_pretrained), each request its own, in one
batch, give the greedy tokens of HF generate() on the CPU with that adapter
merged (PEFT's merge_and_unload), and a request without one the base model's;
adapters added, removed and evicted at run time keep doing so; no adapter
compiles a program after the warm-up (one step program serves every mix).
An adapter whose rank exceeds max_lora_rank or whose targets the plugin does
not serve fails its request naming it, and the engine serves on."""
import json
import os
import urllib.error
import urllib.request

import pytest

import tiny_models
from conftest import VOCAB, greedy, run_script
from server_process import post, serve

NEW_TOKENS = 8
LLM = {"enable_lora": True, "max_loras": 2, "max_lora_rank": 8, "max_num_seqs": 8,
       "max_num_batched_tokens": 128, "dtype": "float32", "max_model_len": 256,
       "kv_cache_memory_bytes": 16 << 20, "seed": 0}
# name: (targets, rank); random A and B, made with PEFT from the seed of its position.
ADAPTERS = {
    "attn": (["q_proj", "k_proj", "v_proj", "o_proj"], 8),
    "mlp": (["gate_proj", "up_proj", "down_proj", "embed_tokens"], 4),
    "all": (["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"], 8),
    "rank16": (["q_proj", "v_proj"], 16),
    "lm_head": (["q_proj", "lm_head"], 8),
}


@pytest.fixture(scope="module")
def lora_models(models, tmp_path_factory):
    base = models("llama")
    root = str(tmp_path_factory.mktemp("lora"))
    made = {name: tiny_models.lora_adapter(base, root, name, *ADAPTERS[name], seed=seed)
            for seed, name in enumerate(ADAPTERS, 1)}
    return {"base": base, "adapters": {n: [i, a] for i, (n, (a, _)) in enumerate(made.items(), 1)},
            "merged": {n: m for n, (_, m) in made.items()}}


def _expected(lora_models, batch):
    """HF's greedy tokens for each [prompt, adapter] of a batch."""
    return [tiny_models.hf_greedy(lora_models["merged"][a] if a else lora_models["base"], [p],
                                  NEW_TOKENS)[0] for p, a in batch]


def _run(lora_models, phases, **llm):
    spec = {"model": lora_models["base"], "llm": {**LLM, **llm}, "adapters": lora_models["adapters"],
            "sampling": greedy(NEW_TOKENS), "phases": phases}
    return run_script("run_lora.py", spec)[0]


def _batch(adapters, seed):
    prompts = tiny_models.prompts(len(adapters), 3, 40, VOCAB, seed=seed)
    return [[p, a] for p, a in zip(prompts, adapters)]


def test_two_adapters_in_one_batch_and_bad_adapters(lora_models):
    first = _batch(["attn", "attn"], seed=1)
    mixed = _batch(["attn", "mlp", None, "mlp", "attn"], seed=2)
    got = _run(lora_models, [{"generate": first}, {"generate": mixed},
                             {"generate": [[[5, 6, 7], "rank16"]]},
                             {"generate": [[[5, 6, 7], "lm_head"]]},
                             {"generate": mixed}])
    assert got[0]["tokens"] == _expected(lora_models, first)
    expected = _expected(lora_models, mixed)
    assert got[1]["tokens"] == expected
    # The base model's tokens differ from each adapter's: the adapters act.
    base = _expected(lora_models, [[p, None] for p, _ in mixed])
    assert all(b != e for b, e, (_, a) in zip(base, expected, mixed) if a)
    # The warm-up's programs serve every mix of adapters: the second adapter
    # (and loading it) compiled and loaded nothing.
    assert got[0]["cache_misses"] == got[1]["cache_misses"] == 0
    assert "LoRA adapter 'rank16'" in got[2]["error"] and "rank 16 is greater than max_lora_rank 8" in got[2]["error"]
    assert "LoRA adapter 'lm_head'" in got[3]["error"] and "adapts lm_head" in got[3]["error"]
    # The engine serves on after the refused requests.
    assert got[4]["tokens"] == expected


@pytest.mark.slow
def test_adapters_added_removed_and_evicted_at_run_time(lora_models):
    # Two slots: "all" takes the slot of the least recently used adapter.
    one = _batch(["attn", "mlp", None], seed=3)
    two = _batch(["all", "mlp", "all"], seed=4)
    three = _batch(["attn", None, "all"], seed=5)
    got = _run(lora_models, [{"add": "attn"}, {"add": "mlp"}, {"generate": one},
                             {"remove": "attn"}, {"generate": two}, {"generate": three},
                             {"add": "rank16"}, {"generate": one}],
               max_cpu_loras=2)
    assert [g.get("result") for g in got[:2]] == [True, True] and got[3]["result"] is True
    assert got[2]["tokens"] == _expected(lora_models, one)
    assert got[4]["tokens"] == _expected(lora_models, two)
    assert got[5]["tokens"] == _expected(lora_models, three)
    # add_lora goes to the worker directly, which checks the adapter too.
    assert "LoRA adapter 'rank16'" in got[6]["error"] and "max_lora_rank 8" in got[6]["error"]
    assert got[7]["tokens"] == got[2]["tokens"]
    assert all(g["cache_misses"] == 0 for g in got)


def test_server_refuses_bad_adapters_with_a_400(lora_models, tmp_path):
    # /v1/load_lora_adapter checks an adapter before the engine loads it (vLLM
    # answers a failed load with a 500); adapters load and serve at run time.
    paths = {n: a for n, (_, a) in lora_models["adapters"].items()}
    args = ["--dtype", "float32", "--max-model-len", "256", "--kv-cache-memory-bytes", str(16 << 20),
            "--max-num-seqs", "8", "--max-num-batched-tokens", "128", "--enable-lora",
            "--max-loras", "2", "--max-lora-rank", "8", "--lora-modules", f"attn={paths['attn']}"]
    with serve(lora_models["base"], tmp_path / "server.log", args,
               env={"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"}) as server:
        base = server["base"]
        for name, named in (("rank16", "rank 16 is greater than max_lora_rank 8"),
                            ("lm_head", "adapts lm_head")):
            with pytest.raises(urllib.error.HTTPError) as err:
                post(base + "/v1/load_lora_adapter", {"lora_name": name, "lora_path": paths[name]})
            body = err.value.read().decode()
            assert err.value.code == 400 and f"LoRA adapter '{name}'" in body and named in body, body
        load = urllib.request.Request(base + "/v1/load_lora_adapter", json.dumps(
            {"lora_name": "mlp", "lora_path": paths["mlp"]}).encode(), {"Content-Type": "application/json"})
        assert urllib.request.urlopen(load, timeout=120).status == 200
        batch = _batch(["attn", "mlp", None], seed=6)
        for (prompt, adapter), expected in zip(batch, _expected(lora_models, batch)):
            r = post(base + "/v1/completions", {
                "model": adapter or lora_models["base"], "prompt": prompt, "max_tokens": NEW_TOKENS,
                "temperature": 0, "ignore_eos": True, "return_token_ids": True})
            assert r["choices"][0]["token_ids"] == expected
