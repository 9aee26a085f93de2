"""`torch.tpu.amp`: mixed precision on `tpu`, shaped like `torch.cuda.amp`.

`torch.autocast("tpu")` and `torch.amp.GradScaler("tpu")` are PyTorch's own
classes; the kernels behind them are ours (csrc/aten/autocast.cpp for the cast
policy, csrc/lowering/grad_scaler.cpp for the scaler's two ops). PyTorch asks a
custom backend's device module which dtypes autocast may use
(`get_amp_supported_dtype`); anything else (float64, float32) makes
torch.autocast warn and run the block without autocast, as it does for every
backend but CUDA.

The autocast dtype of `tpu` is bfloat16, the TPU's native matmul input type
(PyTorch's default for a custom backend is float16). PyTorch keeps that
setting per thread: importing torch_tpu sets it for the importing thread, and
threads the autograd engine runs for it inherit it; a thread started by the
user that enters `torch.autocast("tpu")` without a dtype should call
`torch.set_autocast_dtype("tpu", torch.bfloat16)` first (or pass the dtype).
"""
import functools

import torch

__all__ = ["GradScaler", "autocast", "custom_bwd", "custom_fwd", "get_amp_supported_dtype",
           "is_bf16_supported"]


def get_amp_supported_dtype():
    """The dtypes `torch.autocast("tpu", dtype=...)` accepts."""
    return [torch.bfloat16, torch.float16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """bfloat16 is a native type of every XLA backend (TPU, GPU, CPU)."""
    return True


class autocast(torch.amp.autocast_mode.autocast):  # noqa: N801 (torch.cuda.amp's name)
    """`torch.tpu.amp.autocast(...)` is `torch.autocast("tpu", ...)`."""

    def __init__(self, enabled: bool = True, dtype: torch.dtype = torch.bfloat16,
                 cache_enabled: bool = True):
        super().__init__("tpu", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


class GradScaler(torch.amp.GradScaler):
    """`torch.tpu.amp.GradScaler(...)` is `torch.amp.GradScaler("tpu", ...)`."""

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True):
        super().__init__("tpu", init_scale=init_scale, growth_factor=growth_factor,
                         backoff_factor=backoff_factor, growth_interval=growth_interval,
                         enabled=enabled)


custom_fwd = functools.partial(torch.amp.custom_fwd, device_type="tpu")
custom_bwd = functools.partial(torch.amp.custom_bwd, device_type="tpu")


def _install():
    torch.set_autocast_dtype("tpu", torch.bfloat16)
