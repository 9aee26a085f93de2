"""Which ATen operators the tpu backend handles, and how.

One place for the question "is this aten:: overload ours?", used by the
OpInfo harness (to decide which OpInfos we claim) and by
scripts/coverage_table.py (docs/coverage.md). The answer comes from the
dispatcher itself, not from a hand-kept list:

- ``lowered``: a PrivateUse1 kernel registered by ``register_lowered_ops``
  (csrc/aten/python_bindings.cpp), i.e. the functional op, its in-place or its
  out= form routes to a StableHLO lowering in ``torch_tpu.lowered_ops()``;
- ``native``: a PrivateUse1 kernel written by hand in csrc/aten/ (views,
  copies, factories, resize_, data-dependent ops...), named by its file;
- ``composite``: no PrivateUse1 kernel, but a CompositeExplicitAutograd(NonFunctional)
  kernel that runs on any device by calling other ops (expand, permute,
  _to_copy, zeros_like...): ours when the ops it calls are;
- ``decomposed``: a CompositeImplicitAutograd kernel: never reaches the backend,
  its decomposition does;
- ``metadata``: sym_size, sym_stride...: CompositeImplicit kernels that read
  the tensor's metadata on the host;
- ``missing``: none of these: the call raises NotImplementedError.
"""
from __future__ import annotations

import functools
import re

import torch

_PU1 = re.compile(r"^PrivateUse1: registered at (\S+?):\d+")
_CEA = re.compile(r"^(CompositeExplicitAutograd|CompositeExplicitAutogradNonFunctional)(\[alias\])?: registered")
_CIA = re.compile(r"^CompositeImplicitAutograd(\[alias\])?: registered")

# Kernels registered from these files run the lowering registry.
_LOWERED_FROM = ("python_bindings.cpp",)
# Kernels in these files take a step of their own first (a host sync that
# reads an argument back, a shortcut), then run the op's lowering: the step.
_STEP_THEN_LOWERED = {
    "data_dependent.cpp": "boolean masks in the indices are first turned into int64 indices by a host sync",
    "fresh_zero.cpp": "a tensor covering a never-written storage is already zeros, and nothing runs",
    "multinomial.cpp": "the probabilities are first checked as the CPU checks them, by a host sync",
    "value_checks.cpp": "the values the CPU checks are first read back by a host sync",
}
# Kernels that only raise NotImplementedError saying what to do instead.
_REFUSED = {
    "aten::_nested_tensor_from_mask": "raises NotImplementedError: tpu tensors cannot be nested "
                                      "(csrc/aten/transformer.cpp)",
}


@functools.lru_cache(maxsize=None)
def classify(name: str) -> tuple[str, str]:
    """(kind, how) for an overload name such as 'aten::add.Tensor' or 'aten::relu'."""
    import torch_tpu  # noqa: F401  (registers the kernels)

    try:
        dump = torch._C._dispatch_dump(name)
    except RuntimeError:
        return "missing", "no such operator"
    pu1 = cea = cia = None
    for line in dump.splitlines():
        line = line.strip()
        m = _PU1.match(line)
        if m:
            pu1 = m.group(1)
        elif _CEA.match(line):
            cea = line.split(":")[0].replace("[alias]", "")
        elif _CIA.match(line):
            cia = True
    if pu1:
        base = pu1.rsplit("/", 1)[-1]
        if base in _LOWERED_FROM:
            return "lowered", "StableHLO lowering (" + _lowering_of(name) + ")"
        if base in _STEP_THEN_LOWERED and _lowering_of(name) in _lowered():
            return "lowered", (f"StableHLO lowering ({_lowering_of(name)}); "
                               f"{_STEP_THEN_LOWERED[base]} (csrc/aten/{base})")
        if name in _REFUSED:
            return "missing", _REFUSED[name]
        return "native", f"hand-written kernel in csrc/aten/{base}"
    if (cea == "CompositeExplicitAutogradNonFunctional" and _has_cpu_kernel(name)
            and not _out_variant_handled(name)):
        # A structured op's functional form: its only kernel calls the out= form.
        return "missing", "no tpu kernel (its CompositeExplicitAutogradNonFunctional kernel calls " \
                          "the out= form, which has none)"
    if cea:
        return "composite", f"{cea} kernel: runs the ops it calls"
    if cia and name.startswith("aten::sym_"):
        return "metadata", "reads sizes/strides/offset on the host; no device work"
    if cia:
        return "decomposed", "CompositeImplicitAutograd: decomposed before reaching the backend"
    return "missing", "no tpu kernel"


def _has_cpu_kernel(name: str) -> bool:
    # Structured ops have backend kernels of their own; their generic
    # CompositeExplicitAutogradNonFunctional kernel only wraps the out= form.
    return torch._C._dispatch_has_kernel_for_dispatch_key(name, "CPU")


def _out_variant_handled(name: str) -> bool:
    base = name[6:].split(".", 1)[0].rstrip("_")
    packet = getattr(torch.ops.aten, base, None)
    if packet is None:
        return False
    for ov in packet.overloads():
        if ov.endswith("out") and torch._C._dispatch_has_kernel_for_dispatch_key(
                f"aten::{base}.{ov}", "PrivateUse1"):
            return True
    return False


def _lowering_of(name: str) -> str:
    """Which registry entry a lowered overload uses (its functional twin)."""
    lowered = _lowered()
    if name in lowered:
        return name
    op, _, overload = name.partition(".")
    if op.endswith("_") and (op[:-1] + ("." + overload if overload else "")) in lowered:
        return op[:-1] + ("." + overload if overload else "")
    # out= variant: the functional op of the same base name.
    cands = [n for n in lowered if n == op or n.startswith(op + ".")]
    return ("out= of " + cands[0]) if len(cands) == 1 else "out= variant"


@functools.lru_cache(maxsize=None)
def _lowered() -> frozenset:
    import torch_tpu

    return frozenset(torch_tpu.lowered_ops())


def handled(name: str) -> bool:
    """True when a call to `name` with tpu tensors reaches a tpu kernel or a
    composite kernel (which may still call a missing op)."""
    return classify(name)[0] in ("lowered", "native", "composite", "decomposed", "metadata")


def overload_name(op) -> str:
    """'aten::add.Tensor' for torch.ops.aten.add.Tensor; 'aten::relu' for .default."""
    return op.name()


def tolerance_key(name: str) -> str:
    """The tolerance table is keyed by operator name without overload."""
    return name.split(".", 1)[0]
