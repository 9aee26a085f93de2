"""Paged attention on `tpu`, through vLLM's block table.

The KV cache of a layer is one `tpu` tensor `[2, num_blocks * block_size,
num_kv_heads, head_size]` (keys, then values; block b holds slots
b * block_size ...). It is written by slot, never through a view: writing a
view of it would be a program over the whole cache; it is read through a view
(keys or values, by block) only inside the step's fused program, where XLA
gathers from the cache's buffer itself. A step:
- writes the new keys and values into their slots with one `index_put_` (a
  scatter); the cache is uniquely owned, so torch_tpu donates its buffer and
  XLA updates it in place: the write costs the new tokens, not the cache
  (`index_copy_` lowers to a pass over the whole cache: 140 ms a step for 64 MiB
  where `index_put_` takes 0.2 ms);
- lays the step's queries out in rows of `chunk` tokens, each row the next
  tokens of one sequence, and gathers each row's keys and values through its
  sequence's block table, a whole block at a time (`index_select` of blocks);
  attends with a causal (and, for sliding-window layers, windowed) mask built
  from positions, grouped-query heads sharing their KV head, and Gemma-2's
  logit soft-capping.
The row count and chunk are functions of the padded token count alone
(buckets.query_layout): a decode step is one token a row, a prefill chunk of
T tokens rows of about T / max_num_seqs tokens. So the shapes depend on two
padded sizes, the token count and the key length in blocks, not on how the
tokens split into sequences: the programs are few, and a warm-up compiles them
all (worker.py). Prefill, decode and mixed batches are the same computation.
Every op is one torch_tpu lowers to StableHLO.

The largest intermediates, per layer: the gathered keys and values, two
[R, L, kv_heads * head_size] with R <= 2 * max_num_seqs rows and L the key
bucket (at most max_model_len), and the float32 scores [R, heads, C, L] with
R * C about 3 * T query slots at most. In a decode step (a token a row) with
at most BLOCK_DIAGONAL_MAX_KV_HEADS KV heads the queries are laid out block
diagonally, [R, heads, kv_heads * head_size] (kv_heads times the query);
otherwise the gathered keys and values are transposed into copies.

Block 0 is vLLM's null block (never handed to a request): padded tokens write
there and padded block-table entries read from there, under the mask.
"""
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
from vllm.forward_context import get_forward_context
from vllm.v1.attention.backend import (AttentionBackend, AttentionImpl, AttentionMetadataBuilder,
                                       AttentionType, CommonAttentionMetadata)

from ...kernels import platform as platform_kernels
from . import kv_cache_fp8
from .buckets import key_bucket, query_layout

DEVICE = "tpu"
# Up to this many KV heads and query tokens a row, attention's matmuls take the
# query heads block diagonally (TpuPagedAttentionImpl.forward). Past one token
# a row the doubled multiply-adds cost more than the copies they save: a
# 4096-token step of the benchmark's Llama (2 KV heads) took 83 ms block
# diagonally and 75 ms batched over KV heads, a 1024-token step 25 and 21 ms.
BLOCK_DIAGONAL_MAX_KV_HEADS = 2
BLOCK_DIAGONAL_MAX_CHUNK = 1
# Where the plugin runs the platform kernel, it replaces the composite in every
# step: it reads only the keys each query attends to, where the composite's
# matmuls cover every row's padded chunk and keys. One layer of the
# benchmark's Llama (benchmarks/platform_kernels.py): a decode step of 32
# rows, keys 40..160, 0.14-0.19 ms in the kernel and 1.4-1.5 ms composite; a
# prefill of 32 prompts of 8..128 tokens 2.9-3.3 ms and 14-15 ms; 8 x 128
# tokens 1.3-2.0 ms and 4.6-5.4 ms; 2 x 1024 tokens 17-19 ms and 129 ms.


class TpuPagedAttentionBackend(AttentionBackend):
    # vLLM pads the slot mapping to the padded token count only when the cache
    # update is separate; the padded count keeps the write's shape bucketed.
    forward_includes_kv_cache_update: bool = False
    supported_dtypes: ClassVar[list[torch.dtype]] = [torch.float32, torch.bfloat16, torch.float16]
    supported_kv_cache_dtypes: ClassVar[list] = ["auto", *kv_cache_fp8.FORMATS]

    @staticmethod
    def get_name() -> str:
        return "CUSTOM"

    @staticmethod
    def get_impl_cls():
        return TpuPagedAttentionImpl

    @staticmethod
    def get_builder_cls():
        return TpuPagedAttentionMetadataBuilder

    @classmethod
    def get_supported_head_sizes(cls) -> list[int]:
        return []  # any head size: the computation is plain matmuls

    @classmethod
    def supports_sliding_window(cls) -> bool:
        return True

    @classmethod
    def supports_attn_type(cls, attn_type: str) -> bool:
        return attn_type == AttentionType.DECODER

    @staticmethod
    def kv_cache_shape(num_blocks: int, block_size: int, num_kv_heads: int, head_size: int):
        return (2, num_blocks * block_size, num_kv_heads, head_size)

    @staticmethod
    def kv_cache_torch_dtype(spec_dtype: torch.dtype, kv_cache_dtype: str) -> torch.dtype:
        """The dtype of a cache tensor vLLM's spec sizes as `spec_dtype`
        (an fp8 cache: its bytes, kv_cache_fp8.py)."""
        return kv_cache_fp8.storage_dtype(spec_dtype, kv_cache_dtype)

    @staticmethod
    def write_slots(kv_cache: torch.Tensor, slots: torch.Tensor, kv: torch.Tensor) -> None:
        """kv_cache[:, slots] = kv ([2, len(slots), heads, head size]), in place."""
        which = torch.arange(2, device=kv_cache.device)[:, None]
        kv_cache.index_put_((which, slots[None, :]), kv.to(kv_cache.dtype))


@dataclass
class TpuPagedAttentionMetadata:
    num_actual_tokens: int
    slots: torch.Tensor          # [T] cache slot of each (padded) token
    key_blocks: torch.Tensor     # [R * L] cache block of each row's key blocks
    query_index: torch.Tensor    # [R * C] token feeding each query slot of a row
    query_pos: torch.Tensor      # [R, C] position of each query slot, -1 for padding
    output_index: torch.Tensor   # [T] query slot holding each token's output
    key_pos: torch.Tensor        # [L * block_size] position of each gathered key


# The metadata's tensors, in the order the step's program takes them.
METADATA_TENSORS = ("slots", "key_blocks", "query_index", "query_pos", "output_index", "key_pos")


def _on_device(arrays: dict, num_actual_tokens: int) -> TpuPagedAttentionMetadata:
    dev = {k: torch.from_numpy(arrays[k]).to(DEVICE) for k in METADATA_TENSORS}
    return TpuPagedAttentionMetadata(num_actual_tokens=num_actual_tokens, **dev)


def step_arrays(t_pad, qsl, seq_lens, block_table, slot_mapping, rows, chunk, blocks, block_size):
    """The host arrays of a step: `qsl` the query start of each of the n
    sequences (n + 1 entries), `block_table` [n, >= blocks]. Queries are laid
    out in rows of `chunk` tokens of one sequence (buckets.query_layout)."""
    n = len(seq_lens)
    qlens = qsl[1:] - qsl[:-1]
    t_act = int(qsl[-1])
    chunks = -(-qlens // chunk)                            # rows of each sequence
    seq_of_row = np.repeat(np.arange(n), chunks)
    first_row = np.concatenate(([0], np.cumsum(chunks)))[:n]
    if len(seq_of_row) > rows:
        raise AssertionError(f"vLLM on tpu: {len(seq_of_row)} query rows over the bucket's {rows}")

    seq_of_token = np.repeat(np.arange(n), qlens)
    within = np.arange(t_act) - qsl[seq_of_token]           # index among its sequence's queries
    row = first_row[seq_of_token] + within // chunk
    col = within % chunk
    query_index = np.zeros((rows, chunk), np.int64)
    query_index[row, col] = np.arange(t_act)
    query_pos = np.full((rows, chunk), -1, np.int64)
    query_pos[row, col] = (seq_lens - qlens)[seq_of_token] + within
    output_index = np.zeros(t_pad, np.int64)
    output_index[:t_act] = row * chunk + col

    row_blocks = np.zeros((rows, blocks), np.int64)        # padded rows read the null block
    row_blocks[: len(seq_of_row)] = block_table[seq_of_row, :blocks]
    slots = np.zeros(t_pad, np.int64)
    slots[:t_act] = slot_mapping[:t_act]
    return {"slots": slots, "key_blocks": row_blocks.reshape(-1), "query_index": query_index.reshape(-1),
            "query_pos": query_pos, "output_index": output_index,
            "key_pos": np.arange(blocks * block_size, dtype=np.int64)}


def warmup_metadata(t_pad, rows, chunk, blocks, block_size) -> TpuPagedAttentionMetadata:
    """Metadata of a step's shapes with every query masked and every slot in
    the null block: what the warm-up runs to compile a bucket's program."""
    arrays = step_arrays(t_pad, np.zeros(2, np.int64), np.ones(1, np.int64),
                         np.zeros((1, blocks), np.int64), np.zeros(0, np.int64),
                         rows, chunk, blocks, block_size)
    return _on_device(arrays, 0)


class TpuPagedAttentionMetadataBuilder(AttentionMetadataBuilder[TpuPagedAttentionMetadata]):
    def __init__(self, kv_cache_spec, layer_names, vllm_config, device):
        super().__init__(kv_cache_spec, layer_names, vllm_config, device)
        self.block_size = kv_cache_spec.block_size
        sched = vllm_config.scheduler_config
        self.max_seqs = sched.max_num_seqs
        self.max_blocks = -(-vllm_config.model_config.max_model_len // self.block_size)

    def build(self, common_prefix_len: int, common_attn_metadata: CommonAttentionMetadata,
              fast_build: bool = False) -> TpuPagedAttentionMetadata:
        m = common_attn_metadata
        n, t_act = m.num_reqs, m.num_actual_tokens
        qsl = m.query_start_loc_cpu[: n + 1].numpy().astype(np.int64)
        seq_lens = m.seq_lens[:n].cpu().numpy().astype(np.int64)
        slot_mapping = m.slot_mapping.cpu().numpy().astype(np.int64)
        # The runner pads the token count to its bucket (worker.py); the slot
        # mapping comes padded to it.
        t_pad = max(len(slot_mapping), t_act)
        rows, chunk = query_layout(t_pad, self.max_seqs)
        blocks = key_bucket(-(-int(seq_lens.max()) // self.block_size), t_pad, self.max_seqs,
                            self.max_blocks)
        block_table = np.zeros((n, blocks), np.int64)
        width = min(blocks, m.block_table_tensor.shape[1])
        block_table[:, :width] = m.block_table_tensor[:n, :width].cpu().numpy()
        arrays = step_arrays(t_pad, qsl, seq_lens, block_table, slot_mapping, rows, chunk,
                             blocks, self.block_size)
        return _on_device(arrays, t_act)


class TpuPagedAttentionImpl(AttentionImpl):
    def __init__(self, num_heads, head_size, scale, num_kv_heads=None, alibi_slopes=None,
                 sliding_window=None, kv_cache_dtype="auto", logits_soft_cap=None,
                 attn_type=AttentionType.DECODER, kv_sharing_target_layer_name=None, sinks=None):
        missing = [what for what, used in (
            ("ALiBi slopes", alibi_slopes is not None),
            ("attention sinks", sinks is not None),
            (f"attention type {attn_type!r} (decoder self-attention only)",
             attn_type != AttentionType.DECODER),
            (f"KV cache dtype {kv_cache_dtype!r}", kv_cache_dtype not in ("auto", *kv_cache_fp8.FORMATS)),
        ) if used]
        if missing:
            raise NotImplementedError(
                f"vLLM on tpu: the paged attention backend does not cover {', '.join(missing)}")
        self.num_heads = num_heads
        self.head_size = head_size
        self.scale = float(scale)
        self.num_kv_heads = num_kv_heads or num_heads
        self.sliding_window = sliding_window
        self.logits_soft_cap = logits_soft_cap or None
        self.kv_sharing_target_layer_name = kv_sharing_target_layer_name
        self.attn_type = attn_type
        self.fp8 = kv_cache_fp8.fp8_format(kv_cache_dtype)

    def do_kv_cache_update(self, layer, key, value, kv_cache, slot_mapping) -> None:
        meta = get_forward_context().attn_metadata[layer.layer_name]
        t = meta.slots.shape[0]
        key, value = key[:t], value[:t]
        if self.fp8 is not None:
            key = kv_cache_fp8.quantize(key, self.fp8, layer._k_scale_float)
            value = kv_cache_fp8.quantize(value, self.fp8, layer._v_scale_float)
        TpuPagedAttentionBackend.write_slots(kv_cache, meta.slots, torch.stack((key, value)))

    def forward(self, layer, query, key, value, kv_cache, attn_metadata, output,
                output_scale=None, output_block_scale=None):
        if output_scale is not None or output_block_scale is not None:
            raise NotImplementedError("vLLM on tpu: fused output quantization is not supported")
        if attn_metadata is None:     # profiling run without a cache
            return output
        meta = attn_metadata
        r, c = meta.query_pos.shape              # query rows, tokens a row
        h, hkv, d = self.num_heads, self.num_kv_heads, self.head_size
        g = h // hkv
        length = meta.key_pos.shape[0]

        block = length * r // meta.key_blocks.shape[0]
        t = meta.output_index.shape[0]
        # The platform kernel (csrc/kernels/paged_attention.cpp) reads the
        # cache's blocks in place, where the plugin runs it; the composite
        # below is the fallback and its reference.
        out = None if self.fp8 is not None else platform_kernels.paged_attention(
            query[:t].view(t, h, d), kv_cache, meta.key_blocks, meta.query_index, meta.query_pos,
            meta.output_index, scale=self.scale, soft_cap=self.logits_soft_cap, window=self.sliding_window,
            block_size=block)
        if out is not None:
            output[:t].copy_(out.to(output.dtype).view(output[:t].shape))
            return output

        # Keys and values are gathered apart, a block of slots at a time,
        # each [R, L, Hkv * D] as the gather lays them out.
        num_blocks = kv_cache.shape[1] // block
        blocks = kv_cache.view(2 * num_blocks, block * hkv * d)
        keys = blocks.index_select(0, meta.key_blocks).view(r, length, hkv * d)
        values = blocks.index_select(0, meta.key_blocks + num_blocks).view(r, length, hkv * d)
        if self.fp8 is None:
            keys, values = keys.float(), values.float()
        else:
            keys = kv_cache_fp8.dequantize(keys, self.fp8, layer._k_scale_float)
            values = kv_cache_fp8.dequantize(values, self.fp8, layer._v_scale_float)

        qs = query[:t].reshape(t, h, d).index_select(0, meta.query_index)  # [R*C, H, D]
        qs = qs.view(r, c, hkv, g, d).permute(0, 2, 3, 1, 4).float()        # [R, Hkv, G, C, D]
        block_diagonal = hkv <= BLOCK_DIAGONAL_MAX_KV_HEADS and c <= BLOCK_DIAGONAL_MAX_CHUNK
        if block_diagonal:
            # Batched over rows alone: a row's query heads laid out block
            # diagonally against the KV heads ([R, Hkv*G*C, Hkv*D], zero off
            # the block of each head's own KV head) take the gathered keys and
            # values as they are. Batched over (row, KV head), they would be
            # transposed into a copy first; the zeros cost Hkv times the
            # multiply-adds instead.
            eye = torch.eye(hkv, dtype=torch.float32, device=query.device).view(1, hkv, 1, hkv, 1)
            qs = (qs.reshape(r, hkv, g * c, 1, d) * eye).reshape(r, hkv * g * c, hkv * d)
            scores = torch.matmul(qs, keys.transpose(1, 2)).view(r, hkv, g * c, length)
        else:
            keys = keys.view(r, length, hkv, d).permute(0, 2, 1, 3)          # [R, Hkv, L, D]
            values = values.view(r, length, hkv, d).permute(0, 2, 1, 3)
            scores = torch.matmul(qs.reshape(r, hkv, g * c, d), keys.transpose(-1, -2))
        scores = scores * self.scale                                       # [R, Hkv, G*C, L]
        if self.logits_soft_cap:
            scores = torch.tanh(scores / self.logits_soft_cap) * self.logits_soft_cap

        qpos = meta.query_pos[:, :, None]
        kpos = meta.key_pos[None, None, :]
        allowed = kpos <= qpos                                            # [R, C, L]
        if self.sliding_window is not None:
            allowed = allowed & (kpos > qpos - self.sliding_window)
        allowed = allowed[:, None, None, :, :].expand(r, hkv, g, c, length).reshape(r, hkv, g * c, length)
        scores = scores.masked_fill(~allowed, torch.finfo(torch.float32).min)
        probs = torch.softmax(scores, dim=-1)
        if block_diagonal:
            out = torch.matmul(probs.view(r, hkv * g * c, length), values)    # [R, Hkv*G*C, Hkv*D]
            out = (out.view(r, hkv, g * c, hkv, d) * eye).sum(3)               # [R, Hkv, G*C, D]
        else:
            out = torch.matmul(probs, values)                                  # [R, Hkv, G*C, D]
        out = out.view(r, hkv, g, c, d).permute(0, 3, 1, 2, 4).reshape(r * c, h, d)
        out = out.index_select(0, meta.output_index).to(output.dtype)       # [T, H, D]
        output[:t].copy_(out.view(output[:t].shape))
        return output
