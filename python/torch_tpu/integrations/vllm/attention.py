"""Paged attention on `tpu`, through vLLM's block table.

The KV cache of a layer is one `tpu` tensor `[2, num_blocks * block_size,
num_kv_heads, head_size]` (keys, then values; block b holds slots
b * block_size ...). It is indexed by slot, never viewed: reading or writing a
view of it would be a program over the whole cache. A step:
- writes the new keys and values into their slots with one `index_put_` (a
  scatter); the cache is uniquely owned, so torch_tpu donates its buffer and
  XLA updates it in place: the write costs the new tokens, not the cache
  (`index_copy_` lowers to a pass over the whole cache: 140 ms a step for 64 MiB
  where `index_put_` takes 0.2 ms);
- gathers each sequence's slots through the block table (`index_select`),
  lays the queries out per sequence, and attends with a causal (and, for
  sliding-window layers, windowed) mask built from positions, grouped-query
  heads sharing their KV head, and Gemma-2's logit soft-capping.
Prefill, decode and mixed batches are the same computation. Every op is one
torch_tpu lowers to StableHLO, and all shapes are bucketed (buckets.py), so the
programs are few and compiled once.

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

from .buckets import bucket

DEVICE = "tpu"


class TpuPagedAttentionBackend(AttentionBackend):
    # vLLM pads the slot mapping to the padded token count only when the cache
    # update is separate; the padded count keeps the write's shape bucketed.
    forward_includes_kv_cache_update: bool = False
    supported_dtypes: ClassVar[list[torch.dtype]] = [torch.float32, torch.bfloat16, torch.float16]
    supported_kv_cache_dtypes: ClassVar[list] = ["auto"]

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
    def write_slots(kv_cache: torch.Tensor, slots: torch.Tensor, kv: torch.Tensor) -> None:
        """kv_cache[:, slots] = kv ([2, len(slots), heads, head size]), in place."""
        which = torch.arange(2, device=kv_cache.device)[:, None]
        kv_cache.index_put_((which, slots[None, :]), kv.to(kv_cache.dtype))


@dataclass
class TpuPagedAttentionMetadata:
    num_actual_tokens: int
    slots: torch.Tensor          # [T] cache slot of each (padded) token
    key_slots: torch.Tensor      # [S * B * block_size] cache slot of each sequence position
    query_index: torch.Tensor    # [S * Q] token feeding each per-sequence query row
    query_pos: torch.Tensor      # [S, Q] position of each query row, -1 for padding
    output_index: torch.Tensor   # [T] per-sequence row holding each token's output
    key_pos: torch.Tensor        # [B * block_size] position of each gathered key


class TpuPagedAttentionMetadataBuilder(AttentionMetadataBuilder[TpuPagedAttentionMetadata]):
    def __init__(self, kv_cache_spec, layer_names, vllm_config, device):
        super().__init__(kv_cache_spec, layer_names, vllm_config, device)
        self.block_size = kv_cache_spec.block_size
        sched = vllm_config.scheduler_config
        self.max_seqs = sched.max_num_seqs
        self.max_query = sched.max_num_batched_tokens
        self.max_blocks = -(-vllm_config.model_config.max_model_len // self.block_size)

    def build(self, common_prefix_len: int, common_attn_metadata: CommonAttentionMetadata,
              fast_build: bool = False) -> TpuPagedAttentionMetadata:
        m = common_attn_metadata
        n, t_act = m.num_reqs, m.num_actual_tokens
        qsl = m.query_start_loc_cpu[: n + 1].numpy().astype(np.int64)
        seq_lens = m.seq_lens[:n].cpu().numpy().astype(np.int64)
        qlens = qsl[1:] - qsl[:-1]
        slot_mapping = m.slot_mapping.cpu().numpy().astype(np.int64)
        t_pad = max(len(slot_mapping), t_act)

        s_pad = bucket(n, 1, self.max_seqs)
        q_pad = bucket(int(qlens.max()), 1, self.max_query)
        b_pad = bucket(-(-int(seq_lens.max()) // self.block_size), 1, self.max_blocks)

        slots = np.zeros(t_pad, np.int64)
        slots[:t_act] = slot_mapping[:t_act]
        block_table = np.zeros((s_pad, b_pad), np.int64)
        width = min(b_pad, m.block_table_tensor.shape[1])
        block_table[:n, :width] = m.block_table_tensor[:n, :width].cpu().numpy()
        offsets = np.arange(self.block_size, dtype=np.int64)
        key_slots = (block_table[:, :, None] * self.block_size + offsets).reshape(-1)

        seq_of_token = np.repeat(np.arange(n), qlens)
        row = np.arange(t_act) - qsl[seq_of_token]           # index within its sequence's queries
        query_index = np.zeros((s_pad, q_pad), np.int64)
        query_index[seq_of_token, row] = np.arange(t_act)
        query_pos = np.full((s_pad, q_pad), -1, np.int64)
        query_pos[seq_of_token, row] = (seq_lens - qlens)[seq_of_token] + row
        output_index = np.zeros(t_pad, np.int64)
        output_index[:t_act] = seq_of_token * q_pad + row

        def dev(a):
            return torch.from_numpy(a).to(DEVICE)

        return TpuPagedAttentionMetadata(
            num_actual_tokens=t_act, slots=dev(slots), key_slots=dev(key_slots),
            query_index=dev(query_index.reshape(-1)), query_pos=dev(query_pos),
            output_index=dev(output_index),
            key_pos=dev(np.arange(b_pad * self.block_size, dtype=np.int64)))


class TpuPagedAttentionImpl(AttentionImpl):
    def __init__(self, num_heads, head_size, scale, num_kv_heads=None, alibi_slopes=None,
                 sliding_window=None, kv_cache_dtype="auto", logits_soft_cap=None,
                 attn_type=AttentionType.DECODER, kv_sharing_target_layer_name=None, sinks=None):
        missing = [what for what, used in (
            ("ALiBi slopes", alibi_slopes is not None),
            ("attention sinks", sinks is not None),
            (f"attention type {attn_type!r} (decoder self-attention only)",
             attn_type != AttentionType.DECODER),
            (f"KV cache dtype {kv_cache_dtype!r}", kv_cache_dtype != "auto"),
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

    def do_kv_cache_update(self, layer, key, value, kv_cache, slot_mapping) -> None:
        meta = get_forward_context().attn_metadata[layer.layer_name]
        t = meta.slots.shape[0]
        TpuPagedAttentionBackend.write_slots(kv_cache, meta.slots, torch.stack((key[:t], value[:t])))

    def forward(self, layer, query, key, value, kv_cache, attn_metadata, output,
                output_scale=None, output_block_scale=None):
        if output_scale is not None or output_block_scale is not None:
            raise NotImplementedError("vLLM on tpu: fused output quantization is not supported")
        if attn_metadata is None:     # profiling run without a cache
            return output
        meta = attn_metadata
        s, q = meta.query_pos.shape
        h, hkv, d = self.num_heads, self.num_kv_heads, self.head_size
        g = h // hkv
        length = meta.key_pos.shape[0]

        kv = kv_cache.index_select(1, meta.key_slots)                   # [2, S*L, Hkv, D]
        kv = kv.view(2, s, length, hkv, d).permute(0, 1, 3, 2, 4)       # [2, S, Hkv, L, D]
        keys, values = kv[0], kv[1]

        t = meta.output_index.shape[0]
        qs = query[:t].reshape(t, h, d).index_select(0, meta.query_index)  # [S*Q, H, D]
        qs = qs.view(s, q, hkv, g, d).permute(0, 2, 3, 1, 4).reshape(s, hkv, g * q, d)
        scores = torch.matmul(qs.float(), keys.float().transpose(-1, -2)) * self.scale
        if self.logits_soft_cap:
            scores = torch.tanh(scores / self.logits_soft_cap) * self.logits_soft_cap

        qpos = meta.query_pos[:, :, None]
        kpos = meta.key_pos[None, None, :]
        allowed = kpos <= qpos                                            # [S, Q, L]
        if self.sliding_window is not None:
            allowed = allowed & (kpos > qpos - self.sliding_window)
        allowed = allowed[:, None, None, :, :].expand(s, hkv, g, q, length).reshape(s, hkv, g * q, length)
        scores = scores.masked_fill(~allowed, torch.finfo(torch.float32).min)
        probs = torch.softmax(scores, dim=-1)
        out = torch.matmul(probs, values.float())                          # [S, Hkv, G*Q, D]
        out = out.view(s, hkv, g, q, d).permute(0, 3, 1, 2, 4).reshape(s * q, h, d)
        out = out.index_select(0, meta.output_index).to(output.dtype)       # [T, H, D]
        output[:t].copy_(out.view(output[:t].shape))
        return output
