"""`torch.tpu.precision`: the float32 matmul precision for a block.

Float32 matrix products and convolutions on tpu are computed as
`torch.get_float32_matmul_precision()` says ("highest" by default: full
float32; "high": about TF32, three bfloat16 passes on a TPU; "medium": one
bfloat16 pass). `with torch.tpu.precision("high"):` sets it for the ops
issued while the block is open (their backward too, which autograd runs on
its own thread), on tpu only (CPU matmuls keep PyTorch's setting). How PyTorch's own switches are read: csrc/aten/matmul_precision.cpp.
"""

from .. import _C


class precision:  # noqa: N801 (TorchTPU's name)
    """`with torch.tpu.precision("highest" | "high" | "medium"): ...`"""

    def __init__(self, value: str):
        self.value = value
        self._saved = None

    def __enter__(self):
        self._saved = _C._set_matmul_precision_override(self.value)
        return self

    def __exit__(self, *exc):
        _C._set_matmul_precision_override(self._saved)
        return False


def get_precision() -> str:
    """The precision float32 products issued now get."""
    return _C._matmul_precision()
