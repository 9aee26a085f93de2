"""`aten::_grouped_mm` under torch.compile: its fake kernel.

Mixture-of-experts models (transformers' `grouped_mm` experts) call
`torch.nn.functional.grouped_mm` on tpu in every dtype. PyTorch's meta kernel
copies the CUDA kernel's checks and refuses everything but bfloat16, so
Dynamo's fake run fails on a float32 model. For tpu tensors only, the fake
kernel here gives the output's shape and dtype; the op itself is lowered
whole (csrc/lowering/matmul.cpp), in a graph as in eager.
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


fake_impls.register_op_impl(lambda func: func is OP)(_fake)
