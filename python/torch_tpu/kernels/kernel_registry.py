"""Kernels registered by name and key: what TorchTPU's private kernel API
(`torch_tpu._internal.pallas.tpu_torch_pallas`) answers, which Helion's Pallas
launcher and Inductor's Pallas backend call.

A caller registers a StableHLO module under (name, key) once (as text, or
serialized as `jax.export` writes it: a portable artifact) and then calls it
with tensors. Registration goes through `stablehlo_op`'s own path
(custom_ops.register_module: the module is embedded into our programs and
compiled alone once, so the plugin's errors name the kernel), and every call
is one node of the single operator `torch_tpu::registered_kernel`, whose tpu
kernel records the same custom-call node as every user kernel (asynchronous
in strict mode, fused under defer_and_fuse, captured by compiled graphs) and
whose fake implementation gives the module's result types (Dynamo sees an
opaque op).

Mosaic: a module calling Mosaic (`tpu_custom_call`, what Pallas lowers to
for a TPU) runs only on a TPU plugin and is refused at registration on any
other, naming the plugin. Kernels we trace ourselves (jax_callable.py) are
lowered in Pallas' interpret form on those plugins instead (jax_lower.py).

Donation: `donate_argnums` is accepted and checked, but inputs are never
donated: a call leaves its inputs valid and returns new tensors (callers
copy results into the inputs they alias, as JaxCallable does), which is
what a donated call looks like from outside, at the cost of a copy.
"""
from __future__ import annotations

import re
import threading

import torch

from .. import info
from .custom_ops import register_module, signature_text

_lock = threading.Lock()
# (name, key) -> (module id, input types, output types)
_kernels: dict[tuple[str, str], tuple[int, list, list]] = {}

_MOSAIC = re.compile(r'custom_call\s*@tpu_custom_call\b|call_target_name\s*=\s*"tpu_custom_call"')


def _who(name, key) -> str:
    return f"kernel {name!r} (key {key!r})"


def module_text(module, who: str) -> str:
    """The module as text: given as text, or as the bytes `jax.export`
    writes (`Exported.mlir_module_serialized`, a StableHLO portable artifact;
    MLIR bytecode is read too). Reading bytes needs JAX's MLIR bindings."""
    if isinstance(module, str):
        return module
    if not isinstance(module, (bytes, bytearray)):
        raise TypeError(f"{who}: the module must be StableHLO text (str) or a serialized module "
                        f"(bytes), got {type(module).__name__}")
    from . import jax_lower

    jax_lower.import_jax(who, " (needed to read a serialized module)")
    from jax._src.interpreters import mlir
    from jax._src.lib import _jax
    from jax._src.lib.mlir import ir

    with mlir.make_ir_context():
        try:
            parsed = _jax.mlir.deserialize_portable_artifact(bytes(module))
        except Exception:  # noqa: BLE001 - not a portable artifact: plain MLIR bytecode?
            try:
                parsed = ir.Module.parse(bytes(module))
            except Exception as e:  # noqa: BLE001 - the bindings raise several types
                raise ValueError(f"{who}: the serialized module is neither a StableHLO portable "
                                 f"artifact nor MLIR bytecode: {e}") from e
        return parsed.operation.get_asm(enable_debug_info=False)


def check_runs_here(text: str, who: str):
    """A Mosaic module on a plugin that is not a TPU is refused now, naming
    the plugin (its compiler would fail later, on an unknown custom call)."""
    p = info.platform()
    if p["platform_name"].lower() != "tpu" and _MOSAIC.search(text):
        raise RuntimeError(
            f"{who}: the module calls Mosaic (tpu_custom_call, a Pallas kernel lowered for TPU), "
            f"which only a TPU plugin runs; the loaded PJRT plugin is '{p['platform_name']}' "
            f"({p.get('plugin_path', 'unknown path')}). Trace the kernel for this plugin instead "
            "(torch_tpu.pallas.jax_op lowers Pallas in interpret form here)")


def register(name: str, key: str, module) -> bool:
    """Registers the module under (name, key); False when that pair already
    has one (the first is kept, as TorchTPU does)."""
    _check_names(name, key, "register_custom_kernel")
    if (name, key) in _kernels:
        return False
    who = _who(name, key)
    text = module_text(module, who)
    check_runs_here(text, who)
    with _lock:
        if (name, key) in _kernels:
            return False
        _kernels[(name, key)] = register_module(name, text)
    return True


def lookup(name: str, key: str) -> bool:
    _check_names(name, key, "lookup_custom_kernel")
    return (name, key) in _kernels


def _check_names(name, key, what):
    for arg, v in (("name", name), ("kernel_key", key)):
        if not isinstance(v, str):
            raise TypeError(f"{what}: {arg} must be a str, got {type(v).__name__}")


def _kernel(name, key):
    found = _kernels.get((name, key))
    if found is None:
        raise RuntimeError(f"{_who(name, key)} is not registered (register_custom_kernel first)")
    return found


def _types(tensors) -> list:
    return [(t.dtype, tuple(t.shape)) for t in tensors]


def call(name: str, key: str, inputs, output_shapes, donate_argnums=(), device_assignment=None):
    """Runs the kernel registered under (name, key) on `inputs` (tpu tensors);
    `output_shapes` are tensors of the results' dtypes and shapes (any
    device). Returns a list of new tensors."""
    _check_names(name, key, "call_custom_kernel")
    who = _who(name, key)
    inputs = _tensor_list(inputs, "inputs", who)
    output_shapes = _tensor_list(output_shapes, "output_shapes", who)
    _check_donation(donate_argnums, len(inputs), who)
    _check_device_assignment(device_assignment, who)
    _, ins, outs = _kernel(name, key)
    if _types(inputs) != ins:
        raise TypeError(f"{who}: the module takes {signature_text(ins)}; called with "
                        f"{signature_text(_types(inputs))}")
    if _types(output_shapes) != outs:
        raise ValueError(f"{who}: the module returns {signature_text(outs)}; output_shapes say "
                         f"{signature_text(_types(output_shapes))}")
    if not outs:
        return []
    if not inputs:
        # An operator with no tensor argument has no device to dispatch on:
        # the kernel runs on the current tpu device.
        return list(_registered_kernel(inputs, name, key))
    return list(torch.ops.torch_tpu.registered_kernel(inputs, name, key))


def _tensor_list(values, what, who) -> list:
    if isinstance(values, torch.Tensor) or not isinstance(values, (list, tuple)):
        raise TypeError(f"{who}: {what} must be a list of tensors, got {type(values).__name__}")
    for i, v in enumerate(values):
        if not isinstance(v, torch.Tensor):
            raise TypeError(f"{who}: {what}[{i}] is {type(v).__name__}, not a tensor")
    return list(values)


def _check_donation(donate_argnums, n, who):
    if donate_argnums is None:
        return
    for i in donate_argnums:
        if not isinstance(i, int) or not 0 <= i < n:
            raise ValueError(f"{who}: donate_argnums holds {i!r}, not the index of one of the "
                             f"{n} inputs")


def _check_device_assignment(device_assignment, who):
    """A kernel is a one-device program that runs on its inputs' device; a
    mesh of several devices (a distributed kernel) is not supported."""
    if device_assignment is None:
        return
    ids = list(device_assignment)
    if len(ids) > 1:
        raise NotImplementedError(
            f"{who}: device_assignment {ids} spans {len(ids)} devices; torch_tpu runs kernels "
            "as one-device programs (each process drives its own device), so distributed "
            "kernels over a mesh are not supported")


# ---- the operator every registered kernel is called through

def _registered_kernel(inputs: list[torch.Tensor], name: str, key: str) -> list[torch.Tensor]:
    from .. import _C

    mid, _, _ = _kernel(name, key)
    devices = {t.device for t in inputs}
    if any(d.type != "tpu" for d in devices) or len(devices) > 1:
        listed = ", ".join(sorted(str(d) for d in devices))
        raise RuntimeError(f"{_who(name, key)}: the kernel runs on one tpu device; got tensors on "
                           f"{listed} (move them with .to('tpu'))")
    return _C._custom_call(mid, list(inputs))


_op = torch.library.custom_op("torch_tpu::registered_kernel", _registered_kernel, mutates_args=(),
                              device_types="tpu")
_op.register_kernel("cpu", _registered_kernel)


@_op.register_fake
def _fake(inputs, name, key):
    device = inputs[0].device if inputs else torch.device("tpu")
    return [torch.empty(shape, dtype=dtype, device=device) for dtype, shape in _kernel(name, key)[2]]
