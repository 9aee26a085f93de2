"""Traced jax_op modules in the persistent cache, so that a later process runs
a kernel without tracing it (and without importing JAX).

An entry is stored by the runtime's persistent cache (csrc/runtime/disk_cache:
same folder, TORCH_TPU_CACHE_DIR, same checksummed atomic files and size
bound, keyed by the plugin as well). Its key must never give a stale module,
so it holds everything the traced text depends on: the op name, the input
signature, the lowering platform and the Pallas choice, the plugin's
attributes (its StableHLO window: the text was checked against it), the
Python and numpy versions, JAX_* environment variables, our lowering code,
and a fingerprint of the function. The JAX and jaxlib versions and JAX's
tracing options are written into the entry and compared when read: a process
where JAX is installed uses only an entry traced by that JAX (and, when JAX
is imported, under the same options); a process without JAX uses what a JAX
traced, as it cannot trace itself.

The fingerprint covers the function's code objects recursively (bytecode,
constants, names), its defaults, its closure cells and the globals its code
loads, each by value: numbers, strings, bytes, arrays, dtypes, tuples,
functions (recursively), functools.partial, and modules or classes of JAX,
numpy and the standard library by name (their versions are in the key).
Anything else -- a mutable container, an object of a user class, a jitted
function (its options are not visible), a user module, whose attributes are
not followed -- makes the fingerprint unsafe: the kernel is then kept in
memory only, for that process. A process that never imports JAX cannot see
a `jax.config.update(...)` made by the process that traced; options set in
the environment (JAX_*) are part of the key.
"""
from __future__ import annotations

import dis
import enum
import functools
import hashlib
import importlib.metadata
import os
import sys
import types

from .. import _C, info

_FORMAT = b"TPUTRACE1\n"
# Modules whose contents we name instead of fingerprinting; their versions are
# in the key (JAX's in the entry).
_NAMED_ROOTS = frozenset({"builtins", "functools", "jax", "jaxlib", "math", "ml_dtypes", "numpy",
                          "operator"})


class Unsafe(Exception):
    """The function cannot be fingerprinted safely; the reason says why."""


# ---------------------------------------------------------------- fingerprint

def fingerprint(fn) -> str:
    """A hex digest of everything `fn` computes with; raises Unsafe."""
    h = hashlib.sha256()
    _Walker(h).value(fn, "the function")
    return h.hexdigest()


class _Walker:
    def __init__(self, h):
        self.h = h
        self.active: list = []  # functions being walked (recursion)

    def put(self, *parts):
        for p in parts:
            b = p if isinstance(p, bytes) else str(p).encode()
            self.h.update(len(b).to_bytes(8, "little"))
            self.h.update(b)

    def value(self, v, where: str):
        if v is None or isinstance(v, (bool, int, float, complex, str, bytes)):
            return self.put(type(v).__name__, repr(v))
        if isinstance(v, tuple):
            self.put("tuple", len(v))
            for x in v:
                self.value(x, where)
            return
        if isinstance(v, frozenset):
            self.put("frozenset", len(v))
            for x in sorted(v, key=repr):
                self.value(x, where)
            return
        if isinstance(v, types.FunctionType):
            return self.function(v)
        if isinstance(v, types.MethodType):
            self.put("method")
            self.function(v.__func__)
            return self.value(v.__self__, f"the object of method {v.__func__.__qualname__}")
        if isinstance(v, functools.partial):
            self.put("partial", len(v.args))
            self.value(v.func, where)
            for x in v.args:
                self.value(x, where)
            for k in sorted(v.keywords):
                self.put(k)
                self.value(v.keywords[k], where)
            return
        if isinstance(v, types.ModuleType):
            if _named(v.__name__):
                return self.put("module", v.__name__)
            raise Unsafe(f"{where} refers to module {v.__name__!r}, whose contents are not "
                         "fingerprinted")
        if isinstance(v, type):
            if _named(v.__module__):
                return self.put("type", v.__module__, v.__qualname__)
            raise Unsafe(f"{where} refers to class {v.__qualname__}")
        if isinstance(v, enum.Enum) and _named(type(v).__module__):
            return self.put("enum", type(v).__module__, type(v).__qualname__, v.name)
        if isinstance(v, types.BuiltinFunctionType) and _named(v.__module__ or ""):
            return self.put("builtin", v.__module__, v.__qualname__)
        np = sys.modules.get("numpy")
        if np is not None:
            if isinstance(v, np.ufunc):
                return self.put("ufunc", v.__name__)
            if isinstance(v, np.dtype):
                return self.put("dtype", str(v))
            if isinstance(v, (np.ndarray, np.generic)):
                return self.array(np.asarray(v), where)
        jax = sys.modules.get("jax")
        if jax is not None and isinstance(v, getattr(jax, "Array", ())):
            return self.array(np.asarray(v), where)
        raise Unsafe(f"{where} holds a {type(v).__module__}.{type(v).__qualname__} object"
                     + (" (mutable: its contents may change after tracing)"
                        if isinstance(v, (list, dict, set, bytearray)) else ""))

    def array(self, a, where):
        if a.dtype.hasobject:
            raise Unsafe(f"{where} holds an array of Python objects")
        self.put("array", str(a.dtype), a.shape, hashlib.sha256(a.tobytes()).hexdigest())

    def function(self, f):
        if any(f is g for g in self.active):
            return self.put("recursive", f.__qualname__)
        self.active.append(f)
        try:
            name = f.__qualname__
            self.put("function")
            self.code(f.__code__)
            self.value(f.__defaults__, f"a default of {name}")
            for k in sorted(f.__kwdefaults__ or {}):
                self.put(k)
                self.value(f.__kwdefaults__[k], f"a default of {name}")
            for var, cell in zip(f.__code__.co_freevars, f.__closure__ or ()):
                self.put("closure", var)
                try:
                    content = cell.cell_contents
                except ValueError:
                    self.put("empty")
                    continue
                self.value(content, f"{name}'s closure variable {var!r}")
            builtins = f.__globals__.get("__builtins__", {})
            if isinstance(builtins, types.ModuleType):
                builtins = vars(builtins)
            for var in sorted(_loaded_globals(f.__code__)):
                self.put("global", var)
                if var in f.__globals__:
                    self.value(f.__globals__[var], f"{name}'s global {var!r}")
                elif var in builtins:
                    self.value(builtins[var], f"{name}'s global {var!r}")
                else:
                    self.put("unbound")
        finally:
            self.active.pop()

    def code(self, co):
        self.put("code", co.co_code, co.co_names, co.co_varnames, co.co_freevars, co.co_cellvars,
                 co.co_argcount, co.co_posonlyargcount, co.co_kwonlyargcount, co.co_flags,
                 len(co.co_consts))
        for c in co.co_consts:
            if isinstance(c, types.CodeType):
                self.code(c)
            else:
                self.value(c, f"a constant of {co.co_qualname}")


def _named(module: str) -> bool:
    return module.split(".")[0] in _NAMED_ROOTS


def _loaded_globals(co) -> set:
    names = {i.argval for i in dis.get_instructions(co) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for c in co.co_consts:
        if isinstance(c, types.CodeType):
            names |= _loaded_globals(c)
    return names


# ---------------------------------------------------------------- key and entry

def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return ""


@functools.lru_cache(maxsize=1)
def _process_key() -> str:
    """The parts of every key that are fixed for the process."""
    from . import jax_lower, pallas_interpret

    lowering = hashlib.sha256()
    for module in (jax_lower, pallas_interpret):
        with open(module.__file__, "rb") as f:
            lowering.update(f.read())
    lowering = lowering.hexdigest()
    attrs = sorted(info.platform().get("plugin_attributes", {}).items())
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("JAX_"))
    return (f"python {sys.version_info[0]}.{sys.version_info[1]}\nnumpy {_version('numpy')}\n"
            f"plugin attributes {attrs}\nenvironment {env}\nlowering {lowering}\n")


def key(name: str, signature, platform: str, pallas: str, fn_fingerprint: str) -> str:
    from .custom_ops import signature_text

    return (f"jax_op {name}\ninputs {signature_text(signature)}\n"
            f"platform {platform} pallas {pallas}\n" + _process_key()
            + f"function {fn_fingerprint}")


def _jax_context() -> str | None:
    """JAX's tracing options (the part of its own jit cache key that is
    plain values), when JAX is imported; None when it is not."""
    jax = sys.modules.get("jax")
    if jax is None:
        return None
    try:
        from jax._src import config

        context = config.trace_context()
    except (ImportError, AttributeError):  # another JAX: its version already tells entries apart
        return "unavailable"
    parts = []
    for v in context:
        if v is None or isinstance(v, (bool, int, float, str, enum.Enum)):
            parts.append(repr(v))
        elif isinstance(v, tuple) and all(isinstance(x, (bool, int, float, str)) for x in v):
            parts.append(repr(v))
        else:
            parts.append(type(v).__name__)
    return ",".join(parts)


def load(k: str) -> str | None:
    """The traced text stored under key `k`, or None: missing, damaged, or
    traced by another JAX or under other JAX options than this process has."""
    data = _C._trace_cache_load(k)
    if data is None or not data.startswith(_FORMAT):
        return None
    head, sep, text = data[len(_FORMAT):].partition(b"\n\n")
    if not sep:
        return None
    try:
        fields = dict(line.split(" ", 1) for line in head.decode().split("\n"))
        text = text.decode()
    except (UnicodeDecodeError, ValueError):
        return None
    for dist in ("jax", "jaxlib"):
        have = _version(dist)
        if have and fields.get(dist) != have:
            return None
    context = _jax_context()
    if context is not None and fields.get("context") != context:
        return None
    return text


def store(k: str, text: str):
    head = (f"jax {_version('jax')}\njaxlib {_version('jaxlib')}\ncontext {_jax_context()}")
    _C._trace_cache_store(k, _FORMAT + head.encode() + b"\n\n" + text.encode())
