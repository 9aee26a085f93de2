"""Dynamic dimensions: one compiled program for every size up to a bucket.

`dynamic_dims(t, dim)` returns `t` with its buffer padded along `dim` to a
bucket (powers of two from 16). Ops then compile one program per bucket
instead of one per size, and their results stay padded: pointwise ops,
reductions, softmax, matmul rows, cat along the dimension and attention over
padded keys (the table in csrc/lowering/padded.cpp). Any other op reads the
exact tensor, as before (one program per size, never a wrong result).
A cat that sees a second size along its dimension pads its result by
itself, so decoding loops (generate()'s KV cache and input_ids) need no
marking. See docs/dynamic_shapes.md.
"""
import warnings

import torch

from . import _C

_warned = set()


def dynamic_dims(tensor: torch.Tensor, dims, bound=None) -> torch.Tensor:
    """`tensor` with dimension `dims` dynamic (an int, or a one-element list,
    tuple or {dim: bound} dict; one dynamic dimension per tensor). A size
    above `bound` keeps the tensor static, with a one-time warning."""
    if not isinstance(tensor, torch.Tensor) or tensor.device.type != "tpu":
        raise TypeError(f"dynamic_dims expects a tpu tensor, got {type(tensor).__name__}"
                        + (f" on {tensor.device}" if isinstance(tensor, torch.Tensor) else ""))
    if isinstance(dims, dict):
        if len(dims) != 1:
            raise NotImplementedError("dynamic_dims: one dynamic dimension per tensor, got "
                                      f"{sorted(dims)}")
        (dim, bound), = dims.items()
    elif isinstance(dims, (list, tuple)):
        if len(dims) != 1:
            raise NotImplementedError(f"dynamic_dims: one dynamic dimension per tensor, got {list(dims)}")
        dim = dims[0]
    else:
        dim = dims
    _check_int_dim(dim, "dynamic_dims")
    if tensor.dim() == 0:
        raise IndexError("dynamic_dims: a 0-dim tensor has no dimension to make dynamic")
    dim = _wrap_dim(dim, tensor.dim())
    if bound is not None:
        if isinstance(bound, bool) or not isinstance(bound, int) or bound < 1:
            raise ValueError(f"dynamic_dims: a bound is a positive int, got {bound!r}")
        if tensor.shape[dim] > bound:
            if (dim, bound) not in _warned:
                _warned.add((dim, bound))
                warnings.warn(f"dynamic_dims: size {tensor.shape[dim]} of dimension {dim} is above "
                              f"its bound {bound}; this tensor stays static (one program per size)")
            return tensor
    return _C._pad_dimension(tensor, dim)


def _check_int_dim(dim, op: str) -> None:
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"{op}: a dimension is an int, got {type(dim).__name__}")


def _wrap_dim(dim: int, rank: int) -> int:
    """`dim` in [0, rank), as PyTorch wraps a negative one (its message)."""
    if not -rank <= dim < rank:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-rank}, "
                         f"{rank - 1}], but got {dim})")
    return dim % rank


def padding(tensor: torch.Tensor):
    """(dim, size, bound) when the tensor's buffer is padded, else None."""
    return _C._padding(tensor)


def config(*, automatic=None):
    """Automatic dynamic dimensions (on by default; TORCH_TPU_AUTO_DYNAMIC=0
    turns them off at start): where tensors are copied to tpu, a dimension
    whose size varies from one copy to the next at the same Python line is
    padded to its bucket from then on, as `dynamic_dims` does. Returns the
    setting in force (before the change, when one is given)."""
    before = {"automatic": bool(_C._auto_dynamic())}
    if automatic is not None:
        if not isinstance(automatic, bool):
            raise TypeError(f"config: automatic is a bool, got {type(automatic).__name__}")
        _C._set_auto_dynamic(automatic)
    return before


def mark_static(tensor: torch.Tensor, dim: int) -> torch.Tensor:
    """Keeps dimension `dim` static. On a host tensor, its copies to tpu are
    never padded along `dim` (the mark of torch._dynamo.mark_static, which
    works the same); on a tpu tensor, returns it with an exact buffer along
    `dim` if it was padded there."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"mark_static expects a tensor, got {type(tensor).__name__}")
    _check_int_dim(dim, "mark_static")
    dim = _wrap_dim(dim, max(tensor.dim(), 1))  # PyTorch's range for a 0-dim tensor: [-1, 0]
    if tensor.device.type == "tpu":
        pad = padding(tensor)
        if pad and pad[0] == dim:
            _C._unpad(tensor)
        return tensor
    torch._dynamo.mark_static(tensor, dim)
    return tensor
