"""Random sampling on `tpu` (integrations/vllm/sampling.py): temperature, top-k,
top-p, min-p and seeds inside the step's program.

The references are independent of the program: the noise is SplitMix64,
checked against its definition in Python integers; the draws' frequencies
against the distribution computed here in float64 from HF's logits on the
CPU; a seeded request's tokens against the same draw recomputed on the CPU
from HF's logits (teacher-forced on the tokens it got), which depends on
nothing but its seed, its parameters and the position of each token, so it
also shows the batch around it changes nothing."""
import numpy as np
import pytest
import torch
from scipy import stats

import tiny_models
from conftest import VOCAB, run_llm
from torch_tpu.integrations.vllm import sampling

U64 = 1 << 64


def splitmix64(state: int, i: int) -> int:
    """The i-th output (0-based) of SplitMix64 from `state`, in Python integers."""
    z = (state + (i + 1) * 0x9E3779B97F4A7C15) % U64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % U64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % U64
    return z ^ (z >> 31)


def test_noise_is_splitmix64():
    keys = [0, 1, -5, (1 << 62) + 3, -1, 123456789]
    got = sampling.uniform_noise(torch.tensor(keys).to("tpu"), VOCAB).cpu().double()
    for row, key in enumerate(keys):
        for i in (0, 1, 200, VOCAB - 1):
            expected = ((splitmix64(key % U64, i) >> 41) + 0.5) / 2 ** 23
            assert got[row, i].item() == expected


def hf_logits(folder, prompt, tokens=()):
    """HF's float64 logits (CPU) of the token after `prompt` and after each of
    `tokens` but the last."""
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float64).eval()
    ids = list(prompt) + list(tokens)
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0]
    return logits[len(prompt) - 1:len(ids) - 1 if tokens else len(prompt)]


def reference_probs(logits, temperature, top_k=0, top_p=1.0, min_p=0.0):
    """The distribution a row draws from, by the definitions (float64, NumPy):
    softmax(logits / T); tokens under min_p x the top probability dropped; of
    the rest, those ranked past top_k dropped; then the least likely dropped
    while the dropped mass stays at most 1 - top_p (the likeliest kept)."""
    x = np.asarray(logits, dtype=np.float64) / temperature
    p = np.exp(x - x.max())
    p /= p.sum()
    keep = p >= min_p * p.max()
    if 0 < top_k < len(p):
        keep &= x >= np.sort(np.where(keep, x, -np.inf))[-top_k]
    q = np.where(keep, p, 0.0) / np.where(keep, p, 0.0).sum()
    dropped, mass = np.zeros(len(p), dtype=bool), 0.0
    for i in np.argsort(q, kind="stable")[:-1]:
        if q[i] > 0 and mass + q[i] > 1 - top_p:
            break
        mass += q[i]
        dropped[i] = True
    q = np.where(dropped, 0.0, q)
    return q / q.sum()


def draw(logits, n, temperature, top_k=0, top_p=1.0, min_p=0.0, seeded=True):
    """n tokens drawn on tpu from one row of logits, row i seeded with seed i
    (or unseeded)."""
    floats = torch.tensor([[temperature, top_p, min_p]] * n, dtype=torch.float32)
    ints = torch.tensor([[top_k if 0 < top_k < VOCAB else VOCAB, int(seeded), i, 7]
                         for i in range(n)])
    x = torch.as_tensor(logits, dtype=torch.float32).expand(n, -1)
    return sampling.token_ids(x.to("tpu"), floats.to("tpu"), ints.to("tpu")).cpu()


# A correct sampler fails a chi-square test at this level once in a million
# seed choices (the seeds are fixed, so a run is deterministic).
ALPHA = 1e-6


def chi_square(counts, probs):
    """The chi-square statistic and critical value of `counts` against `probs`,
    the bins of expected count under 5 pooled into one."""
    expected = probs * counts.sum()
    small = expected < 5
    obs = np.append(counts[~small], counts[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    statistic = ((obs - exp) ** 2 / exp).sum()
    return statistic, stats.chi2.isf(ALPHA, len(exp) - 1)


# (temperature, top_k, top_p, min_p), each with a plausible mistake whose
# distribution the test must tell apart (the power check).
CASES = {
    "temperature": ((0.4, 0, 1.0, 0.0), (1.0, 0, 1.0, 0.0)),
    "top_k": ((0.5, 12, 1.0, 0.0), (0.5, 13, 1.0, 0.0)),
    "top_p": ((0.5, 0, 0.7, 0.0), (0.5, 0, 0.8, 0.0)),
    "min_p": ((0.5, 0, 1.0, 0.3), (0.5, 0, 1.0, 0.2)),
    "all": ((0.7, 40, 0.9, 0.05), (1.0, 40, 0.9, 0.05)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_draws_follow_hf_distribution(models, case):
    folder = models("llama")
    prompt = tiny_models.prompts(1, 6, 6, VOCAB, seed=21)[0]
    logits = hf_logits(folder, prompt)[-1].numpy()
    params, mistaken = CASES[case]
    n = 20000
    counts = np.bincount(draw(logits, n, *params).numpy(), minlength=VOCAB)
    probs = reference_probs(logits, *params)
    assert counts[probs == 0].sum() == 0, "drew a token the parameters exclude"
    statistic, critical = chi_square(counts, probs)
    assert statistic < critical, (statistic, critical)
    # The same counts reject the mistaken distribution: the test can fail.
    wrong = reference_probs(logits, *mistaken)
    outside = counts[wrong == 0].sum() > 0
    assert outside or chi_square(counts, wrong)[0] > critical


def test_top_k_1_and_tiny_top_p_are_greedy(models):
    folder = models("llama")
    logits = hf_logits(folder, tiny_models.prompts(1, 6, 6, VOCAB, seed=22)[0])[-1]
    top = int(logits.argmax())
    assert (draw(logits, 500, 1.5, top_k=1, seeded=False) == top).all()
    assert (draw(logits, 500, 1.5, top_p=1e-6, seeded=False) == top).all()


def test_unseeded_rows_differ():
    # Flat logits: two rows of 16 draws agree by chance with probability 384**-16.
    a, b = (draw(torch.zeros(VOCAB), 16, 1.0, seeded=False) for _ in range(2))
    assert not torch.equal(a, b)
    assert len(set(a.tolist())) > 1


def expected_seeded(folder, prompt, tokens, sample):
    """The tokens a seeded request draws, recomputed on the CPU from HF's
    logits teacher-forced on `tokens`: the program's draw (sampling.token_ids
    on the CPU) keyed by the request's seed and each token's position."""
    logits = hf_logits(folder, prompt, tokens).float()
    n = len(tokens)
    top_k = sample.get("top_k", 0)
    floats = torch.tensor([[sample["temperature"], sample.get("top_p", 1.0),
                            sample.get("min_p", 0.0)]] * n)
    ints = torch.tensor([[top_k if 0 < top_k < VOCAB else VOCAB, 1, sample["seed"],
                          len(prompt) + i] for i in range(n)])
    return sampling.token_ids(logits, floats, ints).tolist()


SEEDED = {"seed": 11, "temperature": 0.9, "top_k": 40, "top_p": 0.9, "min_p": 0.05}


def _mixed_batch(folder, prompts, order):
    """One engine's tokens for a batch of requests, in `order`, each with its
    own parameters (the rows of one program)."""
    kinds = {
        "seeded": SEEDED,
        "seeded_again": SEEDED,
        "other_seed": {"seed": 5, "temperature": 1.2},
        "greedy": {"temperature": 0},
        "top_k_1": {"temperature": 1.0, "top_k": 1},
        "tiny_top_p": {"temperature": 1.0, "top_p": 1e-6},
        "unseeded": {"temperature": 1.0},
        "unseeded_again": {"temperature": 1.0},
    }
    got = run_llm(folder, [prompts[k] for k in order], {"max_tokens": 8, "ignore_eos": True},
                  per_prompt=[kinds[k] for k in order])
    assert got["cache_misses"] == 0   # the warm-up's programs serve every mix
    assert got["sampled_steps"]["host"] == 0 and got["sampled_steps"]["device"] > 0
    return dict(zip(order, got["tokens"])), kinds


def _prompts():
    a, b, c, d, e = tiny_models.prompts(5, 3, 30, VOCAB, seed=23)
    return {"seeded": a, "seeded_again": a, "other_seed": e, "greedy": b, "top_k_1": c,
            "tiny_top_p": d, "unseeded": a, "unseeded_again": a}


def test_mixed_batch_on_device(models):
    folder = models("llama")
    prompts = _prompts()
    got, kinds = _mixed_batch(folder, prompts, sorted(prompts))
    for k in ("seeded", "seeded_again", "other_seed"):
        assert got[k] == expected_seeded(folder, prompts[k], got[k], kinds[k]), k
    greedy = tiny_models.hf_greedy(folder, [prompts[k] for k in ("greedy", "top_k_1", "tiny_top_p")], 8)
    assert [got["greedy"], got["top_k_1"], got["tiny_top_p"]] == greedy
    assert got["unseeded"] != got["unseeded_again"]


@pytest.mark.slow
def test_seeded_tokens_whatever_the_batch(models):
    # The seeded request alone, then among others in another order: its
    # tokens are the same, and the CPU's recomputation.
    folder = models("llama")
    prompts = _prompts()
    alone, kinds = _mixed_batch(folder, prompts, ["seeded"])
    mixed, _ = _mixed_batch(folder, prompts, ["unseeded", "greedy", "other_seed", "seeded",
                                              "top_k_1"])
    assert alone["seeded"] == mixed["seeded"]
    assert alone["seeded"] == expected_seeded(folder, prompts["seeded"], alone["seeded"], SEEDED)


@pytest.mark.slow
def test_penalties_fall_back_to_the_host(models):
    # A request with a penalty sends its steps to vLLM's sampler on the host;
    # the seeded request beside it still gets its seed's tokens, vLLM's draw.
    folder = models("llama")
    prompts = tiny_models.prompts(2, 3, 30, VOCAB, seed=24)
    per_prompt = [SEEDED, {"temperature": 1.0, "presence_penalty": 0.5}]
    runs = [run_llm(folder, prompts, {"max_tokens": 8, "ignore_eos": True}, per_prompt=per_prompt)
            for _ in range(2)]
    for got in runs:
        assert got["sampled_steps"]["device"] == 0 and got["sampled_steps"]["host"] > 0
    assert runs[0]["tokens"][0] == runs[1]["tokens"][0]


@pytest.mark.slow
def test_engine_draws_follow_hf_distribution(models):
    # The first token of 600 seeded requests of one prompt, served in steps
    # of up to 64 rows: their frequencies against HF's distribution.
    folder = models("llama")
    prompt = tiny_models.prompts(1, 6, 6, VOCAB, seed=21)[0]
    params = {"temperature": 0.7, "top_k": 40, "top_p": 0.9, "min_p": 0.05}
    n = 600
    got = run_llm(folder, [prompt] * n, {"max_tokens": 1, "ignore_eos": True, **params},
                  per_prompt=[{"seed": i} for i in range(n)], llm={"max_num_seqs": 64})
    assert got["sampled_steps"]["host"] == 0
    counts = np.bincount([t[0] for t in got["tokens"]], minlength=VOCAB)
    logits = hf_logits(folder, prompt)[-1].numpy()
    probs = reference_probs(logits, params["temperature"], params["top_k"], params["top_p"],
                            params["min_p"])
    assert counts[probs == 0].sum() == 0
    statistic, critical = chi_square(counts, probs)
    assert statistic < critical, (statistic, critical)
