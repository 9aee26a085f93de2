"""A paged-attention step over random block tables, for tests_vllm/test_attention.py
and benchmarks/platform_kernels.py."""
import numpy as np

from torch_tpu.integrations.vllm import attention as A
from torch_tpu.integrations.vllm.buckets import key_bucket, query_layout, token_bucket


def random_step(seq_lens, qlens, max_seqs, num_blocks, max_tokens, block, rng):
    """(the step's host arrays, its real token count, each sequence's block
    table): sequences of `seq_lens` tokens, the last `qlens` of each queried,
    their blocks drawn from 1..num_blocks-1 (block 0 is vLLM's null block)."""
    seq_lens, qlens = np.asarray(seq_lens, np.int64), np.asarray(qlens, np.int64)
    qsl = np.concatenate(([0], np.cumsum(qlens)))
    t_act = int(qsl[-1])
    t_pad = token_bucket(t_act, max_tokens)
    rows, chunk = query_layout(t_pad, max_seqs)
    blocks = key_bucket(-(-int(seq_lens.max()) // block), t_pad, max_seqs, num_blocks)
    tables = rng.permutation(np.arange(1, num_blocks))[: len(seq_lens) * blocks].reshape(len(seq_lens), blocks)
    seq = np.repeat(np.arange(len(seq_lens)), qlens)
    pos = (seq_lens - qlens)[seq] + np.arange(t_act) - qsl[seq]
    slot_mapping = tables[seq, pos // block] * block + pos % block
    arrays = A.step_arrays(t_pad, qsl, seq_lens, tables, slot_mapping, rows, chunk, blocks, block)
    return arrays, t_act, tables
