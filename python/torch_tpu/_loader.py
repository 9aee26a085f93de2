"""`torch_tpu._loader.load()`: the name Ray Train calls to set up `tpu_dist`.

Ray (2.60, `ray/air/_internal/device_manager/tpu.py`) runs
`import torch_tpu._loader; torch_tpu._loader.load()` before
`init_process_group("tpu_dist")`, for `TorchConfig(backend="tpu_dist")` and for
workers given TPU resources. Importing this module imported `torch_tpu`, which
registered the `tpu` device and the `tpu_dist` backend, so `load()` has only
to refuse a torch that cannot run `tpu_dist`; it may be called any number of
times.
"""
import torch.distributed as dist

from .distributed import BACKEND_NAME


def load() -> None:
    """Makes sure the `tpu` device and the `tpu_dist` backend are registered
    (`import torch_tpu` registered them); raises if this torch has no
    torch.distributed."""
    if not dist.is_available():
        raise RuntimeError(f"torch_tpu._loader.load(): this torch build has no torch.distributed, "
                           f"which the {BACKEND_NAME} backend needs")
