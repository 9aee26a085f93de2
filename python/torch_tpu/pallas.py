"""`torch_tpu.pallas.jax_op`: TorchTPU's import path for JAX and Pallas
kernels, kept because user code imports it from here; the implementation is
kernels/jax_op.py."""
from .kernels.jax_op import jax_op

__all__ = ["jax_op"]
