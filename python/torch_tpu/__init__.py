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

from . import device as _device_module  # noqa: E402  (torch.tpu)

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
from .info import env_table, lowered_ops, platform, tolerance  # noqa: E402

_printing.install()

from . import pallas  # noqa: E402,F401  (jax_op; imports JAX only when a kernel is defined)
from .kernels.custom_ops import stablehlo_op  # noqa: E402,F401
from . import ffi  # noqa: E402,F401  (users' XLA FFI handlers as ops)

from . import distributed  # noqa: E402,F401  (registers the "tpu_dist" c10d backend)
from .dynamic import dynamic_dims  # noqa: E402,F401

__all__ = [
    "dynamic_dims", "env_table", "eager_mode", "flush", "get_eager_mode", "lowered_ops", "metrics",
    "metrics_report", "platform", "reset_metrics", "set_eager_mode", "tolerance",
]

# Registers the "tpu" torch.compile backend. Its module was torch_tpu.dynamo
# before the package was laid out by concern, and users reach compile_stats(),
# reset(), recompile_warn_limit and TpuRecompileWarning there: the same module
# object answers to both names (assigning recompile_warn_limit keeps working).
from .compile import dynamo  # noqa: E402
sys.modules[__name__ + ".dynamo"] = dynamo

# torch.autocast("tpu") defaults to bfloat16; `import torch.tpu.amp` works as for torch.cuda.amp.
from .device import amp as _amp  # noqa: E402
_amp._install()
sys.modules["torch.tpu.amp"] = _amp

# accelerate (and so the HF Trainer) falls back to tpu instead of cpu (integrations/accelerate.py says why).
from .integrations import accelerate as _accelerate_hook  # noqa: E402
_accelerate_hook.install()
