"""`aten::_grouped_mm` under torch.compile: its fake kernel and its decomposition.

Mixture-of-experts models (transformers' `grouped_mm` experts) call
`torch.nn.functional.grouped_mm` on tpu in every dtype. PyTorch's meta kernel
copies the CUDA kernel's checks and refuses everything but bfloat16, so
Dynamo's fake run fails on a float32 model; and the eager kernel (a composite
that slices by `offs.tolist()`) reads the offsets on the host, which a
captured graph cannot. For tpu tensors only, the fake kernel here gives the
output's shape and dtype, and the decomposition computes the same product
without reading the offsets: each expert's product over every row, masked to
that expert's rows (or, where the contraction is the ragged dimension, to
its slice of it). That costs experts-times the flops of a ragged product,
which StableHLO has no op for; the result is exact, and the graph stays one
program.
"""
from __future__ import annotations

import torch
from torch._subclasses import fake_impls
from torch._subclasses.fake_tensor import FakeTensor, in_kernel_invocation_manager

aten = torch.ops.aten
OP = aten._grouped_mm.default


def _output_size(a, b, offs):
    # The shapes of PyTorch's kernel: the ragged dimension is a's rows
    # (2D x 3D), b's columns (3D x 2D) or the contraction (2D x 2D); 3D x 3D
    # is a plain batched product.
    if a.dim() == 2 and b.dim() == 3:
        return [a.shape[0], b.shape[-1]]
    if a.dim() == 3 and b.dim() == 2:
        return [a.shape[1], b.shape[-1]]
    if a.dim() == 2 and b.dim() == 2:
        return [offs.shape[0], a.shape[0], b.shape[-1]]
    return [a.shape[0], a.shape[1], b.shape[-1]]


def _check(a, b, offs):
    torch._check(a.dim() in (2, 3) and b.dim() in (2, 3),
                 lambda: f"grouped_mm: operands must be 2D or 3D, got {a.dim()}D and {b.dim()}D")
    torch._check(a.dtype == b.dtype and a.is_floating_point(),
                 lambda: f"grouped_mm: operands must share a floating dtype, got {a.dtype} and {b.dtype}")
    torch._check(a.shape[-1] == b.shape[-2] if b.dim() == 3 or a.dim() == 3 else a.shape[-1] == b.shape[0],
                 lambda: f"grouped_mm: contraction sizes differ: {list(a.shape)} and {list(b.shape)}")
    ragged = a.dim() == 2 or b.dim() == 2
    torch._check((offs is not None) == ragged,
                 lambda: "grouped_mm: offs is needed when an operand is 2D and only then")
    if offs is not None:
        torch._check(offs.dim() == 1 and offs.dtype == torch.int32,
                     lambda: f"grouped_mm: offs must be a 1D int32 tensor, got {offs.dim()}D {offs.dtype}")


def _fake(fake_mode, func, a, b, offs=None, bias=None, out_dtype=None):
    if not (isinstance(a, FakeTensor) and a.fake_device.type == "tpu"):
        return NotImplemented  # every other device keeps PyTorch's meta kernel
    _check(a, b, offs)
    with in_kernel_invocation_manager(fake_mode):
        meta = torch.empty(_output_size(a, b, offs), dtype=out_dtype or a.dtype, device="meta")
    return FakeTensor(fake_mode, meta, a.fake_device)


def _group_mask(offs, length):
    """(experts, length) bool: row r belongs to expert e when
    offs[e-1] <= r < offs[e] (offs[-1] is 0)."""
    rows = torch.arange(length, device=offs.device, dtype=offs.dtype)
    ends = offs.unsqueeze(1)
    starts = torch.cat([offs.new_zeros(1), offs[:-1]]).unsqueeze(1)
    return (rows >= starts) & (rows < ends)


def decompose(a, b, offs=None, bias=None, out_dtype=None):
    """The grouped product from dense ones, for tpu graphs."""
    _check(a, b, offs)
    if a.dim() == 2 and b.dim() == 3:      # rows of a by expert
        mask = _group_mask(offs, a.shape[0]).to(a.dtype)
        out = (torch.matmul(a, b) * mask.unsqueeze(-1)).sum(0)
    elif a.dim() == 3 and b.dim() == 2:    # columns of b by expert
        mask = _group_mask(offs, b.shape[1]).to(a.dtype)
        out = (torch.matmul(a, b) * mask.unsqueeze(1)).sum(0)
    elif a.dim() == 2 and b.dim() == 2:    # the contraction by expert
        mask = _group_mask(offs, a.shape[1]).to(a.dtype)
        out = torch.matmul(a.unsqueeze(0) * mask.unsqueeze(1), b)
    else:
        out = torch.bmm(a, b)
    if bias is not None:
        out = out + bias
    return out.to(out_dtype) if out_dtype is not None else out


fake_impls.register_op_impl(lambda func: func is OP)(_fake)
