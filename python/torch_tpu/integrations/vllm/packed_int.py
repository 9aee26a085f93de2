"""Integers packed into int32 words, as weight-only quantized checkpoints
store them (compressed-tensors' pack-quantized, GPTQ, AWQ once vLLM has
reordered its bits): 32 // bits values a word, the first in the lowest bits.

`unpack_rows` is ops torch_tpu lowers (shifts and a mask), so a packed weight
stays packed on the device and is unpacked inside the step's program;
`dequantize` then gives the float32 weight (integers and 16-bit scales are
exact in float32)."""
import torch


def unpack_rows(packed: torch.Tensor, bits: int) -> torch.Tensor:
    """[R, C] int32 words packed along dim 0 -> [R * 32 // bits, C] int32
    values in [0, 2^bits): row r * per_word + i is word r's i-th value."""
    per_word = 32 // bits
    shifts = torch.arange(0, 32, bits, dtype=torch.int32, device=packed.device)
    # An arithmetic shift drags the sign bit in from the top; the mask drops it.
    values = (packed[:, None, :] >> shifts[None, :, None]) & ((1 << bits) - 1)
    return values.reshape(packed.shape[0] * per_word, packed.shape[1])


def dequantize(packed: torch.Tensor, bits: int, scales: torch.Tensor, zeros) -> torch.Tensor:
    """The float32 weight [K, N] of `packed` [K * bits / 32, N] (packed along
    K), its `scales` [G, N] each spanning K / G consecutive rows, minus
    `zeros`: [G, N] like the scales, or one number (a symmetric type's bias)."""
    values = unpack_rows(packed, bits).to(torch.float32)
    rows, cols = values.shape
    groups = scales.shape[0]
    if not torch.is_tensor(zeros):
        weight = (values - zeros).reshape(groups, rows // groups, cols) * scales[:, None, :]
    else:
        weight = (values.reshape(groups, rows // groups, cols) - zeros[:, None, :]) * scales[:, None, :]
    return weight.reshape(rows, cols)
