"""The device argument of a `torch.tpu` function (None, an index, "tpu:1", a
torch.device) as a device index; the device API and the memory API both read
it this way."""
import torch

from .. import _C


def device_index(device=None) -> int:
    if device is None:
        return _C._current_device()
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "tpu":
            raise ValueError(f"expected a tpu device, got {device}")
        return _C._current_device() if device.index is None else device.index
    raise TypeError(f"expected a device index, string or torch.device, got {type(device).__name__}")
