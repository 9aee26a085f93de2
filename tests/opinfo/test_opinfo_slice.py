"""CI slice of the OpInfo harness: ~40 common ops x float32 and bfloat16 in strict
mode, and float32 in debug and defer_and_fuse.

Each (op, dtype) runs its first samples (and reference inputs) on tpu and on
the CPU (see harness.py); forward and backward are separate tests reading one
cached run. Known failures are listed in KNOWN with the reason and marked
xfail (not strict: whoever fixes the lowering should delete the entry).
The full run is `make opinfo-full`; `make opinfo-report` writes the report.
"""
import functools
import os
import sys

import pytest
import torch
import torch_tpu

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from run import CI_DTYPES, SLICE_OPS  # noqa: E402

MAX_SAMPLES = 8

# (op, dtype or None for all, direction) -> reason. Reported to the lowering owners.
KNOWN: dict = {}


def _known(op, dtype, direction):
    return KNOWN.get((op, dtype, direction)) or KNOWN.get((op, None, direction))


@functools.lru_cache(maxsize=None)
def _result(key, dtype_name, mode):
    assert not os.environ.get("TORCH_TPU_CPU_FALLBACK"), "the OpInfo slice runs with zero CPU fallback"
    ops = harness.op_by_key()
    if key not in ops:
        pytest.skip(f"no OpInfo named {key} in this torch")
    op = ops[key]
    dtype = getattr(torch, dtype_name)
    if dtype not in op.supported_dtypes("cpu"):
        pytest.skip(f"{key} does not support {dtype_name} on the CPU")
    with torch_tpu.eager_mode(mode):
        return harness.run_opinfo(op, dtype, max_samples=MAX_SAMPLES)


def _params():
    # strict in every CI dtype; the other eager modes in float32 (the full run
    # covers every mode and dtype).
    return ([pytest.param(k, d, "strict", id=f"{k}-{d}") for k in SLICE_OPS for d in CI_DTYPES] +
            [pytest.param(k, "float32", m, id=f"{k}-float32-{m}") for m in ("debug", "defer_and_fuse")
             for k in SLICE_OPS])


def _check(key, dtype_name, mode, direction, request):
    r = _result(key, dtype_name, mode)
    reason = _known(key, dtype_name, direction)
    if reason:
        request.applymarker(pytest.mark.xfail(reason=reason, strict=False))
    status = r[direction]
    if status in ("skip", "n/a"):
        pytest.skip(r.get("bwd_reason") or r.get("reason") or f"no {direction} samples")
    details = "; ".join(f"{f['kind']} {f['sample']}: {f['reason']}" for f in r["failures"] if f["dir"] == direction)
    assert status == "pass", f"{key} {dtype_name} {mode} {direction}: {status} ({r[direction + '_pass']} passed) {details}"


@pytest.mark.parametrize("key,dtype_name,mode", _params())
def test_forward(key, dtype_name, mode, request):
    _check(key, dtype_name, mode, "fwd", request)


@pytest.mark.parametrize("key,dtype_name,mode", _params())
def test_backward(key, dtype_name, mode, request):
    _check(key, dtype_name, mode, "bwd", request)
