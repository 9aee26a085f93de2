"""`torch_tpu._internal.utils.hardware.get_tpu_device_name`: the chip that
Pallas kernels are traced for. Helion's launcher hands the name to Pallas'
TPU information table (block shapes, memory sizes) before it traces."""
from ...kernels import jax_lower


def get_tpu_device_name() -> str:
    """The TPU's device kind as the plugin reports it ("TPU v6 lite"...); on
    other plugins the chip Pallas' interpret form models ("TPU7x"), which
    kernels are traced for there (kernels/jax_lower.py)."""
    return jax_lower.pallas_device_kind()
