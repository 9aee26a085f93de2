"""JAX functions to StableHLO text, without a JAX backend.

`jax.jit(fn).lower(...)` (and `jax.export`) pick a device assignment, which
creates a JAX client for the default platform even with abstract inputs and
`lowering_platforms` given. On a TPU host that client would take the chips
from under our PJRT client, so we never let JAX make one: the function is
traced to a jaxpr on abstract values (`jax.make_jaxpr`) and the jaxpr is
lowered with JAX's module lowering for one platform and no backend
(`mlir.lower_jaxpr_to_module`, which `jit` itself calls once it has
devices). That is internal API, hence the exact JAX pin (pyproject's `jax`
extra); the tests check that no backend exists after a kernel runs.

Pallas: on a TPU plugin a `pallas_call` (or a `pl.kernel`, which binds
`mpmd_map`) lowers to its Mosaic custom call. On every other plugin the
lowering rules of `pallas_call` and `mpmd_map` are overridden for this
lowering only so that they run in Pallas' interpret mode (the kernel becomes
plain StableHLO: a loop over the grid with dynamic slices;
pallas_interpret.py). The Mosaic lowering asks the module context for a
backend only to read libtpu's version (`get_backend(optional=True)`), and JAX
would create a TPU client to answer; during our lowering that optional
question is answered "no backend", which Pallas handles by assuming the
oldest libtpu.

Version rule: the loaded plugin must read the StableHLO JAX emits. A plugin
that reports its window (PJRT_Plugin_Attributes "stablehlo_minimum_version"
and "stablehlo_current_version") has each traced module serialized as a
portable artifact for the newer of the two sides' common versions, which
fails, naming both versions, when the module needs something the plugin's
version lacks. A plugin that reports no window gets the older check: a small
JAX module is compiled by it once per process.
"""
from __future__ import annotations

import contextlib
import threading
import warnings

import torch

from .. import _C, info
from . import pallas_interpret

PINNED_JAX = "0.10.2"

_TORCH_TO_JAX = {
    torch.bool: "bool", torch.uint8: "uint8", torch.int8: "int8", torch.int16: "int16",
    torch.int32: "int32", torch.int64: "int64", torch.float16: "float16",
    torch.bfloat16: "bfloat16", torch.float32: "float32", torch.float64: "float64",
    torch.complex64: "complex64", torch.complex128: "complex128", torch.uint16: "uint16",
    torch.uint32: "uint32", torch.uint64: "uint64", torch.float8_e4m3fn: "float8_e4m3fn",
    torch.float8_e5m2: "float8_e5m2",
}
_64_BIT = {torch.int64, torch.float64, torch.complex128, torch.uint64}

_interpret_noted = False


def import_jax(who: str, why: str = ""):
    try:
        import jax  # noqa: F401
        import jax.numpy  # noqa: F401
    except ImportError as e:
        raise ImportError(
            f"{who}: JAX is not installed ({e}){why}. Install it with `pip install "
            f"'torch_tpu[jax]'` (jax=={PINNED_JAX}, jaxlib=={PINNED_JAX}).") from e
    if jax.__version__ != PINNED_JAX:
        warnings.warn(f"torch_tpu custom kernels are tested with JAX {PINNED_JAX}; JAX "
                      f"{jax.__version__} is installed (its StableHLO or internal lowering API may "
                      "differ)", stacklevel=3)
    return jax


def lowering_platform() -> str:
    """The JAX platform whose lowering matches the loaded PJRT plugin."""
    name = info.platform()["platform_name"].lower()
    if name == "tpu":
        return "tpu"
    if name in ("cuda", "gpu"):
        return "cuda"
    if name == "rocm":
        return "rocm"
    return "cpu"


# The chip that Pallas' TPU code (emit_pipeline's tilings, memory sizes) is
# traced for where the plugin is no TPU: the one Pallas' interpret mode
# models by default (JAX's name; TorchTPU and Helion call it "TPU v7").
INTERPRET_MODEL_KIND = "TPU7x"


def pallas_device_kind() -> str:
    """The TPU device kind that kernels are traced for: the TPU's own, as the
    plugin reports it, or INTERPRET_MODEL_KIND on other plugins."""
    if lowering_platform() == "tpu":
        return torch.tpu.get_device_properties().kind
    return INTERPRET_MODEL_KIND


def _traced_for_the_chip():
    """Pallas' TPU code asks JAX for the device kind while it traces, and
    JAX answers from its default device, creating a client for it (on a TPU
    host, one that takes the chips from ours). An abstract device in scope
    answers first: the chip the kernel is traced for."""
    from jax._src import mesh as mesh_lib

    props = torch.tpu.get_device_properties() if lowering_platform() == "tpu" else None
    cores = int(props.attributes.get("num_cores", 1)) if props is not None else 1
    device = mesh_lib.AbstractDevice(device_kind=pallas_device_kind(), num_cores=cores,
                                     platform="tpu")
    return mesh_lib.use_abstract_mesh(mesh_lib.AbstractMesh((), (), abstract_device=device))


def answer_tpu_info_on_jax_cpu():
    """Pallas' `get_tpu_info()` asked outside a kernel trace reads JAX's
    default device, which next to torch_tpu is JAX's CPU device (JAX never
    drives the chips here), and fails there ("Unsupported TPU device kind:
    cpu"). Helion asks it for its VMEM budget before it traces. Pallas'
    registry of other device kinds answers it instead with the chip that
    kernels are traced for (pallas_device_kind: the TPU's own, or TPU7x,
    which interpret form models and Helion's interpret mode registers), as
    Helion 1.5.1 registers itself with TorchTPU; an entry already there is
    kept. Numerics do not change: the question failed before."""
    try:
        from jax._src.pallas.mosaic import tpu_info
    except ImportError:
        return

    def info():
        kind = pallas_device_kind()
        chip = tpu_info.chip_version_from_device_kind(kind)
        if chip is None:
            raise ValueError(f"torch_tpu: Pallas has no chip information for the TPU kind {kind!r}")
        return tpu_info.get_tpu_info_for_chip(chip, 1)

    tpu_info.registry.setdefault("cpu", info)


def pallas_lowering(platform: str) -> str:
    """How a pallas_call is lowered for a JAX platform: "mosaic" (TPU) or
    "interpret" (plain StableHLO, every other plugin)."""
    return "mosaic" if platform == "tpu" else "interpret"


def plugin_window():
    """(minimum, current) StableHLO version the plugin reads, or None."""
    return _C._stablehlo_window()


def _version_tuple(v: str):
    return tuple(int(p) for p in v.split("."))


def window_error(jax_window, plugin_window_) -> str | None:
    """Why no StableHLO version lies in both windows ((minimum, current)
    each), or None when one does."""
    (jmin, jcur), (pmin, pcur) = jax_window, plugin_window_
    if _version_tuple(pcur) < _version_tuple(jmin):
        return (f"the plugin reads StableHLO {pmin} to {pcur}, older than the oldest this JAX "
                f"writes ({jmin}; it writes {jmin} to {jcur})")
    if _version_tuple(jcur) < _version_tuple(pmin):
        return (f"this JAX writes StableHLO {jmin} to {jcur}, older than the oldest the plugin "
                f"reads ({pmin}; it reads {pmin} to {pcur})")
    return None


def check_version(module, who: str, window=None):
    """Raises RuntimeError, naming JAX's and the plugin's StableHLO versions,
    when the plugin cannot read `module` (an ir.Module JAX lowered). Returns
    False when the plugin reports no window (nothing was checked)."""
    import jax
    from jax._src.lib.mlir import ir
    from jax._src.lib.mlir.dialects import hlo

    window = window if window is not None else plugin_window()
    if window is None:
        return False
    jax_window = (hlo.get_minimum_version(), hlo.get_current_version())
    pmin, pcur = window

    def fail(why):
        raise RuntimeError(
            f"{who}: the PJRT plugin cannot read the StableHLO that JAX {jax.__version__} emits: "
            f"{why}. Use a JAX whose StableHLO the plugin reads (torch_tpu pins "
            f"jax=={PINNED_JAX}: pip install 'torch_tpu[jax]') or a newer plugin")

    why = window_error(jax_window, window)
    if why:
        fail(why)
    target = hlo.get_smaller_version(jax_window[1], pcur)
    diagnostics = []

    def collect(d):
        diagnostics.append(str(d.message))
        return True

    with module.context:
        handler = module.context.attach_diagnostic_handler(collect)
        try:
            # Serializing converts the module it is given to VHLO: a copy.
            copy = ir.Module.parse(module.operation.get_asm(enable_debug_info=False))
            hlo.serialize_portable_artifact(copy, target, allow_other_dialects=True)
        except Exception as e:  # noqa: BLE001 - the binding raises ValueError
            detail = "; ".join(diagnostics) or str(e)
            fail(f"the module needs StableHLO newer than {target}, the newest the plugin reads "
                 f"(JAX writes {jax_window[1]}, the plugin reads {pmin} to {pcur}): {detail}")
        finally:
            handler.detach()
    return True


# Lowerings patch JAX's module context (the Mosaic backend question) for their
# duration; one at a time.
_lowering_lock = threading.Lock()


@contextlib.contextmanager
def _no_backend_for_optional_questions():
    from jax._src.interpreters import mlir

    original = mlir.ModuleContext.get_backend

    def get_backend(self, optional=False):
        if optional and self.backend is None:
            return None
        return original(self, optional=optional)

    mlir.ModuleContext.get_backend = get_backend
    try:
        yield
    finally:
        mlir.ModuleContext.get_backend = original


def jax_dtype(dtype, who: str):
    """The JAX dtype of a torch dtype; TypeError naming `who` when JAX
    kernels cannot take it."""
    import jax.numpy as jnp

    if dtype not in _TORCH_TO_JAX:
        raise TypeError(f"{who}: tensors of dtype {str(dtype).replace('torch.', '')} cannot be "
                        "passed to a JAX kernel")
    return jnp.dtype(_TORCH_TO_JAX[dtype])


def abstract_values(signature, who: str):
    import jax

    return [jax.ShapeDtypeStruct(shape, jax_dtype(dtype, who)) for dtype, shape in signature]


def _x64(signature):
    """JAX drops 64-bit types unless x64 is enabled; a signature with them is
    traced with x64 on, so the kernel sees the tensors' own dtypes."""
    import contextlib

    import jax

    if any(dtype in _64_BIT for dtype, _ in signature):
        return jax.enable_x64(True)
    return contextlib.nullcontext()


def _flat(fn, who, trees=None):
    """fn with its results flattened to a list of arrays (their pytree
    structure appended to `trees` when given)."""
    import jax

    def flat(*args):
        out = fn(*args)
        leaves, tree = jax.tree_util.tree_flatten(out)
        if trees is not None:
            trees.append(tree)
        for leaf in leaves:
            if not hasattr(leaf, "shape") or not hasattr(leaf, "dtype"):
                raise TypeError(f"{who}: the function must return JAX arrays (or a tuple/list of "
                                f"them); it returned {type(leaf).__name__}")
        if not leaves:
            raise TypeError(f"{who}: the function returned no arrays")
        return leaves

    return flat


def _traced(who, what, signature):
    """Exceptions raised by the user's function while it is traced, with the
    op and the signature in front (same exception class where it allows)."""
    import contextlib

    @contextlib.contextmanager
    def scope():
        try:
            yield
        except Exception as e:
            if str(e).startswith(who):
                raise
            from .custom_ops import signature_text

            message = (f"{who}: {what} for inputs {signature_text(signature)} failed: "
                       f"{type(e).__name__}: {e}")
            try:
                err = type(e)(message)
            except Exception:
                err = RuntimeError(message)
            raise err from e

    return scope()


def output_types(fn, signature, who: str) -> list:
    """[(torch dtype, shape)] of fn's results, by jax.eval_shape."""
    import jax

    with _traced(who, "tracing the function", signature), _x64(signature), _traced_for_the_chip():
        outs = jax.eval_shape(_flat(fn, who), *abstract_values(signature, who))
    return [(_to_torch(o.dtype, who), tuple(o.shape)) for o in outs]


def _to_torch(dtype, who):
    name = str(dtype)
    for t, n in _TORCH_TO_JAX.items():
        if n == name:
            return t
    raise TypeError(f"{who}: the function returns an array of dtype {name}, which a tpu tensor "
                    "cannot hold")


def _internal_refs(closed) -> bool:
    """Whether the function creates refs inside itself (`jax.new_ref`, as
    Helion's TPU pipelines alias HBM with them). They are discharged into
    plain values before lowering, as `jit` does (the module lowering refuses
    their effect); a Pallas kernel writing through them gets them as inputs
    aliased to outputs, which interpret form keeps on one buffer as Mosaic
    does (pallas_interpret.py; JAX's own interpret mode loses those writes)."""
    from jax._src import core

    return any(isinstance(e, core.InternalMutableArrayEffect) for e in closed.effects)


def lower(fn, signature, who: str, *, check=True, trees=None) -> str:
    """The StableHLO text of fn for the input signature [(torch dtype, shape)],
    checked against the plugin's StableHLO window (check_version). `trees`,
    when given, receives the pytree structure of fn's result."""
    import jax
    from jax._src import sharding_impls
    from jax._src.interpreters import mlir, pxla

    platform = lowering_platform()
    params = mlir.LoweringParameters()
    interpreted = []  # per kernel lowered in interpret form: its aliases that lose writes
    if pallas_lowering(platform) == "interpret":
        params = mlir.LoweringParameters(override_lowering_rules=pallas_interpret.rules(interpreted))
    flat = _flat(fn, who, trees)
    with _traced(who, "tracing the function", signature), _x64(signature), _lowering_lock, \
            _no_backend_for_optional_questions(), _traced_for_the_chip():
        closed = jax.make_jaxpr(flat)(*abstract_values(signature, who))
        refs = _internal_refs(closed)
        if refs:
            closed = pxla._discharge_internal_refs(closed)
        for aval in closed.out_avals:
            _to_torch(aval.dtype, who)
        n = len(closed.in_avals)
        result = mlir.lower_jaxpr_to_module(
            "jax_op", closed, num_const_args=0, in_avals=closed.in_avals, ordered_effects=[],
            platforms=(platform,), backend=None,
            axis_context=sharding_impls.ShardingContext(1), donated_args=[False] * n,
            lowering_parameters=params)
    if refs and any(interpreted):
        raise NotImplementedError(
            f"{who}: the function creates refs (jax.new_ref) that its Pallas kernels write "
            f"through, and a kernel also aliases an input that is not a whole array in HBM; "
            f"Pallas' interpret form, which runs kernels on this '{platform}' plugin, would lose "
            "writes through it (pallas_interpret.py)")
    if interpreted:
        _note_interpret(platform)
    if check and not check_version(result.module, who):
        check_by_compiling(who)
    return result.module.operation.get_asm(enable_debug_info=False)


_compiled_probe = False


def check_by_compiling(who: str):
    """For a plugin that reports no StableHLO window: one small JAX module is
    compiled by it, once per process, and a failure names both sides."""
    global _compiled_probe
    if _compiled_probe:
        return
    import jax

    text = lower(lambda x: x * 2 + 1, [(torch.float32, (2,))], who, check=False)
    try:
        mid, _, _ = _C._custom_module("torch_tpu::jax_probe", text)
        _C._check_custom_module(mid, torch.tpu.current_device())
    except (ValueError, RuntimeError) as e:
        raise RuntimeError(
            f"{who}: the PJRT plugin cannot read the StableHLO that JAX {jax.__version__} emits "
            f"(torch_tpu is tested with jax=={PINNED_JAX}: pip install "
            f"'torch_tpu[jax]'). The plugin said: {e}") from e
    _compiled_probe = True


def _note_interpret(platform):
    global _interpret_noted
    if not _interpret_noted:
        _interpret_noted = True
        warnings.warn(f"torch_tpu: Pallas kernels run in Pallas' interpret mode on this "
                      f"'{platform}' plugin (plain StableHLO); they lower to Mosaic only on TPU",
                      stacklevel=4)
