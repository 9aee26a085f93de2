"""A clean exit after backward passes on `tpu`.

PyTorch's autograd engine runs a `tpu` backward on a device thread, and
torch 2.13 stashes a Python object (a contextvars.Context) in the thread-local
state each backward carries. The device thread drops that state just after
the backward returns; if the interpreter is already finalizing by then, the
thread dies taking the GIL and the process aborts ("terminate called without
an active exception"). At exit we run one more, tiny backward straight
through the engine, without the stash: once it has finished, the device
thread has let go of every earlier backward's state, and this last one holds
no Python object.
"""
import atexit

import torch

from . import _C


def _drain_autograd_device_thread():
    if not _C._runtime_loaded():
        return
    try:
        x = torch.zeros((), device="tpu", requires_grad=True)
        y = x * 2
        torch.autograd.Variable._execution_engine.run_backward(
            (y,), (torch.ones((), device="tpu"),), False, False, (), True, True)
    except Exception:  # noqa: BLE001 - exit must not fail because of a bad device state
        pass


atexit.register(_drain_autograd_device_thread)
