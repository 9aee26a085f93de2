"""`torch_tpu.ffi`: users' C++ kernels (XLA FFI handlers) as operators on tpu, the
counterpart of `jax.ffi`; the implementation is kernels/ffi.py."""
from .kernels.ffi import ffi_op, load_handler, platform, register_ffi_target

__all__ = ["ffi_op", "load_handler", "platform", "register_ffi_target"]
