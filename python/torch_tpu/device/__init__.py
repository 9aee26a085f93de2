"""`torch.tpu`: the device module of the `tpu` backend, shaped like torch.cuda.

This package is the module `import torch_tpu` registers as `torch.tpu`; its
submodules `memory` (the memory API) and `amp` (mixed precision) are
`torch.tpu.memory` and `torch.tpu.amp`, `properties` fills
`get_device_properties`, `precision` is the float32 matmul precision block.
"""

import torch

from .. import _C
from . import amp, memory
from ._index import device_index as _index
from .amp import get_amp_supported_dtype, is_bf16_supported  # noqa: F401
from .memory import (  # noqa: F401
    OutOfMemoryError,
    empty_cache,
    get_per_process_memory_fraction,
    max_memory_allocated,
    max_memory_cached,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_cached,
    memory_reserved,
    memory_snapshot,
    memory_stats,
    memory_stats_as_nested_dict,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_max_memory_cached,
    reset_peak_memory_stats,
    set_per_process_memory_fraction,
    utilization,
)
from .precision import get_precision, precision  # noqa: F401
from .properties import DeviceProperties, device_properties


def is_available() -> bool:
    try:
        return _C._device_count() > 0
    except RuntimeError:
        return False


def is_initialized() -> bool:
    return _C._runtime_loaded()


def _lazy_init():
    _C._load_runtime()


def device_count() -> int:
    try:
        return _C._device_count()
    except RuntimeError:
        return 0


def current_device() -> int:
    return _C._current_device()


def set_device(device) -> None:
    _C._set_device(_index(device))


class device:
    """Context manager that changes the current tpu device."""

    def __init__(self, device):
        self.idx = _index(device)
        self.prev = -1

    def __enter__(self):
        self.prev = current_device()
        set_device(self.idx)

    def __exit__(self, *exc):
        set_device(self.prev)
        return False


def synchronize(device=None) -> None:
    """Waits for all work issued to the device so far."""
    _C._synchronize(_index(device))


def get_device_properties(device=None) -> DeviceProperties:
    """torch.cuda's fields (name, major, minor, total_memory,
    multi_processor_count) plus the platform's; see properties.py."""
    return device_properties(_index(device), mem_get_info)


def get_device_name(device=None) -> str:
    return get_device_properties(device).name


# ---- streams and events: one stream per device (PJRT keeps a device's work
# in order), so every stream object is that stream and switching is a no-op.


def current_stream(device=None) -> torch.Stream:
    return torch.accelerator.current_stream(_index(device))


default_stream = current_stream


def Stream(device=None, priority: int = 0, **kwargs) -> torch.Stream:  # noqa: N802 (torch.cuda's name)
    return current_stream(device)


def set_stream(stream) -> None:
    """Streams are all the device's one stream: nothing to switch."""


class stream:
    """`with torch.tpu.stream(s):` — runs the block on the device's stream."""

    def __init__(self, stream):
        self.stream = stream

    def __enter__(self):
        return self.stream

    def __exit__(self, *exc):
        return False


def Event(enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):  # noqa: N802
    """A device event (torch.Event on tpu). record() runs pending work and marks
    the device's last launched program; with enable_timing, elapsed_time() gives
    the milliseconds of device work between two recorded events (see
    csrc/aten/device_guard.cpp). Both must be complete (synchronize() or
    query()), as on CUDA."""
    if interprocess:
        raise NotImplementedError("tpu events cannot be shared between processes")
    return torch.Event(torch.device("tpu", current_device()), enable_timing=enable_timing)


# ---- random numbers


def manual_seed(seed: int) -> None:
    _C._manual_seed(current_device(), int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def manual_seed_all(seed: int) -> None:
    for i in range(device_count()):
        _C._manual_seed(i, int(seed) & 0xFFFF_FFFF_FFFF_FFFF)


def seed() -> None:
    _C._seed(current_device())


def seed_all() -> None:
    for i in range(device_count()):
        _C._seed(i)


def initial_seed() -> int:
    return _C._initial_seed(current_device())


def get_rng_state(device="tpu") -> torch.Tensor:
    return _C._get_rng_state(_index(device))


def set_rng_state(new_state: torch.Tensor, device="tpu") -> None:
    _C._set_rng_state(_index(device), new_state)


def get_rng_state_all():
    return [_C._get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states) -> None:
    for i, s in enumerate(new_states):
        _C._set_rng_state(i, s)


def default_generator(device=None) -> torch.Generator:
    return _C._default_generator(_index(device))


def _is_in_bad_fork() -> bool:
    """True in a child forked after the runtime started (where tpu raises)."""
    return _C._is_in_bad_fork()
