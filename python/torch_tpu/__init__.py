"""torch_tpu: run PyTorch on XLA devices through the PJRT C API.

`import torch_tpu` registers the `tpu` device (PyTorch's PrivateUse1 backend),
the `torch.tpu` module and the tensor/module/storage methods (`.tpu()`,
`.is_tpu`). Installing the package also registers an entry point in the
`torch.backends` group, so `import torch` loads it automatically.
"""
import os
import site
import sys


def _autoload():
    """Entry point of the `torch.backends` group: importing did the work.

    Defined before `import torch`: when this package is imported first, torch's
    own import runs the entry points and looks this function up on the
    half-imported module."""


import torch  # noqa: E402

from . import _C


def _package_roots():
    roots = []
    for p in list(sys.path) + site.getsitepackages() + [site.getusersitepackages()]:
        if p and os.path.isdir(p) and p not in roots:
            roots.append(p)
    return roots


_C._init(_package_roots(), [os.path.dirname(torch.__file__) + os.sep,
                            os.path.dirname(os.path.abspath(__file__)) + os.sep])

torch.utils.rename_privateuse1_backend("tpu")

from . import device_module as _device_module  # noqa: E402

torch._register_device_module("tpu", _device_module)
torch.utils.generate_methods_for_privateuse1_backend(
    for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True
)

from . import _printing  # noqa: E402
from . import _shutdown  # noqa: E402,F401
from .eager import (  # noqa: E402
    eager_mode,
    flush,
    get_eager_mode,
    metrics,
    metrics_report,
    reset_metrics,
    set_eager_mode,
)

_printing.install()

from . import pallas  # noqa: E402,F401  (jax_op; imports JAX only when a kernel is defined)
from .custom_ops import stablehlo_op  # noqa: E402,F401

from . import distributed  # noqa: E402,F401  (registers the "tpu_dist" c10d backend)
from .dynamic import dynamic_dims  # noqa: E402,F401


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


__all__ = [
    "dynamic_dims", "env_table", "eager_mode", "flush", "get_eager_mode", "lowered_ops", "metrics",
    "metrics_report", "platform", "reset_metrics", "set_eager_mode", "tolerance",
]
from . import dynamo  # noqa: E402,F401  (registers the "tpu" torch.compile backend)

# torch.autocast("tpu") defaults to bfloat16; `import torch.tpu.amp` works as for torch.cuda.amp.
from . import amp as _amp  # noqa: E402
_amp._install()
sys.modules["torch.tpu.amp"] = _amp

# accelerate (and so the HF Trainer) falls back to tpu instead of cpu (accelerate_device.py says why).
from . import accelerate_device as _accelerate_device  # noqa: E402
_accelerate_device.install()
