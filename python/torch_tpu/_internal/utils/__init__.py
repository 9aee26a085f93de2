"""TorchTPU's utilities that callers use: `hardware.get_tpu_device_name`."""
