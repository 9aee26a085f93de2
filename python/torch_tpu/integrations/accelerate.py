"""Makes Hugging Face `accelerate` (and so `transformers.Trainer` and
`from_pretrained(device_map="auto")`) choose `tpu`.

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
`ACCELERATE_TORCH_DEVICE` keep their precedence.

`from_pretrained(..., device_map="auto")` plans placement with
`accelerate.utils.get_max_memory()` (transformers wraps it): with no
`max_memory` given it asks the vendor modules it knows (npu, mlu, sdaa, musa,
xpu, hpu, else cuda) for each device's free memory, finds none, and puts the
whole model on the CPU. Where it found no accelerator and a `tpu` device is
available, the hook adds each `tpu` device's free memory
(`torch.tpu.mem_get_info`) under its index, ahead of the CPU, as accelerate
does for CUDA devices; accelerate then fills the devices first and spills to
the CPU (then disk) what does not fit. A plain index means `tpu` to torch
(`torch.device(0)` is the current accelerator), so the rest of accelerate's
placement needs nothing. On the CPU plugin, device memory is host memory,
so the two budgets overlap there.

`TrainingArguments(torch_compile_backend="tpu")` and `Accelerator(
dynamo_backend="tpu")` go through accelerate's `DynamoBackend`, a closed enum
of the backend names it knows (it has one for AWS's Neuron, none for us), so
"tpu" raised `'TPU' is not a valid DynamoBackend`. The hook adds a `TPU`
member: accelerate hands its lower-cased value, `tpu`, to `torch.compile`.

accelerate's files are not changed; the hooks wrap each module as it is
imported (or at once, if it already is).
"""
import functools
import importlib.abc
import sys

import torch


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


def _tpu_in_memory_planning(modeling_module):
    planned_by_accelerate = modeling_module.get_max_memory
    if getattr(planned_by_accelerate, "_torch_tpu", False):
        return

    def tpu_only():
        return torch.tpu.is_available() and not torch.cuda.is_available()

    @functools.wraps(planned_by_accelerate)
    def get_max_memory(max_memory=None):
        if max_memory is None:
            planned = planned_by_accelerate(None)
            if not any(isinstance(k, int) for k in planned) and tpu_only():
                devices = {i: torch.tpu.mem_get_info(i)[0] for i in range(torch.tpu.device_count())}
                planned = {**devices, **planned}  # devices first: accelerate fills them in order
            return planned
        if not tpu_only() or not any(isinstance(k, int) for k in max_memory):
            return planned_by_accelerate(max_memory)
        # Given budgets (transformers passes its own plan back in): accelerate
        # would check the indices against torch.cuda's devices and warn that
        # none exists. Sizes become bytes in the caller's dict, as accelerate
        # converts them (transformers reads them back).
        for k, v in max_memory.items():
            if isinstance(v, str):
                max_memory[k] = modeling_module.convert_file_size_to_int(v)
        count = torch.tpu.device_count()
        for k in max_memory:
            if isinstance(k, int) and not 0 <= k < count:
                modeling_module.logger.warning(
                    f"Device {k} is not available, available devices are {list(range(count))}")
        devices = {k: max_memory[k] for k in sorted(k for k in max_memory if isinstance(k, int))}
        return {**devices, **planned_by_accelerate({k: v for k, v in max_memory.items() if not isinstance(k, int)})}

    get_max_memory._torch_tpu = True
    modeling_module.get_max_memory = get_max_memory
    # Modules that took the name before the hook ran (imported ahead of torch_tpu).
    utils = sys.modules.get("accelerate.utils")
    if utils is not None and getattr(utils, "get_max_memory", None) is planned_by_accelerate:
        utils.get_max_memory = get_max_memory
    hf = sys.modules.get("transformers.integrations.accelerate")
    if hf is not None and getattr(hf, "accelerate_max_memory", None) is planned_by_accelerate:
        hf.accelerate_max_memory = get_max_memory


def _tpu_as_a_dynamo_backend(dataclasses_module):
    cls = dataclasses_module.DynamoBackend
    if "TPU" in cls.__members__:
        return
    # Python's Enum has no public way to add a member; these are the tables
    # its lookups (by value, by name, iteration) read.
    member = str.__new__(cls, "TPU")
    member._name_ = member._value_ = "TPU"
    member.__objclass__ = cls
    cls._member_map_["TPU"] = member
    cls._value2member_map_["TPU"] = member
    cls._member_names_.append("TPU")


# Module name -> what is done to it once it has run.
_HOOKS = {
    "accelerate.state": _tpu_after_accelerates_own_choice,
    "accelerate.utils.dataclasses": _tpu_as_a_dynamo_backend,
    "accelerate.utils.modeling": _tpu_in_memory_planning,
}


class _Loader(importlib.abc.Loader):
    """The module's own loader, then the hook."""

    def __init__(self, loader, hook):
        self._loader = loader
        self._hook = hook

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._hook(module)

    def __getattr__(self, name):  # get_source, get_filename... for inspect and linecache
        return getattr(self._loader, name)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        hook = _HOOKS.get(name)
        if hook is None:
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
        spec.loader = _Loader(spec.loader, hook)
        return spec


def install():
    for name, hook in _HOOKS.items():
        if name in sys.modules:
            hook(sys.modules[name])
    if not all(name in sys.modules for name in _HOOKS) and not any(
            isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
