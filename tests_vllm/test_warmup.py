"""After the warm-up at start-up, serving compiles no new program: requests of
random lengths, arriving while others decode, run only programs the warm-up
ran (no program cache miss: nothing compiled, nothing loaded from the
persistent cache), and give HF's greedy tokens. The set the warm-up enumerates
is checked against the layouts of random batches, without an engine."""
import re

import numpy as np
import pytest

import tiny_models
from conftest import VOCAB, greedy, run_llm
from torch_tpu.integrations.vllm.attention import step_arrays
from torch_tpu.integrations.vllm.buckets import key_bucket, query_layout, step_buckets, token_bucket


def _random_batch(rng, max_tokens, max_seqs, max_len):
    n = int(rng.integers(1, max_seqs + 1))
    qlens = rng.integers(1, max(2, max_tokens // n), n)
    qlens[0] = rng.integers(1, max_tokens - qlens[1:].sum() + 1)   # sometimes one long prefill
    seq_lens = np.minimum(qlens + rng.integers(0, max_len, n), max_len)
    qlens = np.minimum(qlens, seq_lens)
    return np.concatenate(([0], np.cumsum(qlens))), seq_lens


def test_decode_keys_pad_to_half_octaves():
    # A decode step (at most max_seqs tokens) pads its keys to powers of two
    # and their 1.5x midpoints; a longer step to powers of two.
    max_seqs, max_blocks = 32, 64
    decode = {n: key_bucket(n, 32, max_seqs, max_blocks) for n in (1, 2, 3, 5, 7, 9, 13, 17, 25, 33, 49, 64)}
    assert decode == {1: 1, 2: 2, 3: 3, 5: 6, 7: 8, 9: 12, 13: 16, 17: 24, 25: 32, 33: 48, 49: 64, 64: 64}
    prefill = {n: key_bucket(n, 64, max_seqs, max_blocks) for n in (3, 9, 17, 33)}
    assert prefill == {3: 4, 9: 16, 17: 32, 33: 64}
    assert key_bucket(40, 16, max_seqs, 40) == 40          # the cap is a size of its own
    with pytest.raises(ValueError, match="over its limit"):
        key_bucket(65, 32, max_seqs, max_blocks)


def test_large_steps_pad_to_quarter_octaves():
    # Up to 512 tokens a step pads to a power of two; past it, also to 1.25,
    # 1.5 and 1.75 times one, so a step of 2176 tokens (32 prompts) runs 2560
    # wide, not 3072 (with half octaves) or 4096.
    sizes = {n: token_bucket(n, 8192) for n in (1, 17, 33, 300, 512, 513, 600, 1025, 1537, 2176, 2561,
                                                3073, 6145, 7169, 8192)}
    assert sizes == {1: 16, 17: 32, 33: 64, 300: 512, 512: 512, 513: 640, 600: 640, 1025: 1280,
                     1537: 1792, 2176: 2560, 2561: 3072, 3073: 3584, 6145: 7168, 7169: 8192, 8192: 8192}
    assert token_bucket(2900, 3000) == 3000              # the cap is a size of its own
    assert token_bucket(1500, 3000) == 1536
    assert token_bucket(2600, 3000) == 3000              # 3072 is past the cap
    with pytest.raises(ValueError, match="over its limit"):
        token_bucket(8193, 8192)


@pytest.mark.parametrize("max_tokens,max_seqs,max_len",
                         [(128, 8, 256), (2048, 256, 4096), (96, 32, 200), (8192, 32, 1024)])
def test_every_batch_lands_in_the_warmup_set(max_tokens, max_seqs, max_len):
    block = 16
    max_blocks = -(-max_len // block)
    warm = set(step_buckets(max_tokens, max_seqs, max_blocks, block))
    rng = np.random.default_rng(0)
    for _ in range(300):
        qsl, seq_lens = _random_batch(rng, max_tokens, max_seqs, max_len)
        t_act = int(qsl[-1])
        t_pad = token_bucket(t_act, max_tokens)
        blocks = key_bucket(-(-int(seq_lens.max()) // block), t_pad, max_seqs, max_blocks)
        assert (t_pad, blocks) in warm
        rows, chunk = query_layout(t_pad, max_seqs)
        table = rng.integers(1, 1000, (len(seq_lens), blocks))
        a = step_arrays(t_pad, qsl, seq_lens, table, np.arange(t_act), rows, chunk, blocks, block)
        # Every token has one query slot, holding its own position; each row's
        # keys are its own sequence's slots.
        slot = a["output_index"][:t_act]
        assert len(set(slot.tolist())) == t_act
        assert (a["query_index"][slot] == np.arange(t_act)).all()
        seq = np.repeat(np.arange(len(seq_lens)), np.diff(qsl))
        pos = (seq_lens - np.diff(qsl))[seq] + np.arange(t_act) - qsl[seq]
        assert (a["query_pos"].reshape(-1)[slot] == pos).all()
        keys = a["key_blocks"].reshape(rows, blocks)[slot // chunk]
        assert (keys == table[seq]).all()


def test_no_program_compiled_after_warmup(models):
    folder = models("llama")
    prompts = tiny_models.prompts(48, 1, 200, VOCAB, seed=5)
    expected = tiny_models.hf_greedy(folder, prompts, 6)
    got = run_llm(folder, prompts, greedy(6), waves=3,
                  llm={"max_num_seqs": 8, "max_num_batched_tokens": 128})
    total = re.findall(r"torch_tpu: warming up (\d+)/(\d+) programs", got["log"])
    assert total and total[-1][0] == total[-1][1], "no warm-up progress line"
    assert got["cache_misses"] == 0
    bad = [i for i, (a, b) in enumerate(zip(got["tokens"], expected)) if a != b]
    assert not bad, f"prompts {bad} differ"
    # One worker, in the engine's process: the plugin's threads yield to it (worker.py).
    assert got["device_thread_nice"] == [5]


@pytest.mark.slow
def test_200_requests_compile_nothing_after_warmup(models):
    folder = models("llama")
    prompts = tiny_models.prompts(200, 1, 240, VOCAB, seed=6)
    got = run_llm(folder, prompts, greedy(12), waves=5, timeout=1200)
    assert got["cache_misses"] == 0
    assert len(got["tokens"]) == 200 and all(len(t) == 12 for t in got["tokens"])
