"""Runs one model in the modes asked for and writes one JSON line per mode.

`python -m torch_tpu.validate.worker SPEC_JSON MODES OUT_JSONL`. The command
line runs each model in a process of its own (forked from it, or this
module's command line), so a crash or a hang costs that model's rows.
"""
import copy
import json
import os
import sys
import time
import traceback

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_map

import torch_tpu
from torch_tpu.validate import compare, models


def _projection(t):
    # Fixed random weights, the same on every device and in every run. A
    # plain sum of an output that ends in a LayerNorm has gradients that are
    # zero but for rounding, and comparing rounding noise says nothing.
    g = torch.Generator().manual_seed(1234)
    return torch.randn(t.shape, generator=g, dtype=torch.float64).to(t.device, t.dtype)


def _forward_backward(model, inputs, runner=None):
    """Outputs and parameter gradients of model, called through runner (its
    torch.compile wrapper, whose parameter names differ); the backward takes
    the loss when the model returns one, else a fixed random projection of
    its first floating output."""
    runner = model if runner is None else runner
    out = runner(**inputs) if isinstance(inputs, dict) else runner(*inputs)
    tensors = compare.float_tensors(out)
    if not tensors:
        raise RuntimeError("the model returned no floating-point tensor")
    loss = getattr(out, "loss", None) if not isinstance(out, torch.Tensor) else None
    if not isinstance(loss, torch.Tensor):
        first = tensors[0][1]
        loss = (first * _projection(first)).sum()
    loss.backward()
    outputs = {name: t.detach().cpu() for name, t in tensors}
    grads = {name: p.grad.detach().cpu() for name, p in model.named_parameters()
             if p.grad is not None}
    return outputs, grads


def _map_tensors(inputs, fn):
    if isinstance(inputs, dict):
        return {k: fn(v) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
    return tuple(fn(v) if isinstance(v, torch.Tensor) else v for v in inputs)


def _to(inputs, device):
    return _map_tensors(inputs, lambda t: t.to(device))


class _Float64Everywhere(TorchFunctionMode):
    """Makes what a model casts to float32 (`.float()`, dtype=torch.float32:
    FastSpeech2's masks and durations) float64 instead, so that a model that
    casts runs in float64 all the same."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.Tensor.float:
            func = torch.Tensor.double
        args, kwargs = tree_map(lambda a: torch.float64 if a is torch.float32 else a, (args, kwargs or {}))
        return func(*args, **kwargs)


def _float64_reference(model, inputs):
    """Outputs and gradients of the model in float64 on the CPU (converted in
    place: its float32 run is done); None when it does not run in float64."""
    try:
        model.zero_grad(set_to_none=True)
        with _Float64Everywhere():
            return _forward_backward(model.double(), _map_tensors(
                inputs, lambda t: t.double() if t.is_floating_point() else t))
    except Exception:
        return None


def _error(e):
    text = "".join(traceback.format_exception_only(type(e), e)).strip()
    return text[:2000]


def _tpu_run(pristine, inputs, mode, cpu_out, cpu_grads, ops, float64):
    result = {}
    tol = compare.tolerance(torch.float32, ops)
    start = time.perf_counter()
    try:
        tpu_model = copy.deepcopy(pristine).to("tpu")
        if mode == "compile":
            torch_tpu.set_eager_mode("strict")
            runner = torch.compile(tpu_model, backend="tpu")
        else:
            torch_tpu.set_eager_mode(mode)
            runner = None
        tpu_out, tpu_grads = _forward_backward(tpu_model, _to(inputs, "tpu"), runner)
        torch.tpu.synchronize()
    except Exception as e:
        message = _error(e)
        return dict(status="tpu_error", error=message, missing_ops=compare.missing_ops(message),
                    seconds=time.perf_counter() - start)
    result["seconds"] = time.perf_counter() - start
    out = compare.differences(tpu_out, cpu_out, ops)
    grad = compare.differences(tpu_grads, cpu_grads, ops)
    ok = out["ok"] and grad["ok"]
    if not ok:
        # Beyond the table: the CPU's float32 is not the truth either. Ask a
        # float64 run whether tpu is as close to it as the CPU is, for the
        # tensors past the table.
        ref = float64()
        if ref is not None:
            ok = (compare.no_worse_than_cpu(tpu_out, cpu_out, ref[0], names=out["failed"], rtol=tol[0]) and
                  compare.no_worse_than_cpu(tpu_grads, cpu_grads, ref[1], names=grad["failed"], rtol=tol[0]))
            result["judged_by_float64"] = ok
    result.update(
        status="match" if ok else "mismatch",
        out_max_abs=out["max_abs"], out_max_rel=out["max_rel"], out_worst=out["worst"],
        grad_max_abs=grad["max_abs"], grad_max_rel=grad["max_rel"], grad_worst=grad["worst"],
        tolerance=list(tol),
        n_outputs=len(cpu_out), n_grads=len(cpu_grads))
    return result


def run_modes(spec, modes, emit):
    """Runs the model in each mode in turn and calls emit(result) after each.
    The model, its inputs and the CPU's run are made once for all modes: each
    mode starts from a copy of the model as built."""
    base = {"name": spec["name"], "cls": spec.get("cls")}
    torch.manual_seed(0)
    start = time.perf_counter()
    try:
        model, inputs = models.build(spec)
        model = model.float().eval()
        pristine = copy.deepcopy(model)
        recorder = compare.OpRecorder()
        with recorder:
            cpu_out, cpu_grads = _forward_backward(model, inputs)
    except Exception as e:
        for mode in modes:
            emit(dict(base, mode=mode, status="cpu_error", error=_error(e),
                      seconds=time.perf_counter() - start))
        return
    cpu_seconds = time.perf_counter() - start
    reference = []

    def float64():
        if not reference:  # once: it converts the CPU model in place
            reference.append(_float64_reference(model, inputs))
        return reference[0]

    for mode in modes:
        result = _tpu_run(pristine, inputs, mode, cpu_out, cpu_grads, recorder.ops, float64)
        emit(dict(base, mode=mode, cpu_seconds=cpu_seconds, **result))


def write_line(fd, result):
    """One result as one JSON line, in one write, so a reader never sees half."""
    os.write(fd, (json.dumps(result) + "\n").encode())


def main(argv):
    spec, modes, out_path = json.loads(argv[0]), argv[1].split(","), argv[2]
    fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    run_modes(spec, modes, lambda r: write_line(fd, r))


if __name__ == "__main__":
    main(sys.argv[1:])
