"""TorchTPU's Pallas entry points (`pallas.py`, `tpu_torch_pallas.py`)."""
