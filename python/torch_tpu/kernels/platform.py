"""Platform kernels: our own C++ handlers inside XLA programs (csrc/kernels/).

Each kernel of the table (csrc/kernels/kernels.h) replaces a computation that
stays in the project: where the loaded plugin offers PJRT's FFI extension and
the kernel has a handler for its platform, `target(name)` registers the
handler (once per process) and gives the custom-call target its caller emits;
elsewhere, and with TORCH_TPU_KERNELS=composite, it gives None and the caller
runs its composite, which is also the reference the kernel's tests compare
with. `table()` says which kernel runs where.
"""
from __future__ import annotations

import numpy as np

from .. import _C
from .ffi import ffi_op

_ops: dict[tuple, object] = {}


def table() -> list[dict]:
    """Each platform kernel: its name, custom-call target, what it replaces,
    the XLA platforms it has handlers for, and whether it runs here."""
    rows = []
    for name, target_name, replaces, handlers in _C._platform_kernels():
        rows.append({"name": name, "target": target_name, "replaces": replaces,
                     "platforms": sorted(handlers), "runs": target(name) is not None})
    return rows


def target(name: str) -> str | None:
    """The custom-call target of kernel `name`, its handler registered with
    the plugin; None where the composite runs instead. The C++ lowerings ask
    the same question through the same code (kernels::target)."""
    return _C._kernel_target(name) or None


def paged_attention(query, kv_cache, key_blocks, query_index, query_pos, output_index, *, scale: float,
                    soft_cap: float | None, window: int | None, block_size: int):
    """Paged attention over vLLM's block table (csrc/kernels/paged_attention.cpp
    says what each argument is): [T, H, D] float32, or None where the kernel
    does not run here (the caller runs its composite)."""
    name = target("paged_attention")
    if name is None:
        return None
    key = (float(scale), float(soft_cap or 0.0), int(window or 0), int(block_size))
    op = _ops.get(key)
    if op is None:
        op = ffi_op(f"torch_tpu_kernels::paged_attention_{len(_ops)}", name, lambda q, *rest: q,
                    attributes={"scale": np.float32(key[0]), "soft_cap": np.float32(key[1]),
                                "window": key[2], "block_size": key[3]}, nargs=6)
        _ops[key] = op
    return op(query.float(), kv_cache, key_blocks, query_index, query_pos, output_index)


__all__ = ["paged_attention", "table", "target"]
