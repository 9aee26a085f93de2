"""`torch_tpu._internal.utils.hardware.get_tpu_device_name`: the chip that
Pallas kernels are lowered for. Helion's launcher hands the name to Pallas'
TPU information table (block shapes, memory sizes) before it traces."""
from ... import info

# On plugins other than a TPU, kernels are lowered in Pallas' interpret form,
# which models this chip by default (Helion's own interpret mode registers the
# same one, TPU7x, which TorchTPU calls "TPU v7").
INTERPRET_MODEL = "TPU v7"


def get_tpu_device_name() -> str:
    """The TPU's device kind as the plugin reports it ("TPU v6 lite"...), or
    INTERPRET_MODEL where the plugin is not a TPU."""
    if info.platform()["platform_name"].lower() != "tpu":
        return INTERPRET_MODEL
    import torch

    return torch.tpu.get_device_properties().kind
