"""Capturing a function's device work as one program.

A capture runs a Python function once in the runtime's tracing mode
(`_C._capture_begin` / `_capture_end`): its `tpu` ops are recorded through
the same lowerings as eager instead of executed, and become one StableHLO
program whose parameters are the listed inputs (plus, as constants, any other
buffer the function read, such as a model's weights). An input the function
wrote is a mutated input: the program returns its new value, aliased to the
input so that a launch donates the buffer, and each launch writes it back.
Later calls launch the program on new inputs of the same signature without
running the function: Python numbers, host values and control flow are those
of the capture, as with CUDA graphs.

torch.compile's graphs (dynamo.py) are captured through `capture_program`;
`CapturedFunction` serves callers that own the function (vLLM's step, in
integrations/vllm/worker.py), one program per input signature.
"""
from __future__ import annotations

import torch

from .. import _C


class NotWholeBase(Exception):
    """An input is not a whole contiguous buffer, which a capture needs."""


class ReadsItsOwnValue(Exception):
    """The function read a value it computes (to size a result, or on the
    host), which a capture can only record. `op` names the op when the
    caller knows it."""

    def __init__(self, op: str = "an op"):
        super().__init__(op)
        self.op = op


def _geometry(t):
    return (tuple(t.size()), tuple(t.stride()), t.storage_offset())


def _whole_base(t: torch.Tensor) -> bool:
    """Contiguous from offset 0 over its whole storage (the same test the
    C++ input plan applies)."""
    return _C._is_whole_base(t)


def capture_program(fn, args: list, plan, what: str, whole_views: bool = False):
    """Runs fn(*args) once as a capture and returns its `_C.CompiledCall`.

    `plan` is the `_C.CallPlan` of `args`: how each reaches the program (as
    it is, or as a view of its storage's buffer). `whole_views`: outputs that
    are views come back as buffers of their own (gradients, which
    AccumulateGrad steals whole). `what` names the function in errors."""
    inputs = plan.inputs(args)
    call_args = list(args)
    for i, (a, how) in enumerate(zip(args, plan.how())):
        if how is not None:
            kind, j = how
            t = inputs[j]
            call_args[i] = t if kind != "view" else t.as_strided(a.size(), a.stride(),
                                                                 a.storage_offset())
    device = inputs[0].device.index if inputs else torch.tpu.current_device()
    try:
        _C._capture_begin(device, inputs)
    except ValueError as e:
        if "whole storage" in str(e):
            raise NotWholeBase() from None
        raise
    try:
        with torch.no_grad():
            outs = fn(*call_args)
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        layout, tensors = _layout(outs, inputs, whole_views, what)
    except BaseException as e:
        _C._capture_abort()
        if isinstance(e, RuntimeError) and "is needed before the graph ends" in str(e):
            raise ReadsItsOwnValue() from e
        if isinstance(e, NotImplementedError):
            raise NotImplementedError(
                f"capturing {what} failed: {e}") from e
        raise
    return _C.CompiledCall(_C._capture_end(tensors), plan, layout)


def _layout(outs: list, inputs: list, whole_views: bool, what: str):
    """Per output: ("out", k, view, bits) -- program result k, or a view
    (size, stride, offset) of it; ("in", j, view, bits) -- program input j
    itself or a view of it; bits: (conj, neg), the lazy bits to set again;
    ("const", v) -- a number, None... And the program's results."""
    in_pos = {id(t): j for j, t in enumerate(inputs)}
    tensors, out_pos, layout = [], {}, []
    for o in outs:
        if not isinstance(o, torch.Tensor):
            layout.append(("const", o))
            continue
        if o.device.type != "tpu":
            raise RuntimeError(f"{what}: an output is on {o.device}; expected tpu")
        # An output that is an input, or a view of an input or of another
        # result, is rebuilt from that buffer after the run (as eager would
        # alias it) instead of being copied by the program into a buffer of
        # its own.
        base = o if o._base is None else o._base
        view = None if base is o else _geometry(o)
        if view is not None and (whole_views or _whole_base(o)):
            # Gradients: AccumulateGrad steals a whole contiguous tensor but
            # copies a view, one eager op per parameter. A reshape of a whole
            # buffer: AOT detaches saved tensors (dropping the view
            # relation), and a buffer of another shape could not be a
            # program input then; the program writes it in its own shape
            # instead (a cheap copy).
            base, view = o, None
        # A conjugate or negative view (a saved conj(f) for the backward of
        # a complex product) keeps its lazy bit: the buffer holds the values
        # without it.
        bits = (o.is_conj(), o.is_neg())
        if id(base) in in_pos:
            layout.append(("in", in_pos[id(base)], view, bits))
            continue
        if view is not None and not _whole_base(base):
            base, view = o, None
        if id(base) not in out_pos:
            out_pos[id(base)] = len(tensors)
            tensors.append(base)
        layout.append(("out", out_pos[id(base)], view, bits))
    return layout, tensors


class CapturedFunction:
    """`fn` captured once per signature of its inputs (shapes, dtypes,
    strides, the float32 matmul precision) and launched from then on.

    The caller vouches that `fn` does the same device work for every input
    of a signature, reading nothing per call but its inputs: what else it
    computes on the host is frozen into the program. Inputs are `tpu`
    tensors that are whole contiguous buffers."""

    def __init__(self, fn, what: str):
        self.fn = fn   # run as fn(*inputs), once per signature
        self.what = what
        self.programs: dict = {}
        self.last = None   # the program that ran last; its plan checks new inputs in C++

    def __call__(self, inputs: list) -> list:
        """The outputs of fn(*inputs)."""
        if self.last is not None:
            outs = self.last(list(inputs))   # the call empties the list it gets
            if outs is not None:
                return outs
        plan = _C.CallPlan(inputs, set())
        if plan.plain:
            raise TypeError(f"{self.what}: captured inputs must be tensors")
        program = self.programs.get(plan.key)
        if program is None:
            program = capture_program(self.fn, list(inputs), plan, self.what)
            self.programs[plan.key] = program
        outs = program(list(inputs))
        if outs is None:
            raise RuntimeError(f"{self.what}: an input is not a whole contiguous tpu buffer")
        self.last = program
        return outs
