"""`torch_tpu.ffi`: a user's C++ kernel (an XLA FFI handler) as a PyTorch operator on tpu.

The counterpart of `jax.ffi`. A handler written with XLA's FFI headers (jaxlib ships
them: `xla/ffi/api/ffi.h`) and built into a shared library is registered with the
loaded PJRT plugin under a target name; `ffi_op` then makes an operator whose
program, per input signature, is one `stablehlo.custom_call @target` (typed FFI,
`api_version = 4`) with the given attributes. The handler runs inside the compiled
program on the plugin's threads, reading and writing the program's buffers in
place. The operator is a user kernel like `stablehlo_op` (kernels/custom_ops.py):
asynchronous in strict mode, fused under defer_and_fuse, captured by
`torch.compile(backend="tpu")`.

Registration goes to the plugin's process-wide registry: it is done once per
process (registering the same handler again does nothing) and holds for every
client the process creates.
"""
from __future__ import annotations

import ctypes
import os

import numpy as np
import torch

from .. import _C, info
from .custom_ops import KernelOp, _check_name

_ELEMENT = {
    torch.bfloat16: "bf16", torch.bool: "i1", torch.complex64: "complex<f32>", torch.complex128: "complex<f64>",
    torch.float16: "f16", torch.float32: "f32", torch.float64: "f64", torch.int8: "i8", torch.int16: "i16",
    torch.int32: "i32", torch.int64: "i64", torch.uint8: "ui8", torch.uint16: "ui16", torch.uint32: "ui32",
    torch.uint64: "ui64",
}
_NUMPY_ATTR = {np.float16: "f16", np.float32: "f32", np.float64: "f64", np.int8: "i8", np.int16: "i16",
               np.int32: "i32", np.int64: "i64", np.uint8: "ui8", np.uint16: "ui16", np.uint32: "ui32",
               np.uint64: "ui64"}


def platform() -> str:
    """The XLA platform name handlers register under with the loaded plugin
    ("Host" for XLA's CPU plugin, "CUDA" for its CUDA plugin)."""
    name = _C._ffi_platform()
    if not name:
        raise NotImplementedError(
            f"torch_tpu.ffi: the PJRT plugin {info.platform()['plugin_path']} takes no FFI handlers (no FFI extension, "
            "or a platform without XLA custom calls: on a TPU, write the kernel in Pallas with "
            "torch_tpu.pallas.jax_op)")
    return name


def load_handler(library: str | os.PathLike, symbol: str) -> ctypes._CFuncPtr:
    """The handler `symbol` (an `XLA_FFI_Handler`, e.g. from
    `XLA_FFI_DEFINE_HANDLER_SYMBOL`) of the shared library `library`."""
    path = os.fspath(library)
    if not os.path.exists(path):
        raise FileNotFoundError(f"torch_tpu.ffi: no shared library at {path!r}")
    try:
        lib = ctypes.CDLL(os.path.abspath(path))
    except OSError as e:
        raise ValueError(f"torch_tpu.ffi: {path!r} cannot be loaded as a shared library: {e}") from None
    try:
        return getattr(lib, symbol)
    except AttributeError:
        raise ValueError(f"torch_tpu.ffi: {path!r} has no symbol {symbol!r}") from None


def register_ffi_target(name: str, handler, *, platform_name: str | None = None) -> None:
    """Registers `handler` for custom calls to the target `name`.

    `handler`: a ctypes function (load_handler's, or `ctypes.CDLL(...).sym`), a
    PyCapsule holding the handler's address (as jax.ffi takes), or the address
    as an int. Registering the same handler again does nothing; another
    handler under a name already taken is an error."""
    if not isinstance(name, str) or not name or not name.replace("_", "a").replace(".", "a").isalnum():
        raise ValueError(f"torch_tpu.ffi: target name must be a non-empty identifier, got {name!r}")
    _C._ffi_register_handler(name, _address(handler), platform_name or platform())


def _address(handler) -> int:
    if isinstance(handler, bool):
        raise TypeError("torch_tpu.ffi: handler must be a ctypes function, a PyCapsule or an address, got bool")
    if isinstance(handler, int):
        address = handler
    elif isinstance(handler, ctypes._CFuncPtr):
        address = ctypes.cast(handler, ctypes.c_void_p).value
    elif type(handler).__name__ == "PyCapsule":
        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        name = ctypes.pythonapi.PyCapsule_GetName
        name.restype, name.argtypes = ctypes.c_char_p, [ctypes.py_object]
        address = get(handler, name(handler))
    else:
        raise TypeError(f"torch_tpu.ffi: handler must be a ctypes function, a PyCapsule or an address, got "
                        f"{type(handler).__name__}")
    if not address:
        raise ValueError("torch_tpu.ffi: the handler's address is null")
    return address


def _tensor_type(dtype, shape) -> str:
    if dtype not in _ELEMENT:
        raise TypeError(f"torch_tpu.ffi: dtype {dtype} has no XLA element type here")
    return "tensor<" + "".join(f"{d}x" for d in shape) + _ELEMENT[dtype] + ">"


def _attribute(key, value) -> str:
    if not isinstance(key, str) or not key.isidentifier():
        raise ValueError(f"torch_tpu.ffi: attribute names must be identifiers, got {key!r}")
    if isinstance(value, (bool, np.bool_)):
        text = "true" if value else "false"
    elif isinstance(value, np.generic) and type(value) in _NUMPY_ATTR:
        _finite(key, value)
        text = f"{value.item()!r} : {_NUMPY_ATTR[type(value)]}"
    elif isinstance(value, int):
        text = f"{value} : i64"
    elif isinstance(value, float):
        _finite(key, value)
        text = f"{value!r} : f64"
    elif isinstance(value, str):
        text = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    else:
        raise TypeError(f"torch_tpu.ffi: attribute {key!r} is {type(value).__name__}; attributes are bool, int "
                        "(i64), float (f64), numpy scalars (their own type) or str")
    return f"{key} = {text}"


def _finite(key, value):
    if not np.isfinite(value):
        raise ValueError(f"torch_tpu.ffi: attribute {key!r} is {value}; attributes must be finite")


def _module(target: str, signature, results, attributes) -> str:
    ins = [_tensor_type(d, s) for d, s in signature]
    outs = [_tensor_type(d, s) for d, s in results]
    params = ", ".join(f"%a{i}: {t}" for i, t in enumerate(ins))
    config = ", ".join(_attribute(k, v) for k, v in sorted(attributes.items()))
    n = len(outs)
    value = "%r" if n == 1 else f"%r:{n}"
    returned = "%r" if n == 1 else ", ".join(f"%r#{i}" for i in range(n))
    return (f"module {{\n  func.func @main({params}) -> ({', '.join(outs)}) {{\n"
            f"    {value} = stablehlo.custom_call @{target}({', '.join(f'%a{i}' for i in range(len(ins)))}) "
            f"{{api_version = 4 : i32, backend_config = {{{config}}}}} : ({', '.join(ins)}) -> ({', '.join(outs)})\n"
            f"    return {returned} : {', '.join(outs)}\n  }}\n}}\n")


def ffi_op(name: str, target: str, result_types, *, attributes: dict | None = None,
           nargs: int | None = None) -> KernelOp:
    """The custom call to `target` as the operator `name` ("namespace::name").

    `result_types(*inputs)` gets each input's (dtype, shape) and returns the
    results' [(dtype, shape), ...] (or one pair); a list of pairs instead serves
    every call. `attributes` go to the handler (its `.Attr<T>("key")`). `nargs`
    fixes the arity (default: any number of tensors, as one list). The program
    is built per input signature; calling it with tensors elsewhere than tpu is
    an error naming the op."""
    _check_name(name, "ffi_op")
    if not isinstance(target, str) or not target:
        raise ValueError(f"ffi_op({name!r}): target must be the name a handler was registered under")
    attributes = dict(attributes or {})
    for k, v in attributes.items():
        _attribute(k, v)  # a bad attribute fails here, not at the first call

    def results_for(signature):
        found = result_types(*signature) if callable(result_types) else result_types
        if isinstance(found, tuple) and len(found) == 2 and isinstance(found[0], torch.dtype):
            found = [found]
        try:
            pairs = [(d, tuple(int(x) for x in s)) for d, s in found]
        except (TypeError, ValueError):
            raise TypeError(f"{name}: result_types must give [(dtype, shape), ...], got {found!r}") from None
        if not pairs or not all(isinstance(d, torch.dtype) for d, _ in pairs):
            raise TypeError(f"{name}: result_types must give at least one (dtype, shape), got {found!r}")
        return pairs

    def build(signature):
        return _module(target, signature, results_for(signature), attributes)

    op = KernelOp(name, nargs, build, describe="ffi_op")
    op._output_types = results_for
    return op


__all__ = ["ffi_op", "load_handler", "platform", "register_ffi_target"]
