"""What TorchTitan 0.3.0 (validated on torch 2.14) calls and torch 2.13 lacks."""
import torch.distributed as dist


def _set_timeout(timeout, group=None):
    """torch 2.14's `torch.distributed.set_timeout`, on torch 2.13's
    `ProcessGroup.set_timeout` (every backend of the group gets it)."""
    (group or dist.distributed_c10d._get_default_group()).set_timeout(timeout)


def install() -> None:
    """Adds only what is missing, so a newer torch keeps its own."""
    if not hasattr(dist, "set_timeout"):
        dist.set_timeout = _set_timeout
