"""`torch.tpu` memory API, shaped like `torch.cuda`'s.

Every figure comes from the tpu allocator's statistics (a
`c10::DeviceAllocator`), the same ones `torch.accelerator.memory.*` reads, so
the two always agree. PJRT allocates and frees each device buffer itself and
torch_tpu keeps no pool, so reserved, active and allocated bytes are equal
and `num_alloc_retries` is 0.
"""
import collections
import pickle
import sys

import torch

from .. import _C
from ._index import device_index as _index

OutOfMemoryError = torch.OutOfMemoryError


def memory_stats_as_nested_dict(device=None) -> dict:
    return torch._C._accelerator_getDeviceStats(_index(device))


def memory_stats(device=None) -> "collections.OrderedDict[str, int]":
    """`allocated_bytes`, `reserved_bytes`, `active_bytes`, `requested_bytes`,
    `allocation`, `segment`, `active` `.all.{current,peak,allocated,freed}`
    (and their pools), `num_ooms`, `num_alloc_retries`, ... as torch.cuda."""
    return torch.accelerator.memory.memory_stats(_index(device))


def memory_allocated(device=None) -> int:
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def max_memory_allocated(device=None) -> int:
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def memory_reserved(device=None) -> int:
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def max_memory_reserved(device=None) -> int:
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


memory_cached = memory_reserved
max_memory_cached = max_memory_reserved


def reset_peak_memory_stats(device=None) -> None:
    torch._C._accelerator_resetPeakStats(_index(device))


def reset_max_memory_allocated(device=None) -> None:
    reset_peak_memory_stats(device)


reset_max_memory_cached = reset_max_memory_allocated


def reset_accumulated_memory_stats(device=None) -> None:
    torch._C._accelerator_resetAccumulatedStats(_index(device))


def empty_cache() -> None:
    """torch_tpu keeps no cache: this waits until the buffers of dropped
    tensors (freed on a release thread) are back with the plugin."""
    torch._C._accelerator_emptyCache()


def mem_get_info(device=None) -> tuple:
    """(free, total) bytes: the plugin's device memory statistics where it
    reports them; the CPU plugin reports none, so there it is the host's
    MemAvailable and MemTotal (its device memory is host memory)."""
    free, total, _source = _C._mem_get_info(_index(device))
    return free, total


def set_per_process_memory_fraction(fraction: float, device=None) -> None:
    """Caps this process at `fraction` (0..1) of the device's total memory: a
    program whose new outputs would pass it raises torch.OutOfMemoryError
    (counted in num_ooms) before it runs."""
    if not isinstance(fraction, (int, float)) or isinstance(fraction, bool):
        raise TypeError("Invalid type for fraction argument, must be `float`")
    _C._set_memory_fraction(float(fraction), _index(device))


def get_per_process_memory_fraction(device=None) -> float:
    return _C._memory_fraction(_index(device))


def utilization(device=None) -> int:
    """Percent of the last second during which the device was running programs."""
    return int(round(100 * _C._device_busy_fraction(_index(device), 1.0)))


def _fmt_bytes(n: int) -> str:
    for unit in ("B ", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:6.0f} {unit}" if unit == "B " else f"{n:6.2f} {unit}"
        n /= 1024
    return str(n)


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """A table of the memory statistics, laid out like torch.cuda.memory_summary()."""
    idx = _index(device)
    s = memory_stats(idx)
    width = 75
    rule, dbl = "|" + "-" * width + "|", "|" + "=" * width + "|"
    title = f"PyTorch TPU memory summary, device ID {idx}"
    lines = [dbl, "|" + title.center(width) + "|", rule,
             "|" + f"  TPU OOMs: {s.get('num_ooms', 0):<10}".ljust(37) + "|"
             + f"  allocation retries: {s.get('num_alloc_retries', 0):<10}".ljust(37) + "|",
             dbl,
             "| " + "Metric".ljust(22) + "| Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |",
             rule]

    def row(label, key, as_bytes):
        vals = [s.get(f"{key}.all.{k}", 0) for k in ("current", "peak", "allocated", "freed")]
        cells = [_fmt_bytes(v) if as_bytes else f"{v:>10}" for v in vals]
        return "| " + label.ljust(22) + "|" + "|".join(f" {c:>10} " for c in cells) + "|"

    for label, key in (("Allocated memory", "allocated_bytes"), ("Active memory", "active_bytes"),
                       ("Requested memory", "requested_bytes"),
                       ("TPU reserved memory", "reserved_bytes")):
        lines.append(row(label, key, True))
    lines.append(rule)
    for label, key in (("Allocations", "allocation"), ("Active allocs", "active"),
                       ("TPU reserved segments", "segment")):
        lines.append(row(label, key, False))
    lines.append(dbl)
    if not abbreviated:
        free, total, source = _C._mem_get_info(idx)
        where = "PJRT plugin" if source == "plugin" else "host memory"
        lines.append("| " + f"Device free / total: {_fmt_bytes(free).strip()} / "
                     f"{_fmt_bytes(total).strip()} ({where})".ljust(width - 1) + "|")
        lines.append(dbl)
    return "\n".join(lines) + "\n"


def _record_memory_history(enabled="all", context="all", stacks="all",
                           max_entries: int = sys.maxsize, device=None, **kwargs) -> None:
    """Records every device allocation (and free) with its Python stack for
    `_snapshot()`. `enabled=None` stops and clears; calling it again while
    recording changes the options and keeps the history (as torch.cuda).
    `stacks="all"` records Python frames (there are no C++ frames to add)."""
    if enabled not in (None, "state", "all"):
        raise ValueError(f'_record_memory_history: enabled must be None, "state" or "all", got {enabled!r}')
    if context is not None and context not in ("state", "alloc", "all"):
        raise ValueError(f'_record_memory_history: context must be None, "state", "alloc" or "all", got {context!r}')
    if stacks not in ("python", "all"):
        raise ValueError(f'_record_memory_history: stacks must be "python" or "all", got {stacks!r}')
    if not isinstance(max_entries, int) or max_entries < 0:
        raise ValueError("_record_memory_history: max_entries must be a non-negative int")
    _C._record_memory_history(enabled or "", context or "", stacks,
                              min(max_entries, 2**63 - 1))


def _snapshot(device=None) -> dict:
    """{"segments": [...], "device_traces": [[...] per device]} in
    torch.cuda.memory._snapshot()'s format: torch.cuda._memory_viz renders it."""
    return _C._memory_snapshot()


def _dump_snapshot(filename: str = "dump_snapshot.pickle") -> None:
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)


def memory_snapshot() -> list:
    """The live device buffers as torch.cuda.memory_snapshot()'s segments
    (empty unless _record_memory_history is on)."""
    return _snapshot()["segments"]


__all__ = [
    "OutOfMemoryError", "empty_cache", "get_per_process_memory_fraction", "max_memory_allocated",
    "max_memory_cached", "max_memory_reserved", "mem_get_info", "memory_allocated", "memory_cached",
    "memory_reserved", "memory_snapshot", "memory_stats", "memory_stats_as_nested_dict",
    "memory_summary", "reset_accumulated_memory_stats", "reset_max_memory_allocated",
    "reset_max_memory_cached", "reset_peak_memory_stats", "set_per_process_memory_fraction",
    "utilization",
]
