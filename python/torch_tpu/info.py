"""What this install offers, as the native layer reports it: the PJRT plugin
behind `tpu`, the lowered ATen operators, the environment variables and the
tolerance table. `torch_tpu.platform()`, `lowered_ops()`, `env_table()` and
`tolerance()` are these functions."""
import torch

from . import _C


def platform():
    """Which PJRT plugin backs `tpu`: a dict with the plugin path, why it was
    chosen, the XLA platform name and version, the PJRT C API version, and the
    plugin's attributes (PJRT_Plugin_Attributes as text, e.g. the StableHLO
    versions it reads, which custom kernels are checked against)."""
    return dict(_C._platform())


def lowered_ops():
    """The ATen operators that have a StableHLO lowering (sorted)."""
    return list(_C._lowered_ops())


def env_table():
    """Every TORCH_TPU_* environment variable: (name, meaning, value now)."""
    return [tuple(row) for row in _C._env_table()]


def tolerance(dtype: torch.dtype, op: str = ""):
    """(rtol, atol) allowed between a tpu result and the CPU's: the one
    tolerance table (assert_close's defaults per dtype, with per-op overrides)."""
    return tuple(_C._tolerance(str(dtype).replace("torch.", ""), op))
