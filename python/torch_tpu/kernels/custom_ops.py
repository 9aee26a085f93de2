"""User kernels as PyTorch operators: `stablehlo_op` here, `jax_op` in jax_op.py.

Each kernel is a `torch.library.custom_op` taking tensors and returning a
list of tensors. Its tpu implementation finds the StableHLO module for the
input signature (dtypes and shapes; a kernel is built per signature, as XLA
programs have static shapes) and records one custom-call node through the
same runtime path as every lowered ATen op: it runs asynchronously in strict
mode, fuses with its neighbours under defer_and_fuse, and is captured inside
`torch.compile(backend="tpu")` graphs (Dynamo sees an opaque operator with a
fake implementation, so there is no graph break). The module text is
embedded into our programs as private functions called with `func.call`.
"""
from __future__ import annotations

import threading

import torch

from .. import _C

_lock = threading.Lock()


def _signature(tensors) -> tuple:
    return tuple((t.dtype, tuple(t.shape)) for t in tensors)


class KernelOp:
    """A user kernel registered as the operator `name` ("namespace::name").

    Calling it with tensors returns one tensor, or a tuple when the kernel
    has several results. `.op` is the `torch.ops` overload;
    `.register_autograd(backward, setup_context=...)` is torch.library's
    (the gradients of the results arrive as a list)."""

    def __init__(self, name: str, nargs: int | None, build, *, describe: str):
        # build(signature) -> module text for that input signature. nargs
        # None: the operator takes one list of tensors (a kernel whose arity
        # depends on the signature, like a derived backward).
        _check_name(name, describe)
        self.name = name
        self.nargs = nargs
        self._build = build
        self._describe = describe
        self._modules: dict[tuple, tuple[int, list]] = {}  # signature -> (id, output types)
        if nargs is None:
            schema = "(Tensor[] args) -> Tensor[]"
            kernel, wrong, fake = self._list_kernel, self._list_wrong_device, self._list_fake
        else:
            schema = "(" + ", ".join(f"Tensor a{i}" for i in range(nargs)) + ") -> Tensor[]"
            kernel, wrong, fake = self._tpu_kernel, self._wrong_device, self._fake
        self._opdef = torch.library.custom_op(name, kernel, mutates_args=(), device_types="tpu",
                                              schema=schema)
        self._opdef.register_kernel("cpu", wrong)
        self._opdef.register_fake(fake)
        ns, short = name.split("::")
        self.op = getattr(getattr(torch.ops, ns), short).default

    # ---- modules per signature
    def module(self, signature: tuple) -> tuple[int, list]:
        """(module id, output types) for an input signature, built on first use."""
        found = self._modules.get(signature)
        if found is not None:
            return found
        with _lock:
            found = self._modules.get(signature)
            if found is None:
                text = self._build(signature)
                found = _register(self.name, text, signature)
                self._modules[signature] = found
        return found

    def output_types(self, signature: tuple) -> list:
        """Output types for a signature, without building a module when the
        kernel can say them another way (jax_op: jax.eval_shape)."""
        found = self._modules.get(signature)
        if found is not None:
            return found[1]
        return self._output_types(signature)

    def _output_types(self, signature: tuple) -> list:
        return self.module(signature)[1]

    # ---- torch.library implementations
    def _tpu_kernel(self, *tensors):
        mid, _ = self.module(_signature(tensors))
        return _C._custom_call(mid, list(tensors))

    def _wrong_device(self, *tensors):
        devices = sorted({str(t.device) for t in tensors})
        raise RuntimeError(f"{self.name}: the kernel runs on tpu; got tensors on {', '.join(devices)} "
                           "(move them with .to('tpu'))")

    def _fake(self, *tensors):
        device = tensors[0].device if tensors else torch.device("tpu")
        return [torch.empty(shape, dtype=dtype, device=device)
                for dtype, shape in self.output_types(_signature(tensors))]

    def _list_kernel(self, tensors):
        return self._tpu_kernel(*tensors)

    def _list_wrong_device(self, tensors):
        return self._wrong_device(*tensors)

    def _list_fake(self, tensors):
        return self._fake(*tensors)

    # ---- user API
    def __call__(self, *tensors):
        if self.nargs is not None and len(tensors) != self.nargs:
            raise TypeError(f"{self.name}: expected {self.nargs} tensor arguments, got {len(tensors)}")
        for i, t in enumerate(tensors):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"{self.name}: argument {i} is {type(t).__name__}, not a tensor")
        outs = self._opdef(list(tensors)) if self.nargs is None else self._opdef(*tensors)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def register_autograd(self, backward, *, setup_context=None):
        self._opdef.register_autograd(backward, setup_context=setup_context)
        return self

    def __repr__(self):
        return f"<{self._describe} {self.name}>"


def _check_name(name, describe: str):
    if not isinstance(name, str) or name.count("::") != 1 or not all(name.split("::")):
        raise ValueError(f"{describe}: name must be 'namespace::name', got {name!r}")


def register_module(name: str, text: str, signature: tuple | None = None) -> tuple[int, list, list]:
    """Registers the text, compiles it alone once (so that the plugin's
    parser reports problems now, naming the op), and checks that it takes
    the signature's inputs when one is given. Returns (module id, input
    types, output types)."""
    mid, ins, outs = _C._custom_module(name, text)
    ins = [(d, tuple(s)) for d, s in ins]
    if signature is not None:
        want = [(dtype, shape) for dtype, shape in signature]
        if ins != want:
            raise TypeError(f"{name}: the module's @main takes {signature_text(ins)} but it is "
                            f"called with {signature_text(want)}")
    _C._check_custom_module(mid, torch.tpu.current_device())
    return mid, ins, [(d, tuple(s)) for d, s in outs]


def _register(name: str, text: str, signature: tuple) -> tuple[int, list]:
    mid, _, outs = register_module(name, text, signature)
    return mid, outs


def signature_text(types) -> str:
    """[(dtype, shape)] as messages and cache keys write it: "(float32[4, 8])"."""
    return "(" + ", ".join(f"{str(d).replace('torch.', '')}{list(s)}" for d, s in types) + ")"


def stablehlo_op(name: str, module_text: str) -> KernelOp:
    """The StableHLO module `module_text` as the operator `name`.

    Its inputs and outputs are the types of its `func.func @main`. The module
    is read and compiled by the PJRT plugin now: a parse error raises
    ValueError with the plugin's message (and line). It has no gradient
    unless one is registered with `.register_autograd`."""
    if not isinstance(module_text, str):
        raise TypeError(f"stablehlo_op({name!r}): module_text must be a str, got "
                        f"{type(module_text).__name__}")
    _check_name(name, "stablehlo_op")
    _, ins, _ = _C._custom_module(name, module_text)
    sig = tuple((d, tuple(s)) for d, s in ins)
    found = _register(name, module_text, sig)

    def only_signature(signature):
        raise TypeError(f"{name}: the module takes {signature_text(sig)}; called with "
                        f"{signature_text(signature)}")

    op = KernelOp(name, len(sig), only_signature, describe="stablehlo_op")
    op._modules[sig] = found
    return op
