"""OpInfo coverage harness: PyTorch's own op database, run on `tpu` against the CPU.

For one OpInfo and one dtype, `run_opinfo` takes the OpInfo's `sample_inputs`
(and the extra `reference_inputs`, when it has them), and for each sample:

1. runs the op on the CPU under a TorchDispatchMode that records every
   `aten::` overload it dispatches (after autograd and CompositeImplicit
   decomposition, i.e. exactly what a backend receives); the backward pass
   (`torch.autograd.grad` with a fixed random cotangent) is recorded too;
2. classifies those overloads with claims.classify (lowered / native /
   composite / missing, read from the dispatcher): the sample is *claimed*
   when none is missing;
3. runs the same sample on `tpu` (no CPU fallback: TORCH_TPU_CPU_FALLBACK must
   be unset; a NotImplementedError is a *missing* lowering) and compares every
   output, then every input gradient, with the CPU's, using the one tolerance
   table, `torch_tpu._C._tolerance(dtype, op)`: the loosest entry among the
   recorded ops, for the dtype of each compared tensor.

A result that misses the CPU's own result is judged a second time by the CPU
result computed in float64 (DESIGN.md: "the CPU result in float64-or-native
precision is the reference"); passing that is a pass, noted in the record.
It must match it rounded to its type, or be, element by element, within the
table's tolerance of it or no further from it than twice the CPU's own error
(see _judge_by_float64).

Statuses per sample and direction: pass, fail, missing (NotImplementedError,
or an unclaimed overload), skip (with a written reason), n/a (no backward).

Where PyTorch leaves the choice among equal values open (sort and argsort
without stable=True, msort, kthvalue's and topk's indices), tpu may pick another of the
tied elements than the CPU: such an index output passes when it selects the
same values (and, for a sort, is a permutation), and a gradient passes when
each slice along the dimension holds the same (value, gradient) pairs as the
CPU's, which is what an equally valid choice among ties gives.
"""
from __future__ import annotations

import itertools
import math
import os
import traceback

import numpy as np
import torch
import torch_tpu
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

from claims import classify, tolerance_key

DEVICE = "tpu"

# The dtypes of the issue; float64 and complex64 run "where supported".
DTYPES = [
    torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.int16,
    torch.int8, torch.uint8, torch.bool, torch.float64, torch.complex64,
]
LOW_PRECISION = (torch.float16, torch.bfloat16)

# OpInfos (by key; None = every dtype) that are not compared, each with its reason.
SKIPS: dict[str, str] = {
    "empty": "returns uninitialized memory: values are not comparable",
    "empty_like": "returns uninitialized memory: values are not comparable",
    "new_empty": "returns uninitialized memory: values are not comparable",
    "new_empty_strided": "returns uninitialized memory: values are not comparable",
    "empty_strided": "returns uninitialized memory: values are not comparable",
    "empty_permuted": "returns uninitialized memory: values are not comparable",
    "nn.functional.dropout": "random: the tpu generator is not the CPU's (compare distributions elsewhere)",
    "torch._C._nn.rrelu": "random: the tpu generator is not the CPU's",
    "nn.functional.rrelu": "random: the tpu generator is not the CPU's",
    "bernoulli": "random: the tpu generator is not the CPU's",
    "multinomial": "random: the tpu generator is not the CPU's",
    "normal": "random: the tpu generator is not the CPU's",
    "normal.number_mean": "random: the tpu generator is not the CPU's",
    "uniform": "random: the tpu generator is not the CPU's",
    "randint": "random: the tpu generator is not the CPU's",
    "randint_like": "random: the tpu generator is not the CPU's",
    "randn": "random: the tpu generator is not the CPU's",
    "randn_like": "random: the tpu generator is not the CPU's",
    "rand_like": "random: the tpu generator is not the CPU's",
    "cauchy": "random: the tpu generator is not the CPU's",
    "exponential": "random: the tpu generator is not the CPU's",
    "geometric": "random: the tpu generator is not the CPU's",
    "log_normal": "random: the tpu generator is not the CPU's",
    "torch.randperm": "random: the tpu generator is not the CPU's",
    "nn.functional.feature_alpha_dropout.with_train": "random: the tpu generator is not the CPU's",
    "nn.functional.feature_alpha_dropout.without_train": "random: the tpu generator is not the CPU's",
    "nn.functional.alpha_dropout": "random: the tpu generator is not the CPU's",
    "nn.functional.dropout2d": "random: the tpu generator is not the CPU's",
    "nn.functional.dropout3d": "random: the tpu generator is not the CPU's",
    "nn.functional.fractional_max_pool2d": "random: the tpu generator is not the CPU's",
    "nn.functional.fractional_max_pool3d": "random: the tpu generator is not the CPU's",
    "nn.functional.scaled_dot_product_attention": "random when dropout_p > 0 in its samples",
    "sparse.sampled_addmm": "sparse layouts are not supported by the tpu backend (strided only)",
    "sparse.mm.reduce": "sparse layouts are not supported by the tpu backend (strided only)",
    "to_sparse": "sparse layouts are not supported by the tpu backend (strided only)",
    "item": "returns a Python number read through _local_scalar_dense: covered by tests/test_copy.py",
    "resize_": "resizes in place leaving new elements uninitialized",
    "resize_as_": "resizes in place leaving new elements uninitialized",
    "pin_memory": "CPU-only: pinned host memory",
}

def _sort_args(s):
    dim = s.kwargs.get("dim", s.args[0] if s.args else -1)
    return dim, bool(s.kwargs.get("stable", False)), True


def _kthvalue_args(s):
    dim = s.kwargs.get("dim", s.args[1] if len(s.args) > 1 else -1)
    return dim, False, bool(s.kwargs.get("keepdim", s.args[2] if len(s.args) > 2 else False))


def _topk_args(s):
    return s.kwargs.get("dim", s.args[1] if len(s.args) > 1 else -1), False, True


# OpInfos whose choice among equal values is unspecified: sample -> (dim,
# stable, keepdim), and which outputs are indices.
TIE_FREE: dict[str, tuple] = {
    "argsort": (_sort_args, {0}),
    "kthvalue": (_kthvalue_args, {1}),
    "msort": (lambda s: (0, False, True), set()),
    "sort": (_sort_args, {1}),
    "topk": (_topk_args, {1}),
}


# Ops whose recorded overloads carry this tag are random.
_RANDOM_TAG = torch.Tag.nondeterministic_seeded


def key_of(op) -> str:
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


class OpRecorder(TorchDispatchMode):
    """Records the aten overloads dispatched inside the block (backend view)."""

    def __init__(self):
        super().__init__()
        self.ops: list = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func)
        return func(*args, **(kwargs or {}))


def _dtype_name(dt: torch.dtype) -> str:
    return str(dt).replace("torch.", "")


def tolerance(dtype: torch.dtype, op_names) -> tuple[float, float]:
    """The loosest (rtol, atol) of the table among the recorded ops."""
    dn = _dtype_name(dtype)
    rtol, atol = torch_tpu._C._tolerance(dn, "")
    for n in op_names:
        r, a = torch_tpu._C._tolerance(dn, tolerance_key(n))
        rtol, atol = max(rtol, r), max(atol, a)
    return rtol, atol


def describe(sample) -> str:
    """A short text for a sample: tensor shapes/dtypes and other arguments."""

    def d(x):
        if isinstance(x, torch.Tensor):
            s = f"T{list(x.shape)}"
            if not x.is_contiguous() and x.numel() > 1:
                s += "(nc)"
            return s
        if isinstance(x, (list, tuple)):
            return "[" + ",".join(d(e) for e in x) + "]"
        if isinstance(x, torch.dtype):
            return _dtype_name(x)
        r = repr(x)
        return r if len(r) < 24 else r[:21] + "..."

    parts = [d(sample.input)] + [d(a) for a in sample.args]
    parts += [f"{k}={d(v)}" for k, v in sample.kwargs.items()]
    return "(" + ", ".join(parts) + ")"


# Positional arguments an op requires on the CPU whatever the device (as on
# CUDA; the OpInfo makes them with device="cpu"): they stay there.
HOST_ARGS: dict[str, tuple[int, ...]] = {
    "tensor_split": (0,),
}


def _to_device(sample, device, host_args=()):
    def f(t):
        if isinstance(t, torch.Tensor):
            out = t.detach().to(device) if device != "cpu" else t.detach().clone()
            return out.requires_grad_(t.requires_grad)
        return t

    host = {i: sample.args[i] for i in host_args if i < len(sample.args)}
    s = sample.transform(f)
    if host:
        s.args = tuple(host.get(i, a) for i, a in enumerate(s.args))
    for k, v in list(s.kwargs.items()):
        if k == "device" and v is not None:
            s.kwargs[k] = device
    return s


# The widest type of each family: the reference computes in it.
_WIDE = {torch.float16: torch.float64, torch.bfloat16: torch.float64, torch.float32: torch.float64,
         torch.complex64: torch.complex128}


def _to_float64(sample, grad=False):
    """The sample with its floating and complex tensors (and dtype arguments)
    in float64 / complex128; with grad, tensors keep requiring grad."""
    def f(t):
        if isinstance(t, torch.Tensor):
            u = t.detach().to(_WIDE.get(t.dtype, t.dtype))
            return u.requires_grad_(t.requires_grad) if grad else u
        return _WIDE.get(t, t) if isinstance(t, torch.dtype) else t

    return sample.transform(f)


def _grad_inputs(sample):
    leaves, _ = tree_flatten((sample.input, sample.args, sample.kwargs))
    return [t for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad]


def _diff_outputs(sample, out):
    leaves, _ = tree_flatten(sample.output_process_fn_grad(out))
    return [t for t in leaves if isinstance(t, torch.Tensor) and t.grad_fn is not None
            and (t.dtype.is_floating_point or t.dtype.is_complex)]


def _cotangents(outs):
    g = torch.Generator().manual_seed(1234)
    res = []
    for t in outs:
        real = t.dtype.to_real() if t.dtype.is_complex else t.dtype
        c = torch.rand(t.shape, generator=g, dtype=torch.float32).to(real)
        if t.dtype.is_complex:
            c = torch.complex(c, c.flip(-1) if c.dim() else c).to(t.dtype)
        res.append(c)
    return res


class Mismatch(AssertionError):
    pass


def compare(actual, expected, op_names, what="output"):
    """Compares two output structures (tpu vs CPU); raises Mismatch."""
    a_leaves, a_spec = tree_flatten(actual)
    e_leaves, e_spec = tree_flatten(expected)
    if len(a_leaves) != len(e_leaves):
        raise Mismatch(f"{what}: {len(a_leaves)} values on tpu, {len(e_leaves)} on the CPU")
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
        where = f"{what}[{i}]" if len(e_leaves) > 1 else what
        if isinstance(e, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                raise Mismatch(f"{where}: tpu returned {type(a).__name__}, CPU a tensor")
            if a.device.type != DEVICE and e.numel() > 0 and a.device.type != e.device.type:
                raise Mismatch(f"{where}: result on {a.device}, expected tpu")
            if e.is_sparse or e.layout != torch.strided:
                raise Mismatch(f"{where}: CPU returned a {e.layout} tensor")
            rtol, atol = tolerance(e.dtype, op_names)
            a_host = a.detach().cpu()
            try:
                torch.testing.assert_close(a_host, e.detach(), rtol=rtol, atol=atol, equal_nan=True,
                                           check_device=False, check_stride=False, check_layout=False)
            except AssertionError as err:
                msg = str(err).strip().splitlines()
                raise Mismatch(f"{where}: " + " ".join(l.strip() for l in msg[:4])) from None
        elif isinstance(e, float):
            if not (isinstance(a, (float, int)) and (math.isclose(a, e, rel_tol=1e-5, abs_tol=1e-6)
                                                     or (math.isnan(a) and math.isnan(e)))):
                raise Mismatch(f"{where}: {a!r} != {e!r}")
        elif isinstance(e, (int, bool, torch.dtype, torch.Size, str, type(None))):
            if a != e:
                raise Mismatch(f"{where}: {a!r} != {e!r}")
        elif isinstance(e, torch.device):
            pass
        else:
            if a != e:
                raise Mismatch(f"{where}: {a!r} != {e!r}")


def _same_up_to_ties(key, cpu_s, actual, expected, op_names, grads=False) -> bool:
    """True when tpu's outputs (or input gradients) differ from the CPU's only
    by another choice among equal values (TIE_FREE)."""
    if key not in TIE_FREE:
        return False
    args_of, index_outputs = TIE_FREE[key]
    dim, stable, keepdim = args_of(cpu_s)
    x = cpu_s.input.detach()
    if stable or x.dim() == 0:
        return False
    a_leaves, e_leaves = tree_flatten(actual)[0], tree_flatten(expected)[0]
    try:
        for i, (a, e) in enumerate(zip(a_leaves, e_leaves)):
            if grads:
                _same_pairs(x, a.detach().cpu(), e, dim, op_names)
            elif i in index_outputs:
                a = a.detach().cpu()
                if not keepdim:
                    a, e = a.unsqueeze(dim), e.unsqueeze(dim)
                torch.testing.assert_close(x.gather(dim, a), x.gather(dim, e), rtol=0, atol=0, equal_nan=True)
                if a.shape == x.shape:  # a sort: every position once
                    want = torch.arange(x.shape[dim]).view([-1] + [1] * (x.dim() - 1 - dim % x.dim()))
                    torch.testing.assert_close(a.sort(dim).values, want.expand_as(a))
            else:
                compare(a, e, op_names)
        return len(a_leaves) == len(e_leaves)
    except AssertionError:
        return False


def _same_pairs(x, g_a, g_e, dim, op_names):
    """Each slice along dim holds the same (value, gradient) pairs."""
    def rows(g):
        xs = x.to(torch.float64).movedim(dim, -1).reshape(-1, x.shape[dim]).numpy()
        gs = g.to(torch.float64).movedim(dim, -1).reshape(-1, x.shape[dim]).numpy()
        order = np.lexsort((gs, xs), axis=-1)
        return torch.from_numpy(np.take_along_axis(gs, order, -1))

    rtol, atol = tolerance(g_e.dtype, op_names)
    torch.testing.assert_close(rows(g_a), rows(g_e), rtol=rtol, atol=atol)


def _note(rec, text):
    rec.setdefault("notes", []).append(text)


def _err(e: BaseException) -> str:
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {first[:300]}"


def run_sample(op, sample, dtype, want_grad):
    """One sample: returns a dict record (see module doc)."""
    rec = {"sample": describe(sample), "fwd": "skip", "bwd": "n/a", "reason": "", "aten": [], "aten_bwd": []}
    # ---- CPU reference, recorded.
    cpu_s = _to_device(sample, "cpu")
    rec_fwd, rec_bwd = OpRecorder(), OpRecorder()
    try:
        with rec_fwd:
            cpu_out = op(cpu_s.input, *cpu_s.args, **cpu_s.kwargs)
    except Exception as e:  # noqa: BLE001
        rec["reason"] = "CPU reference raised " + _err(e)
        return rec
    fwd_names = sorted({f.name() for f in rec_fwd.ops})
    rec["aten"] = fwd_names
    if any(_RANDOM_TAG in f.tags for f in rec_fwd.ops):
        rec["reason"] = "random op (nondeterministic_seeded): the tpu generator is not the CPU's"
        return rec
    cpu_grads = None
    grad_inputs_cpu = _grad_inputs(cpu_s) if want_grad else []
    outs_cpu = _diff_outputs(cpu_s, cpu_out) if grad_inputs_cpu else []
    if outs_cpu:
        try:
            cots = _cotangents(outs_cpu)
            with rec_bwd:
                cpu_grads = torch.autograd.grad(outs_cpu, grad_inputs_cpu, cots, allow_unused=True)
            rec["aten_bwd"] = sorted({f.name() for f in rec_bwd.ops})
        except Exception as e:  # noqa: BLE001
            rec["bwd"] = "skip"
            rec["bwd_reason"] = "CPU backward raised " + _err(e)
            cpu_grads = None
    missing = [n for n in fwd_names if classify(n)[0] == "missing"]
    # ---- tpu.
    tpu_s = _to_device(sample, DEVICE, host_args=HOST_ARGS.get(key_of(op), ()))
    try:
        tpu_out = op(tpu_s.input, *tpu_s.args, **tpu_s.kwargs)
        compare(tpu_out, cpu_out, fwd_names)
        rec["fwd"] = "pass"
    except NotImplementedError as e:
        rec["fwd"] = "missing"
        rec["reason"] = _err(e)
        rec["missing"] = missing
        return rec
    except Mismatch as e:
        if _matches_float64(op, sample, tpu_out, cpu_out, fwd_names):
            rec["fwd"] = "pass"
            _note(rec, "judged by the float64 CPU result (" + _dtype_name(dtype) + ")")
        elif _same_up_to_ties(key_of(op), cpu_s, tpu_out, cpu_out, fwd_names):
            rec["fwd"] = "pass"
            _note(rec, "indices pick other elements among equal values than the CPU's")
        else:
            rec["fwd"] = "fail"
            rec["reason"] = str(e)[:400]
    except Exception as e:  # noqa: BLE001
        if "cannot be held by the PJRT plugin" in str(e):
            rec["reason"] = "a dtype the PJRT plugin cannot hold: " + _err(e)[:160]
            return rec  # fwd stays "skip"
        rec["fwd"] = "fail"
        rec["reason"] = "tpu raised " + _err(e)
        return rec
    if missing and rec["fwd"] == "pass":
        _note(rec, "ran although unclaimed: " + ", ".join(missing))
    # ---- backward.
    if cpu_grads is None:
        return rec
    bwd_names = sorted(set(rec["aten_bwd"]))
    try:
        g_in = _grad_inputs(tpu_s)
        outs = _diff_outputs(tpu_s, tpu_out)
        if len(outs) != len(outs_cpu):
            raise Mismatch(f"{len(outs)} differentiable outputs on tpu, {len(outs_cpu)} on the CPU")
        cots = [c.to(o.device) for c, o in zip(_cotangents(outs_cpu), outs)]  # x.to("cpu") ends on the CPU
        tpu_grads = torch.autograd.grad(outs, g_in, cots, allow_unused=True)
        compare([g if g is not None else None for g in tpu_grads], list(cpu_grads),
                bwd_names + fwd_names, "grad")
        rec["bwd"] = "pass"
    except NotImplementedError as e:
        rec["bwd"] = "missing"
        rec["bwd_reason"] = _err(e)
    except Mismatch as e:
        if _grads_match_float64(op, sample, tpu_grads, cpu_grads, bwd_names + fwd_names):
            rec["bwd"] = "pass"
            _note(rec, "gradients judged by the float64 CPU gradients (" + _dtype_name(dtype) + ")")
        elif _same_up_to_ties(key_of(op), cpu_s, tpu_grads, list(cpu_grads), bwd_names + fwd_names, grads=True):
            rec["bwd"] = "pass"
            _note(rec, "gradients go to other elements among equal values than the CPU's")
        else:
            rec["bwd"] = "fail"
            rec["bwd_reason"] = str(e)[:400]
    except Exception as e:  # noqa: BLE001
        if _cpu_backward_raises(op, sample) == _err(e):
            rec["bwd"] = "pass"
            _note(rec, "raises the CPU's own error outside the recording mode: " + _err(e))
        else:
            rec["bwd"] = "fail"
            rec["bwd_reason"] = "tpu raised " + _err(e)
    return rec


def _cpu_backward_raises(op, sample):
    """The CPU backward's error without the OpRecorder (None if it runs). Some
    backward formulas raise outside a dispatch mode and run inside one (the
    mode sends them through other decompositions), so the recorded reference
    can succeed where the CPU itself raises."""
    cpu_s = _to_device(sample, "cpu")
    try:
        outs = _diff_outputs(cpu_s, op(cpu_s.input, *cpu_s.args, **cpu_s.kwargs))
        torch.autograd.grad(outs, _grad_inputs(cpu_s), _cotangents(outs), allow_unused=True)
    except Exception as e:  # noqa: BLE001
        return _err(e)
    return None


def _matches_float64(op, sample, tpu_out, cpu_out, names) -> bool:
    try:
        s64 = _to_float64(_to_device(sample, "cpu"))
        with torch.no_grad():
            ref = op(s64.input, *s64.args, **s64.kwargs)
        return _judge_by_float64(tree_flatten(tpu_out)[0], tree_flatten(cpu_out)[0], tree_flatten(ref)[0], names)
    except Exception:  # noqa: BLE001
        return False


def _grads_match_float64(op, sample, tpu_grads, cpu_grads, names) -> bool:
    try:
        s64 = _to_float64(_to_device(sample, "cpu"), grad=True)
        outs = _diff_outputs(s64, op(s64.input, *s64.args, **s64.kwargs))
        ref = torch.autograd.grad(outs, _grad_inputs(s64), _cotangents(outs), allow_unused=True)
        return _judge_by_float64(list(tpu_grads), list(cpu_grads), list(ref), names, "grad")
    except Exception:  # noqa: BLE001
        return False


# How much further than the CPU's own float32 result tpu may be from the
# float64 one (the validator's judge, torch_tpu.validate.compare, uses 2 too).
FLOAT64_SLACK = 2.0


def _judge_by_float64(actual, expected, reference, names, what="output") -> bool:
    """The float64 reference decides what the table comparison with the CPU
    failed. A result passes when it matches the float64 result rounded to its
    type (within the table's tolerance), or when every element is within the
    tolerance of float64 or no further from it than FLOAT64_SLACK times the
    CPU's own error there (an ill-conditioned op rounds differently in every
    implementation, and a half-type kernel may round less often than the
    CPU's)."""
    if len(actual) != len(reference):
        return False
    try:
        return all(_within_float64(a, e, r, names, what) for a, e, r in zip(actual, expected, reference))
    except Mismatch:
        return False


def _within_float64(a, e, r, names, what) -> bool:
    if not isinstance(r, torch.Tensor) or not isinstance(a, torch.Tensor):
        if a is not None or r is not None:
            compare(a, r, names, what)
        return True
    if a.dtype in LOW_PRECISION:
        try:
            compare(a, r.to(a.dtype), names, what)
            return True
        except Mismatch:
            pass  # judged element by element below
    rtol, atol = tolerance(a.dtype, names)
    a, e, r = (t.detach().cpu().to(torch.complex128 if t.is_complex() else torch.float64) for t in (a, e, r))
    if a.shape != r.shape:
        return False

    def err(t):
        return torch.where(t == r, torch.zeros_like(r.real), (t - r).abs())

    ok = err(a) <= atol + rtol * r.abs() + FLOAT64_SLACK * err(e)
    ok |= torch.isnan(a) & torch.isnan(r)
    return bool(ok.all())


def _samples(op, dtype, requires_grad, max_samples):
    """(kind, sample) pairs: sample_inputs, then what reference_inputs adds."""
    n = 0
    seen = 0
    for s in op.sample_inputs("cpu", dtype, requires_grad=requires_grad):
        seen += 1
        if max_samples is None or n < max_samples:
            n += 1
            yield "sample", s
    if op.reference_inputs_func is None:
        return
    m = 0
    # reference_inputs starts with the sample_inputs; what follows is extra.
    for s in itertools.islice(op.reference_inputs("cpu", dtype, requires_grad=requires_grad), seen, None):
        if max_samples is not None and m >= max_samples:
            return
        m += 1
        yield "reference", s


def supported_dtypes(op, dtypes=DTYPES):
    cpu = op.supported_dtypes("cpu")
    return [d for d in dtypes if d in cpu]


def run_opinfo(op, dtype, max_samples=None, max_failures=3):
    """All samples of one OpInfo at one dtype; returns a summary dict."""
    key = key_of(op)
    res = {"op": key, "dtype": _dtype_name(dtype), "fwd": "skip", "bwd": "n/a", "samples": 0,
           "fwd_pass": 0, "fwd_fail": 0, "fwd_missing": 0, "bwd_pass": 0, "bwd_fail": 0, "bwd_missing": 0,
           "aten": [], "aten_bwd": [], "unclaimed": [], "failures": [], "reason": ""}
    if key in SKIPS:
        res["reason"] = SKIPS[key]
        return res
    want_grad = op.supports_autograd and dtype in op.supported_backward_dtypes("cpu") and (
        dtype.is_floating_point or dtype.is_complex)
    fwd_ops, bwd_ops, skipped, notes = set(), set(), [], set()
    torch.manual_seed(0)
    try:
        samples = list(_samples(op, dtype, want_grad, max_samples))
    except Exception as e:  # noqa: BLE001
        if not want_grad:
            res["reason"] = "sample_inputs raised " + _err(e)
            return res
        # Some sample functions refuse requires_grad for their integer/bool arguments.
        try:
            samples = list(_samples(op, dtype, False, max_samples))
        except Exception as e2:  # noqa: BLE001
            res["reason"] = "sample_inputs raised " + _err(e2)
            return res
        want_grad = False
        res["bwd_reason"] = "not compared: sample_inputs(requires_grad=True) raised " + _err(e)
    for kind, s in samples:
        try:
            r = run_sample(op, s, dtype, want_grad)
        except Exception as e:  # noqa: BLE001  (the harness itself must not stop)
            r = {"sample": "?", "fwd": "fail", "bwd": "n/a", "reason": "harness: " + _err(e) +
                 " " + traceback.format_exc(limit=2).replace("\n", " ")[-300:], "aten": [], "aten_bwd": []}
        fwd_ops.update(r["aten"])
        bwd_ops.update(r.get("aten_bwd", []))
        # How samples passed beyond the CPU comparison (the rules above).
        notes.update(n.split(":")[0] for n in r.get("notes", []))
        if r["fwd"] == "skip":
            skipped.append(r["reason"])
            continue
        res["samples"] += 1
        for direction in ("fwd", "bwd"):
            st = r[direction]
            if st in ("pass", "fail", "missing"):
                res[f"{direction}_{st}"] += 1
            if st in ("fail", "missing"):
                reason = r["reason"] if direction == "fwd" else r.get("bwd_reason", "")
                same = [f for f in res["failures"] if f["dir"] == direction and f["reason"] == reason]
                if same:
                    same[0]["count"] += 1
                elif sum(f["dir"] == direction for f in res["failures"]) < max_failures:
                    res["failures"].append({"dir": direction, "status": st, "kind": kind, "sample": r["sample"],
                                            "reason": reason, "count": 1})
    res["aten"] = sorted(fwd_ops)
    res["notes"] = sorted(notes)
    res["aten_bwd"] = sorted(bwd_ops - fwd_ops)
    res["unclaimed"] = sorted(n for n in fwd_ops if classify(n)[0] == "missing")
    res["unclaimed_bwd"] = sorted(n for n in bwd_ops - fwd_ops if classify(n)[0] == "missing")
    res["fwd"] = _summary(res, "fwd")
    res["bwd"] = _summary(res, "bwd") if want_grad else "n/a"
    if res["fwd"] == "skip":
        res["reason"] = skipped[0] if skipped else "no samples for this dtype"
    return res


def _summary(res, d):
    if res[f"{d}_missing"]:
        return "missing"
    if res[f"{d}_fail"]:
        return "fail"
    if res[f"{d}_pass"]:
        return "pass"
    return "skip" if d == "fwd" else "n/a"


def op_by_key():
    from torch.testing._internal.common_methods_invocations import op_db

    out = {}
    for op in op_db:
        out.setdefault(key_of(op), op)
    return out


def check_environment():
    if os.environ.get("TORCH_TPU_CPU_FALLBACK"):
        raise RuntimeError("the OpInfo harness runs with zero CPU fallback: unset TORCH_TPU_CPU_FALLBACK")
