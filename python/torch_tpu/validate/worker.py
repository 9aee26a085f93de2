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
    # Drawn past the modes below, which remake a model's own draws.
    with torch._C.DisableTorchFunction():
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


# Random draws a model may make in `forward` (ViTMAE's patch mask, VITS's
# noise). Each run (the CPU's float32 one, its float64 reference, tpu's)
# starts from the same CPU generator state and makes its draws as the
# float32 CPU run does, so all of them see the same numbers: the tpu
# generator is another stream, and runs on different numbers compare nothing.
_FACTORIES = (torch.rand, torch.randn, torch.randint, torch.randperm, torch.normal)
_LIKE = (torch.rand_like, torch.randn_like, torch.randint_like)
_IN_PLACE = (torch.Tensor.uniform_, torch.Tensor.normal_, torch.Tensor.bernoulli_, torch.Tensor.random_,
             torch.Tensor.exponential_, torch.Tensor.cauchy_, torch.Tensor.log_normal_, torch.Tensor.geometric_)


def _draw_as_the_cpu_run(func, args, kwargs, float64=False):
    """func's draw made on the CPU (in float32 where float64 was asked, with
    `float64`), then put where and in the type it was asked for."""
    if func in _FACTORIES:
        k = dict(kwargs, device="cpu")
        if float64 and k.get("dtype") == torch.float64:
            k["dtype"] = torch.float32
        out = func(*args, **k)
        wide = float64 and out.is_floating_point()
        return out.to(kwargs.get("device") or "cpu", torch.float64 if wide else out.dtype)
    target = args[0]
    dtype = torch.float32 if float64 and target.dtype == torch.float64 else target.dtype
    drawn = func(torch.empty_like(target, device="cpu", dtype=dtype), *args[1:], **kwargs)
    if func in _LIKE:
        return drawn.to(target.device, target.dtype)
    with torch.no_grad():
        target.copy_(drawn)
    return target


def _draws_on_tpu(func, args, kwargs):
    if func in _FACTORIES:
        device = kwargs.get("device")
        return device is not None and torch.device(device).type == "tpu"
    return (func in _LIKE or func in _IN_PLACE) and isinstance(args[0], torch.Tensor) and args[0].device.type == "tpu"


class _DrawOnCpu(TorchFunctionMode):
    """The tpu run's random draws come from the CPU generator."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if _draws_on_tpu(func, args, kwargs):
            return _draw_as_the_cpu_run(func, args, kwargs)
        return func(*args, **kwargs)


class _Float64Everywhere(TorchFunctionMode):
    """Makes what a model casts to float32 (`.float()`, dtype=torch.float32:
    FastSpeech2's masks and durations) float64 instead, so that a model that
    casts runs in float64 all the same; its random draws are the float32
    run's."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in _FACTORIES or func in _LIKE or func in _IN_PLACE:
            return _draw_as_the_cpu_run(func, args, kwargs or {}, float64=True)
        if func is torch.Tensor.float:
            func = torch.Tensor.double
        args, kwargs = tree_map(lambda a: torch.float64 if a is torch.float32 else a, (args, kwargs or {}))
        return func(*args, **kwargs)


def _float64_reference(model, inputs, rng):
    """Outputs and gradients of the model in float64 on the CPU (converted in
    place: its float32 run is done), drawing what the float32 run drew (from
    generator state `rng`); None when it does not run in float64."""
    try:
        model.zero_grad(set_to_none=True)
        torch.set_rng_state(rng)
        with _Float64Everywhere():
            return _forward_backward(model.double(), _map_tensors(
                inputs, lambda t: t.double() if t.is_floating_point() else t))
    except Exception:
        return None


def _error(e):
    text = "".join(traceback.format_exception_only(type(e), e)).strip()
    return text[:2000]


def _compiling(before):
    """Seconds spent compiling and programs compiled since the metrics
    `before` (the runtime counts both; a persistent-cache hit is no compile)."""
    now = torch_tpu.metrics()
    return dict(compile_seconds=now["compile_seconds"] - before["compile_seconds"],
                programs_compiled=now["graphs_compiled"] - before["graphs_compiled"])


def _tpu_run(pristine, inputs, mode, cpu_out, cpu_grads, ops, float64, rng):
    result = {}
    tol = compare.tolerance(torch.float32, ops)
    before = torch_tpu.metrics()
    start = time.perf_counter()
    try:
        tpu_model = copy.deepcopy(pristine).to("tpu")
        if mode == "compile":
            torch_tpu.set_eager_mode("strict")
            runner = torch.compile(tpu_model, backend="tpu")
        else:
            torch_tpu.set_eager_mode(mode)
            runner = None
        torch.set_rng_state(rng)
        with _DrawOnCpu():
            tpu_out, tpu_grads = _forward_backward(tpu_model, _to(inputs, "tpu"), runner)
        torch.tpu.synchronize()
    except Exception as e:
        message = _error(e)
        return dict(status="tpu_error", error=message, missing_ops=compare.missing_ops(message),
                    seconds=time.perf_counter() - start, **_compiling(before))
    result["seconds"] = time.perf_counter() - start
    result.update(_compiling(before))
    out = compare.differences(tpu_out, cpu_out, ops)
    grad = compare.differences(tpu_grads, cpu_grads, ops)
    ok = out["ok"] and grad["ok"]
    if not ok and not out["nan"] and not grad["nan"]:
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
        rng = torch.get_rng_state()  # each run's random draws start here
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
            reference.append(_float64_reference(model, inputs, rng))
        return reference[0]

    for mode in modes:
        result = _tpu_run(pristine, inputs, mode, cpu_out, cpu_grads, recorder.ops, float64, rng)
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
