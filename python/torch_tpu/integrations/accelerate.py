"""Makes Hugging Face `accelerate` (and so `transformers.Trainer`) choose `tpu`.

How the two libraries pick a device (transformers 5.18, accelerate 1.15):
- `TrainingArguments.device` is `tpu:0` when a package named `torch_tpu` is
  importable and `torch.tpu.is_available()` (transformers' own code for a
  `tpu` torch device); the Trainer moves the model there.
- `accelerate.PartialState` (behind `Accelerator`, which the Trainer creates
  and which moves the batches) takes `ACCELERATE_TORCH_DEVICE` if set, the CPU
  for `cpu=True`, and otherwise `PartialState.default_device`: a fixed chain
  of vendor checks (mps, mlu, sdaa, musa, npu, hpu, cuda, xpu, neuron) ending
  in `cpu`, with no branch for a PrivateUse1 backend. So the model lands on
  `tpu:0` and the batches on `cpu`.

Setting `ACCELERATE_TORCH_DEVICE=tpu` at import would not do: accelerate
lets it override `cpu=True` too, so `TrainingArguments(use_cpu=True)` and
`Accelerator(cpu=True)` would stop meaning the CPU in every process that
imports torch (which autoloads torch_tpu). Instead, when `accelerate.state` is
imported, `PartialState.default_device` gets one more step at the end of its
chain: where it would answer `cpu` and a `tpu` device is available, it answers
the current `tpu` device. Every device accelerate knows, `cpu=True` and
`ACCELERATE_TORCH_DEVICE` keep their precedence. accelerate's files are not
changed; the hook wraps the module as it is imported (or at once, if it
already is).
"""
import importlib.abc
import sys

import torch

_MODULE = "accelerate.state"


def _tpu_after_accelerates_own_choice(state_module):
    cls = state_module.PartialState
    chosen = cls.__dict__.get("default_device")
    if not isinstance(chosen, property) or getattr(chosen.fget, "_torch_tpu", False):
        return

    def default_device(self):
        device = chosen.fget(self)
        if device.type == "cpu" and torch.tpu.is_available():
            return torch.device("tpu", torch.tpu.current_device())
        return device

    default_device._torch_tpu = True
    cls.default_device = property(default_device, doc=chosen.__doc__)


class _Loader(importlib.abc.Loader):
    """The module's own loader, then the hook."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _tpu_after_accelerates_own_choice(module)

    def __getattr__(self, name):  # get_source, get_filename... for inspect and linecache
        return getattr(self._loader, name)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != _MODULE:
            return None
        # The finder that would have found it (the path finder, or an
        # editable install's own), asked past this one.
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        if spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader)
        return spec


def install():
    if _MODULE in sys.modules:
        _tpu_after_accelerates_own_choice(sys.modules[_MODULE])
    elif not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
