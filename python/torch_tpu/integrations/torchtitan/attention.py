"""The attention TorchTitan's llama3 runs on `tpu`: one fused
`scaled_dot_product_attention` with a block-causal boolean mask.

TorchTitan's language models always pack several documents into a row and
pass per-document `positions` (0 at each document start); a token attends to
earlier tokens of its own document only. Its stock backends express that as
a FlexAttention BlockMask (compiled by Inductor only; PyTorch refuses it on
other devices) or as varlen flash attention over cumulative sequence offsets
(found with `nonzero`, a host sync per row, and a T x T problem once the batch
is packed). Here the same mask is a dense (B, 1, L, L) boolean built on the
device from `positions` with fixed shapes, so eager mode reuses its programs
and torch.compile never recompiles for a new document layout; SDPA with a
boolean mask is one program on `tpu` (csrc/lowering/attention.cpp) and runs
the same math on the CPU, which is what the reference runs compare against.
"""
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torchtitan.models.common.attention import GQAttention
from torchtitan.protocols.module import Module


def block_causal_mask(positions: torch.Tensor) -> torch.Tensor:
    """(B, L) per-document positions -> (B, 1, L, L) bool, True where query i
    may attend to key j: same document and j <= i."""
    if positions.dim() != 2:
        raise ValueError(f"block_causal_mask: positions must be (batch, seq), got shape {tuple(positions.shape)}")
    document = torch.cumsum((positions == 0).to(torch.int32), dim=1)
    same_document = document.unsqueeze(2) == document.unsqueeze(1)
    length = positions.shape[1]
    causal = torch.ones(length, length, dtype=torch.bool, device=positions.device).tril()
    return (same_document & causal).unsqueeze(1)


class BlockCausalSDPA(Module):
    """Inner attention of GQAttention: (B, L, N, H) in and out, the mask
    from `block_causal_mask` as `attention_masks`."""

    @dataclass(kw_only=True, slots=True)
    class Config(Module.Config):
        pass

    def __init__(self, config: Config) -> None:
        super().__init__()

    def forward(self, q_BLNH, k_BLNH, v_BLNH, *, attention_masks=None, scale=None,
                enable_gqa=False, **kwargs):
        if attention_masks is None:
            raise ValueError(
                "BlockCausalSDPA needs the block-causal mask: train with "
                "torch_tpu.integrations.torchtitan's trainer, which builds it from the batch's positions")
        if kwargs.get("out_transform") is not None:
            raise NotImplementedError("BlockCausalSDPA: out_transform (log-sum-exp epilogues) is not supported")
        q, k, v = (t.transpose(1, 2) for t in (q_BLNH, k_BLNH, v_BLNH))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attention_masks, scale=scale,
                                             enable_gqa=enable_gqa)
        return out.transpose(1, 2)


def use_block_causal_sdpa(model_config) -> int:
    """Swaps the inner attention of every GQAttention layer of a TorchTitan
    model config for BlockCausalSDPA; returns how many were swapped."""
    swapped = 0
    for _, attention, _, _ in model_config.traverse(GQAttention.Config):
        attention.inner_attention = BlockCausalSDPA.Config()
        swapped += 1
    if not swapped:
        raise ValueError(f"{type(model_config).__name__} has no GQAttention layer to put BlockCausalSDPA in")
    return swapped
