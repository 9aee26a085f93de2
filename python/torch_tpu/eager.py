"""Eager modes and runtime metrics.

- "strict" (default): each op is compiled once per signature and launched
  asynchronously as it is called.
- "debug": each op is waited for and checked; errors are raised at the op
  that failed. TORCH_TPU_DEBUG_NANS=1 raises at the first op producing NaN or
  Inf; TORCH_TPU_DEBUG_COMPARE_CPU=1 also runs every op on the CPU and raises
  at the first whose result differs beyond the tolerance table.
- "defer_and_fuse": ops are recorded and run as one fused program when a
  value leaves the device (.cpu(), .item(), printing, data-dependent shapes),
  at torch.tpu.synchronize(), at an optimizer step, at TORCH_TPU_FUSE_MAX_OPS
  ops, or when the op sequence repeats a graph that ran before.

The mode is per process (all threads share it). Switching modes runs pending
work first. The environment picks the starting mode: TPU_LAUNCH_BLOCKING=1
selects debug, TORCH_TPU_DEFER_AND_FUSE=1 defer_and_fuse.
"""
import contextlib

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from . import _C

MODES = ("strict", "debug", "defer_and_fuse")


def get_eager_mode() -> str:
    return _C._eager_mode()


def set_eager_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"unknown eager mode {mode!r}: expected one of {', '.join(MODES)}")
    _C._set_eager_mode(mode)


@contextlib.contextmanager
def eager_mode(mode: str):
    """`with torch_tpu.eager_mode("defer_and_fuse"): ...` — restores the
    previous mode (running pending work) on exit."""
    previous = get_eager_mode()
    set_eager_mode(mode)
    try:
        yield
    finally:
        set_eager_mode(previous)


def flush(reason: str = "user") -> None:
    """Runs every pending deferred graph now."""
    _C._flush(reason)


def metrics() -> dict:
    """Counters since start (or reset_metrics()): ops recorded, graphs
    launched, the results they wrote out (values still referenced when the
    graph ran; the rest were fused away), program cache hits and misses,
    compilations and their time (wall seconds during which any compile ran:
    compiles run side by side), of them the programs strict mode started
    ahead for a growing tensor's next size bucket (docs/dynamic_shapes.md),
    persistent-cache hits, flushes by reason, bytes moved to the device,
    dimensions made dynamic automatically and programs that padding saved
    (a padded op run at sizes its program had not met)."""
    raw = dict(_C._counters())
    flushes = {k[len("flush."):]: v for k, v in raw.items() if k.startswith("flush.")}
    return {
        "eager_mode": get_eager_mode(),
        "ops_recorded": raw.get("ops_recorded", 0),
        "graphs_launched": raw.get("launches", 0),
        "graph_outputs": raw.get("graph_outputs", 0),
        "cache_hits": raw.get("hits", 0),
        "cache_misses": raw.get("misses", 0),
        "graphs_compiled": raw.get("compiled", 0),
        "graphs_compiled_ahead": raw.get("compiled_ahead", 0),
        "disk_cache_hits": raw.get("disk_hits", 0),
        "compile_seconds": raw.get("compile_us", 0) / 1e6,
        "donated_buffers": raw.get("donated_buffers", 0),
        "bytes_to_device": raw.get("bytes_to_device", 0),
        "bytes_to_host": raw.get("bytes_to_host", 0),
        "dims_made_dynamic": raw.get("dims_made_dynamic", 0),
        "programs_saved_by_padding": raw.get("programs_saved_by_padding", 0),
        "flush_reasons": flushes,
    }


def metrics_report() -> str:
    m = metrics()
    lines = [f"torch_tpu metrics (eager mode: {m['eager_mode']})"]
    for key in ("ops_recorded", "graphs_launched", "graph_outputs", "cache_hits", "cache_misses",
                "graphs_compiled", "disk_cache_hits", "donated_buffers", "bytes_to_device",
                "bytes_to_host", "dims_made_dynamic", "programs_saved_by_padding"):
        lines.append(f"  {key:<18} {m[key]}")
    lines.append(f"  {'compile_seconds':<18} {m['compile_seconds']:.3f}")
    if m["flush_reasons"]:
        lines.append("  flushes by reason:")
        for reason, n in sorted(m["flush_reasons"].items()):
            lines.append(f"    {reason:<16} {n}")
    return "\n".join(lines)


def reset_metrics() -> None:
    _C._reset_counters()


def _hold_cuts_during_optimizer_step(optimizer, args, kwargs):
    # A repeat cut found inside the step waits for its end, when the step's
    # temporaries are dead and need not be written out.
    if not torch.compiler.is_compiling():
        _C._hold_repeat_cuts(True)


def _flush_after_optimizer_step(optimizer, args, kwargs):
    # A training loop's optimizer step is a natural, deterministic cut: the
    # graphs before and after it recur every iteration and hit the cache.
    # Inside torch.compile there is nothing deferred to cut (and Dynamo
    # cannot trace the call).
    if torch.compiler.is_compiling():
        return
    _C._hold_repeat_cuts(False)
    if _C._eager_mode() == "defer_and_fuse":
        # Launched, not waited for: the next step records while this one
        # runs, and its launch takes these results.
        _C._flush("optimizer_step", settle=False)


register_optimizer_step_pre_hook(_hold_cuts_during_optimizer_step)
register_optimizer_step_post_hook(_flush_after_optimizer_step)
