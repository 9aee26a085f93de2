"""Differences between a tpu run and the CPU's, judged by the tolerance table."""
import re

import torch
from torch.utils._python_dispatch import TorchDispatchMode

import torch_tpu


class OpRecorder(TorchDispatchMode):
    """Collects the ATen operator names a run calls: a model's tolerance is the
    loosest entry of the table among the ops it runs."""

    def __init__(self):
        super().__init__()
        self.ops = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(func._schema.name)
        return func(*args, **(kwargs or {}))


def tolerance(dtype, ops):
    rtol, atol = torch_tpu.tolerance(dtype)
    for op in ops:
        r, a = torch_tpu.tolerance(dtype, op)
        rtol, atol = max(rtol, r), max(atol, a)
    return rtol, atol


def float_tensors(value, prefix="out"):
    """[(name, tensor)] of the floating-point tensors in a model output."""
    if isinstance(value, torch.Tensor):
        return [(prefix, value)] if value.is_floating_point() else []
    if hasattr(value, "keys") and hasattr(value, "__getitem__"):
        items = [(k, value[k]) for k in value.keys()]
    elif isinstance(value, (tuple, list)):
        items = list(enumerate(value))
    else:
        return []
    found = []
    for k, v in items:
        found += float_tensors(v, f"{prefix}.{k}")
    return found


def nan_pattern(a, e):
    """How a's NaN positions differ from e's (None where they agree): NaN
    where the CPU has a value is the silent kind of wrong (a padding row's
    gradient), which no tolerance and no float64 judge may pass."""
    extra = int((torch.isnan(a) & ~torch.isnan(e)).sum())
    lost = int((~torch.isnan(a) & torch.isnan(e)).sum())
    if not extra and not lost:
        return None
    return f"{extra} NaN where the CPU has a value, {lost} values where the CPU has NaN"


def differences(actual, expected, ops):
    """Max abs and rel error over pairs of tensors, and whether every pair is
    within the table's (rtol, atol) as assert_close judges it (`failed`: the
    names of those that are not); NaN where the CPU has NaN is equal, and so
    is an infinity where the CPU has the same one. `nan`: the tensors whose
    NaN positions differ from the CPU's, each with how."""
    max_abs = max_rel = 0.0
    failed, nan = [], []
    worst = None
    for name, e in expected.items():
        a = actual.get(name)
        if a is None or a.shape != e.shape:
            return {"max_abs": None, "max_rel": None, "ok": False, "failed": [name], "nan": [],
                    "worst": f"{name}: missing or shape {None if a is None else tuple(a.shape)} "
                             f"!= {tuple(e.shape)}"}
        rtol, atol = tolerance(e.dtype, ops)
        a, e = a.detach().double(), e.detach().double()
        pattern = nan_pattern(a, e)
        if pattern:
            nan.append(f"{name}: {pattern}")
        same = (a == e) | (torch.isnan(a) & torch.isnan(e))
        err = torch.where(same, torch.zeros_like(a), (a - e).abs())
        err = torch.nan_to_num(err, nan=float("inf"))
        if err.numel() == 0:
            continue
        # Relative to |expected| but never to less than atol: near-zero values
        # (a gradient that cancels) would otherwise give meaningless ratios.
        rel = err / torch.nan_to_num(e.abs(), nan=0.0).clamp_min(atol)
        this_abs, this_rel = err.max().item(), rel.max().item()
        if this_abs > max_abs:
            max_abs, worst = this_abs, name
        max_rel = max(max_rel, this_rel)
        if not bool((err <= atol + rtol * torch.nan_to_num(e.abs(), nan=0.0)).all()):
            failed.append(name)
    if nan:
        worst = "; ".join(nan)
    return {"max_abs": max_abs, "max_rel": max_rel, "ok": not failed, "failed": failed, "worst": worst,
            "nan": nan}


def no_worse_than_cpu(actual, expected, reference, slack=2.0, names=None, rtol=None):
    """Whether tpu's error against a float64 reference is within `slack` times
    the CPU's own float32 error against it, tensor by tensor, plus a floor at
    the tensor's scale: a difference from the CPU that is only the CPU's
    rounding is not a mismatch. The floor is `rtol` (the table's) times the
    tensor's largest value, as matmul and reduction error bounds are stated
    norm-wise: the CPU's own error on its worst element may be luckily small.
    Without rtol it is one float32 step. `names`: the tensors to judge
    (default: every one of the reference); a tensor the table already passed
    needs no second judge, and one of denormal values, which XLA flushes to
    zero, would fail this one for a difference far below atol."""
    for name in reference if names is None else names:
        ref, a, e = reference.get(name), actual.get(name), expected.get(name)
        if ref is None:
            return False
        if a is None or e is None or a.shape != ref.shape:
            return False
        ref, a, e = ref.detach().double(), a.detach().double(), e.detach().double()
        if ref.numel() == 0:
            continue
        known = ~torch.isnan(ref)  # where float64 has no value, neither can be judged
        if bool((torch.isnan(a) & known).any()):
            return False
        zero = torch.zeros_like(ref)
        cpu_err = torch.where(known, (e - ref).abs(), zero).nan_to_num(nan=0.0, posinf=0.0)
        tpu_err = torch.where(known, (a - ref).abs(), zero).nan_to_num(posinf=float("inf"))
        ref = torch.where(known, ref, zero)
        floor = (rtol or torch.finfo(torch.float32).eps) * ref.abs().max().item()
        if tpu_err.max().item() > slack * cpu_err.max().item() + floor:
            return False
    return True


_MISSING = (re.compile(r"operator '([\w:.]+)' is not implemented"),
            re.compile(r"without a tpu lowering or decomposition: ([^\n]+?)\. Set"))


def missing_ops(message):
    """Names of the ops without a lowering, as the backend's errors name them."""
    names = []
    for pattern in _MISSING:
        for match in pattern.findall(message):
            for name in match.split(","):
                if name.strip() and name.strip() not in names:
                    names.append(name.strip())
    return names
