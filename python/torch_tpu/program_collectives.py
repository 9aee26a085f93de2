"""Collectives that a captured tpu program can hold (`ProgramCollectives`).

`tpu_dist`'s collectives (distributed.py) run between programs: a function
captured whole (vLLM's step, `CapturedFunction`) could not contain one, and
a step with an all-reduce a layer would become a program per piece. Where
the plugin's device memory is host memory (XLA's CPU plugin, FFI platform
"Host"), these collectives are instead custom calls inside the program whose
handlers (csrc/distributed/program_collectives.cpp) hand the program's buffer
to a Gloo group of the ranks in place. Every rank runs the same program, so
the ranks issue the same collectives in the same order. Elsewhere (a TPU,
the CUDA plugin) the program would need StableHLO collectives across
processes, the `pjrt` path that is not used yet: construction refuses,
naming it.
"""
from __future__ import annotations

import itertools

import torch
import torch.distributed as dist

from .distributed import _native
from .kernels import ffi

_ids = itertools.count()


def _register_handlers() -> dict:
    """Registers the handlers with the plugin (once per process: the plugin's
    registry ignores a handler registered again) and returns them."""
    handlers = dict(_native._program_collective_handlers())
    if not handlers:
        raise NotImplementedError("torch_tpu: collectives inside programs need torch_tpu built with "
                                  "XLA's FFI headers (jaxlib); this build has none")
    platform = ffi.platform()
    if platform != "Host":
        raise NotImplementedError(
            f"torch_tpu: collectives inside programs run only where device memory is host memory "
            f"(XLA's CPU plugin); this plugin's platform is {platform!r}, whose programs would need "
            "StableHLO collectives across processes (the pjrt path, not used yet: docs/distributed.md)")
    for target, address in handlers.items():
        ffi.register_ffi_target(target, address)
    return handlers


class ProgramCollectives:
    """All-reduce (sum) and all-gather (along dim 0) among `ranks` of the
    default process group, as ops a captured program records like any other.

    Construction creates a Gloo group of `ranks` of its own, so that these
    collectives never interleave with other users of a group; every rank in
    `ranks` must construct it, in the same order as its other groups."""

    def __init__(self, ranks: list[int]):
        _register_handlers()
        self.ranks = list(ranks)
        self.size = len(self.ranks)
        group = dist.new_group(self.ranks, backend="gloo", use_local_synchronization=True)
        group_id = _native._register_program_group(group._get_backend(torch.device("cpu")))
        self._group = group   # kept alive: the handlers use its backend
        tag = f"g{group_id}_{next(_ids)}"
        self._all_reduce = ffi.ffi_op(f"torch_tpu_program::all_reduce_{tag}", "torch_tpu_all_reduce",
                                      lambda x: x, attributes={"group": group_id}, nargs=1)
        size = self.size
        self._all_gather = ffi.ffi_op(
            f"torch_tpu_program::all_gather_{tag}", "torch_tpu_all_gather",
            lambda x: (x[0], (x[1][0] * size, *x[1][1:])), attributes={"group": group_id}, nargs=1)

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        """The sum of every rank's `x` (a new tensor)."""
        return self._all_reduce(x.contiguous())

    def all_gather(self, x: torch.Tensor) -> torch.Tensor:
        """Every rank's `x`, in rank order, concatenated along dim 0."""
        if x.dim() == 0:
            raise ValueError("ProgramCollectives.all_gather: a 0-dimensional tensor has no dim 0 to gather along")
        return self._all_gather(x.contiguous())


__all__ = ["ProgramCollectives"]
