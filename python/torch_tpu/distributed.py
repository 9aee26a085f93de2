"""`tpu_dist`: the torch.distributed backend of the `tpu` device.

`import torch_tpu` registers it, so the usual idioms work unchanged::

    torchrun --nproc_per_node=2 train.py
    dist.init_process_group("tpu_dist")                  # or "cpu:gloo,tpu:tpu_dist",
    torch.tpu.set_device(int(os.environ["LOCAL_RANK"]))  # or device_id=torch.device("tpu", r)

The backend is C++ (csrc/distributed/); `collective_path()` says which execution
path its collectives take and why.
"""
import importlib.machinery
import importlib.util
import os
from datetime import timedelta

import torch
import torch.distributed as dist

from . import _C

BACKEND_NAME = "tpu_dist"


def _load_native():
    # The distributed layer's Python module lives in the same library as
    # torch_tpu._C under its own init symbol (PyInit__C_dist); c10d's Backend
    # type must be registered first, which importing torch.distributed did.
    name = "torch_tpu._C_dist"
    loader = importlib.machinery.ExtensionFileLoader(name, _C.__file__)
    spec = importlib.util.spec_from_file_location(name, _C.__file__, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


_native = _load_native() if dist.is_available() else None


def _create_backend(opts, backend_options):
    """c10d's creator hook (extended API): a Gloo group on the same store, and
    the tpu_dist backend that stages `tpu` tensors through it."""
    timeout = opts.timeout if isinstance(opts.timeout, timedelta) else timedelta(seconds=opts.timeout)
    store = dist.PrefixStore(f"{BACKEND_NAME}/host/", opts.store)
    try:
        host = dist.ProcessGroupGloo(store, opts.group_rank, opts.group_size, timeout)
    except RuntimeError as e:
        raise RuntimeError(
            f"tpu_dist: rank {opts.group_rank} of {opts.group_size} could not connect to its "
            f"peers within the group timeout ({timeout.total_seconds():g} s); a rank may have "
            f"failed to start or exited: {e}"
        ) from e
    return _native.ProcessGroupTPU(host, opts.group_rank, opts.group_size, timeout)


def collective_path():
    """Which path `tpu_dist` collectives take: a dict with `path` ("pjrt":
    StableHLO collectives compiled by the PJRT plugin; "host_gloo": staged
    through host memory and run by Gloo), `reason` and `platform`."""
    return dict(_native._collective_path())


def local_device():
    """The `tpu` device of this process under one-process-per-device launchers:
    `tpu:LOCAL_RANK` (as with CUDA), folded onto the devices this process sees
    when there are more processes per host than devices (each process has its
    own PJRT client, so device indices are process-local)."""
    count = torch.tpu.device_count()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    return torch.device("tpu", local_rank % count if count else 0)



if _native is not None and BACKEND_NAME.upper() not in dist.Backend._plugins:
    # CPU tensors are accepted too (passed straight to Gloo), so a group
    # created as plain "tpu_dist" also serves object collectives and barriers.
    dist.Backend.register_backend(BACKEND_NAME, _create_backend, extended_api=True, devices=["tpu", "cpu"])

__all__ = ["BACKEND_NAME", "collective_path", "local_device"]
