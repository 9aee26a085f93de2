"""Printing `tpu` tensors: the values are formatted from one host copy.

PyTorch's formatter otherwise runs a dozen small ops per tensor (and an item()
per element) on the device; XLA devices copy first, and so do we.
"""
import torch
import torch._tensor_str as _ts

_original = _ts._str_intern


def _str_intern(inp, *, tensor_contents=None):
    if (
        tensor_contents is None
        and isinstance(inp, torch.Tensor)
        and inp.device.type == "tpu"
        and inp.layout == torch.strided
        and inp.numel() > 0
    ):
        with torch.no_grad():
            host = inp.detach().to("cpu")
        tensor_contents = _ts._tensor_str(host, len("tensor("))
    return _original(inp, tensor_contents=tensor_contents)


def install():
    _ts._str_intern = _str_intern
