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


def init() -> None:
    """Loads the PJRT plugin and starts the runtime now (tpu does it lazily,
    at first use, as CUDA does); raises if it cannot."""
    _lazy_init()


def ipc_collect() -> None:
    """torch.cuda frees here the memory of tensors shared with processes that
    have exited. tpu tensors are never shared between processes (torch.
    multiprocessing moves them through the host), so there is none to free."""


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
    """Context manager that changes the current tpu device (a negative index,
    as torch.cuda.device(-1), changes nothing)."""

    def __init__(self, device):
        self.idx = device if isinstance(device, int) else _index(device)
        self.prev = -1

    def __enter__(self):
        if self.idx >= 0:
            self.prev = current_device()
            set_device(self.idx)

    def __exit__(self, *exc):
        if self.idx >= 0:
            set_device(self.prev)
        return False


class device_of(device):  # noqa: N801 (torch.cuda's name)
    """`with torch.tpu.device_of(t):` makes t's device current for the block;
    for a tensor that is not on tpu it changes nothing (as torch.cuda's does
    for a tensor not on cuda)."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.device.type == "tpu" else -1)


def synchronize(device=None) -> None:
    """Waits for all work issued to the device so far."""
    _C._synchronize(_index(device))


def get_device_properties(device=None) -> DeviceProperties:
    """torch.cuda's fields (name, major, minor, total_memory,
    multi_processor_count) plus the platform's; see properties.py."""
    return device_properties(_index(device), mem_get_info)


def get_device_name(device=None) -> str:
    return get_device_properties(device).name


def get_device_capability(device=None) -> tuple[int, int]:
    """(major, minor) from the plugin's device description: the CUDA plugin's
    compute capability; a TPU's generation ("TPU v5 lite" -> (5, 0)); (0, 0)
    on the CPU plugin, which has none (properties.py)."""
    p = get_device_properties(device)
    return p.major, p.minor


def get_arch_list() -> list[str]:
    """What programs are compiled for. CUDA lists the architectures its
    kernels were built for; here the plugin compiles every program for the
    devices it has, so the list is theirs: "sm_XY" on the CUDA plugin (as
    torch.cuda spells it), else the device kind the plugin reports ("TPU v5
    lite", "cpu"). Empty without a device, as torch.cuda's."""
    if not is_available():
        return []
    arches = []
    for i in range(device_count()):
        p = get_device_properties(i)
        arch = f"sm_{p.major}{p.minor}" if p.platform_name == "cuda" else p.kind
        if arch not in arches:
            arches.append(arch)
    return arches


# ---- streams and events: one stream per device (PJRT keeps a device's work
# in order), so every stream object is that stream and switching is a no-op.


def current_stream(device=None) -> torch.Stream:
    return torch.accelerator.current_stream(_index(device))


default_stream = current_stream


def Stream(device=None, priority: int = 0, **kwargs) -> torch.Stream:  # noqa: N802 (torch.cuda's name)
    return current_stream(device)


def set_stream(stream) -> None:
    """Streams are all the device's one stream: nothing to switch."""


class StreamContext:
    """`with torch.tpu.StreamContext(s):` (what torch.tpu.stream(s) returns)
    runs the block on s, which is the device's one stream: nothing to switch.
    A stream on another device makes that device current for the block, as
    on CUDA; None changes nothing."""

    def __init__(self, stream):
        self.stream = stream
        self._device = None

    def __enter__(self):
        s = self.stream
        if s is not None and s.device.type == "tpu" and s.device.index != current_device():
            self._device = device(s.device.index)
            self._device.__enter__()
        return s

    def __exit__(self, *exc):
        if self._device is not None:
            self._device.__exit__(*exc)
            self._device = None
        return False


def stream(stream) -> StreamContext:
    """`with torch.tpu.stream(s):` runs the block on the device's stream."""
    return StreamContext(stream)


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
