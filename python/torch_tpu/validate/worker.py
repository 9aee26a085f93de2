"""Runs one model in one mode and writes its result as JSON.

`python -m torch_tpu.validate.worker SPEC_JSON MODE OUT_JSON`. The command line
runs each worker in a subprocess of its own, so a crash or a hang costs one row.
"""
import copy
import json
import sys
import time
import traceback

import torch

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


def _float64_reference(model, inputs):
    """Outputs and gradients of the model in float64 on the CPU (converted in
    place: its float32 run is done); None when it does not run in float64."""
    try:
        model.zero_grad(set_to_none=True)
        return _forward_backward(model.double(), _map_tensors(
            inputs, lambda t: t.double() if t.is_floating_point() else t))
    except Exception:
        return None


def _error(e):
    text = "".join(traceback.format_exception_only(type(e), e)).strip()
    return text[:2000]


def run(spec, mode):
    result = {"name": spec["name"], "cls": spec.get("cls"), "mode": mode}
    torch.manual_seed(0)
    start = time.perf_counter()
    try:
        model, inputs = models.build(spec)
        model = model.float().eval()
        tpu_model = copy.deepcopy(model)
        recorder = compare.OpRecorder()
        with recorder:
            cpu_out, cpu_grads = _forward_backward(model, inputs)
    except Exception as e:
        result.update(status="cpu_error", error=_error(e), seconds=time.perf_counter() - start)
        return result
    result["cpu_seconds"] = time.perf_counter() - start
    start = time.perf_counter()
    try:
        tpu_model.to("tpu")
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
        result.update(status="tpu_error", error=message, missing_ops=compare.missing_ops(message),
                      seconds=time.perf_counter() - start)
        return result
    result["seconds"] = time.perf_counter() - start
    out = compare.differences(tpu_out, cpu_out, recorder.ops)
    grad = compare.differences(tpu_grads, cpu_grads, recorder.ops)
    ok = out["ok"] and grad["ok"]
    if not ok:
        # Beyond the table: the CPU's float32 is not the truth either. Ask a
        # float64 run whether tpu is as close to it as the CPU is, for the
        # tensors past the table.
        ref = _float64_reference(model, inputs)
        if ref is not None:
            ok = (compare.no_worse_than_cpu(tpu_out, cpu_out, ref[0], names=out["failed"]) and
                  compare.no_worse_than_cpu(tpu_grads, cpu_grads, ref[1], names=grad["failed"]))
            result["judged_by_float64"] = ok
    result.update(
        status="match" if ok else "mismatch",
        out_max_abs=out["max_abs"], out_max_rel=out["max_rel"], out_worst=out["worst"],
        grad_max_abs=grad["max_abs"], grad_max_rel=grad["max_rel"], grad_worst=grad["worst"],
        tolerance=list(compare.tolerance(torch.float32, recorder.ops)),
        n_outputs=len(cpu_out), n_grads=len(cpu_grads))
    return result


def main(argv):
    spec, mode, out_path = json.loads(argv[0]), argv[1], argv[2]
    result = run(spec, mode)
    with open(out_path, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1:])
