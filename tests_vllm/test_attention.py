"""The paged attention of one step, against a per-token reference on the CPU
(float64): a batch of prefill, chunked-prefill and decode sequences, keys read
through random block tables, grouped-query heads, a sliding window and logit
soft-capping; the platform kernel and both ways the composite's matmuls take
the heads (block diagonal, batched over KV heads) give the reference, whichever
rows the layout makes."""
import numpy as np
import pytest
import torch
import torch_tpu

from torch_tpu.integrations.vllm import attention as A
from torch_tpu.kernels import platform as platform_kernels

from attention_steps import random_step

BLOCK = 16


def _reference(q, cache, tables, seq_lens, qlens, scale, window, cap):
    """q [T, H, D]; cache [2, slots, Hkv, D]; per token, its own sequence's keys."""
    _, h, d = q.shape
    g = h // cache.shape[2]
    out, t = [], 0
    for s, (n, ql) in enumerate(zip(seq_lens, qlens)):
        slots = (tables[s][:, None] * BLOCK + np.arange(BLOCK)).reshape(-1)[:n]
        keys, values = cache[0, slots], cache[1, slots]                  # [n, Hkv, D]
        for i in range(ql):
            pos = n - ql + i
            lo = 0 if window is None else max(0, pos - window + 1)
            k, v = keys[lo:pos + 1].repeat_interleave(g, 1), values[lo:pos + 1].repeat_interleave(g, 1)
            sc = torch.einsum("hd,khd->hk", q[t], k) * scale
            if cap:
                sc = torch.tanh(sc / cap) * cap
            out.append(torch.einsum("hk,khd->hd", torch.softmax(sc, -1), v))
            t += 1
    return torch.stack(out)


def _step_and_reference(arrays, t_act, tables, seq_lens, qlens, cache, heads, d, window, cap, seed):
    """The backend's attention of the step on tpu and the float64 reference, [t_act, H, D] each."""
    t_pad = len(arrays["output_index"])
    torch.manual_seed(seed)
    q = torch.randn(t_act, heads, d)
    scale = d ** -0.5
    expected = _reference(q.double(), cache.double(), tables, seq_lens, qlens, scale, window, cap)
    impl = A.TpuPagedAttentionImpl(heads, d, scale, num_kv_heads=cache.shape[2], sliding_window=window,
                                   logits_soft_cap=cap)
    query = torch.zeros(t_pad, heads * d)
    query[:t_act] = q.reshape(t_act, -1)
    with torch.inference_mode(), torch_tpu.eager_mode("defer_and_fuse"):
        meta = A._on_device(arrays, t_act)
        output = torch.zeros(t_pad, heads * d, device="tpu")
        impl.forward(None, query.to("tpu"), None, None, cache.to("tpu"), meta, output)
        got = output.cpu()[:t_act].view(t_act, heads, d)
    return got.double(), expected


# A mixed batch (chunked prefill, prefills, decodes: rows of 8 tokens) and a
# decode batch (a token a row).
BATCHES = {"mixed": ([20, 1, 33, 1, 1], 8), "decode": ([1, 1, 1, 1, 1], 16)}


@pytest.mark.parametrize("batch", sorted(BATCHES))
@pytest.mark.parametrize("block_diagonal", ["kernel", True, False])
@pytest.mark.parametrize("heads,kv_heads,window,cap", [(4, 2, None, None), (8, 4, 8, None), (4, 1, None, 30.0),
                                                       (4, 4, 24, None)])
def test_step_attention_matches_reference(monkeypatch, batch, block_diagonal, heads, kv_heads, window,
                                          cap):
    # "kernel": the platform kernel (csrc/kernels/paged_attention.cpp); else
    # the composite, with the heads laid out either way.
    if block_diagonal == "kernel":
        assert platform_kernels.target("paged_attention"), "the CPU plugin runs the paged attention kernel"
    else:
        monkeypatch.setattr(platform_kernels, "target", lambda name: None)
    monkeypatch.setattr(A, "BLOCK_DIAGONAL_MAX_KV_HEADS", 64 if block_diagonal else 0)
    monkeypatch.setattr(A, "BLOCK_DIAGONAL_MAX_CHUNK", 1 << 20)
    qlens, max_seqs = BATCHES[batch]
    d, num_blocks, max_tokens = 16, 64, 128
    seq_lens = np.array([70, 1, 33, 17, 50], np.int64)
    qlens = np.array(qlens, np.int64)
    arrays, t_act, tables = random_step(seq_lens, qlens, max_seqs, num_blocks, max_tokens, BLOCK,
                                        np.random.default_rng(heads * 10 + kv_heads))
    torch.manual_seed(0)
    cache = torch.randn(2, num_blocks * BLOCK, kv_heads, d)
    got, expected = _step_and_reference(arrays, t_act, tables, seq_lens, qlens, cache, heads, d, window, cap,
                                        seed=1)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cache_dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("sequences", [3, 96])
@pytest.mark.parametrize("heads,kv_heads,d,window,cap", [(4, 2, 64, None, None), (14, 2, 88, 40, 20.0)])
def test_kernel_decode_matches_reference(monkeypatch, cache_dtype, sequences, heads, kv_heads, d, window, cap):
    # The kernel's decode paths: 3 sequences run a KV head an item, 96 a
    # sequence an item (csrc/kernels/paged_attention.cpp: fewer than 4 a
    # thread, up to 23 threads); head size 88 and 7 query heads a KV head take
    # its 64-, 16- and 1-column loops and its 4-, 2- and 1-head blocks. A
    # bf16/f16 cache is converted in the kernel: the reference reads the same
    # rounded values.
    assert platform_kernels.target("paged_attention"), "the CPU plugin runs the paged attention kernel"
    ran = []
    kernel = platform_kernels.paged_attention
    monkeypatch.setattr(platform_kernels, "paged_attention", lambda *a, **k: ran.append(kernel(*a, **k)) or ran[-1])
    rng = np.random.default_rng(sequences + d)
    seq_lens = rng.integers(1, 120, sequences)
    qlens = np.ones(sequences, np.int64)
    num_blocks = sequences * 8 + 64
    arrays, t_act, tables = random_step(seq_lens, qlens, 128, num_blocks, 128, BLOCK, rng)
    assert arrays["query_pos"].shape[1] == 1, "a decode step: a token a row"
    torch.manual_seed(1)
    cache = torch.randn(2, num_blocks * BLOCK, kv_heads, d).to(cache_dtype)
    got, expected = _step_and_reference(arrays, t_act, tables, seq_lens, qlens, cache, heads, d, window, cap,
                                        seed=2)
    assert len(ran) == 1 and ran[0] is not None, "the kernel ran the step"
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
