"""`torch.compile(model, backend="tpu")`.

Dynamo captures Python frames as FX graphs; AOTAutograd turns each into a
functional ATen forward graph (and a backward graph when gradients are
needed), decomposing only the ops that have no `tpu` kernel. Each ATen graph
is then *captured*: its ops run once on the real `tpu` inputs in the runtime's
tracing mode (`_C._capture_begin` / `_capture_end`), where they are recorded
through the same lowerings as eager instead of executed, giving ONE StableHLO
module per graph with the inputs as parameters. The compiled program is kept
per input signature (shapes, strides, dtypes, plain-number arguments) and
launched on every later call; inputs the graph mutates (optimizer state,
buffers) are written back in place. Executables also go to the runtime's
in-memory and on-disk cache, so a new process reuses them.

Semantics (docs/compile.md has them at length):
- Shapes are static in XLA. With `dynamic=False`/`None`, Dynamo specializes and
  recompiles on a new shape (its guards decide). With `dynamic=True` Dynamo
  traces once with symbolic sizes and this backend compiles one program per
  concrete shape signature it meets (one capture + XLA compile per new shape).
- A graph whose ops all have `tpu` kernels is captured. A graph that uses an
  op without a `tpu` kernel (and no decomposition) is refused at compile time
  with a NotImplementedError naming the op, unless TORCH_TPU_CPU_FALLBACK=1,
  where that graph runs op by op in eager mode (the op on the CPU).
- A graph with an op whose result size depends on values (nonzero, a
  boolean-mask index) runs op by op in eager mode: a capture records values,
  it cannot read them to size a result.
- A graph that takes or computes CPU tensors (e.g. a non-`capturable`
  optimizer's step counters) runs op by op in eager mode: a capture replays
  only device work, so CPU work would happen once instead of every call.
- Written-out attention (softmax(q @ k^T * c + causal mask) @ v) is rewritten
  into scaled_dot_product_attention first, so that it runs the fused SDPA
  kernel (attention_fusion.py says when).
- A function recompiled more than `recompile_warn_limit` times warns
  (`TpuRecompileWarning`) with the guard that failed.
"""
from __future__ import annotations

import functools
import threading
import warnings

import torch

from .. import _C
from ..dynamic import dynamic_dims, padding
from ..eager import eager_mode, flush
from . import attention_fusion, grouped_mm
from .capture import NotWholeBase, ReadsItsOwnValue, capture_program
from .device_interface import TpuInterface  # noqa: F401  (torch_tpu.dynamo.TpuInterface)
from .device_interface import register as _register_device_interface

__all__ = ["TpuRecompileWarning", "TpuInterface", "backend", "compile_stats", "fuse_attention",
           "recompile_warn_limit", "reset"]

# Warn when Dynamo compiles the same frame more than this many times (Dynamo
# itself gives up compiling a frame at torch._dynamo.config.recompile_limit,
# 8 by default, and runs it eagerly from then on).
recompile_warn_limit = 4

# Rewrite written-out attention into scaled_dot_product_attention, so that
# it runs the fused SDPA kernel (attention_fusion.py); False keeps graphs as
# written (benchmarks/compile.py's compile_tpu_unfused compares the two).
fuse_attention = True


class TpuRecompileWarning(UserWarning):
    """The same function was recompiled more than `recompile_warn_limit` times."""


# ---------------------------------------------------------------- op support

@functools.lru_cache(maxsize=None)
def _has_tpu_kernel(name: str) -> bool:
    """An ATen op runs on tpu: it has a tpu kernel of its own (a lowering or a
    native view/copy kernel), or a composite kernel made of other ops."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    try:
        return any(has(name, key) for key in (
            "PrivateUse1", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional",
            "CompositeImplicitAutograd"))
    except RuntimeError:
        return False


def _op_name(op) -> str | None:
    if isinstance(op, torch._ops.OpOverload):
        return op.name()
    return None


_decomp_cache: dict | None = None


def decompositions() -> dict:
    """The decompositions AOTAutograd applies: PyTorch's core-ATen
    decompositions (then its wider table) for the ops that have no tpu kernel
    only; every op we can lower stays whole."""
    global _decomp_cache
    if _decomp_cache is None:
        from torch._decomp import core_aten_decompositions, decomposition_table

        table = {}
        for source in (decomposition_table, core_aten_decompositions()):  # core wins
            for op, fn in source.items():
                name = _op_name(op)
                if name is not None and not _has_tpu_kernel(name):
                    table[op] = fn
        _decomp_cache = table
    return _decomp_cache


def _cpu_fallback_enabled() -> bool:
    for name, _meaning, value in _C._env_table():
        if name == "TORCH_TPU_CPU_FALLBACK":
            return str(value).strip() not in ("", "0", "false", "False")
    return False


def _tensors(v):
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in _tensors(x)]
    return []


_RANDOM_TAGS = (torch.Tag.nondeterministic_seeded,)


def _analyze(gm: torch.fx.GraphModule):
    """(ops without a tpu kernel, why the graph must run op by op or None).

    Ops on CPU tensors run on the CPU while the graph is captured, once: that
    is right for constants (a `torch.tensor(...)` in the model, factories), and
    wrong for anything that depends on a CPU *input* or on a random draw, whose
    value must be recomputed on every call."""
    missing, host_reason = [], None
    tainted = set()
    for node in gm.graph.nodes:
        vals = _tensors(node.meta.get("val"))
        on_cpu = [v for v in vals if v.device.type != "tpu"]
        if node.op == "placeholder":
            if on_cpu:
                tainted.add(node)
                host_reason = host_reason or f"input {node.name} is a {on_cpu[0].device} tensor"
            continue
        if node.op != "call_function":
            continue
        ins = [a for a in node.all_input_nodes]
        in_vals = [t for a in ins for t in _tensors(a.meta.get("val"))]
        on_tpu = any(v.device.type == "tpu" for v in vals + in_vals)
        name = _op_name(node.target)
        if on_tpu:
            if name is not None and not _has_tpu_kernel(name) and name not in missing:
                missing.append(name)
        elif on_cpu:
            random = isinstance(node.target, torch._ops.OpOverload) and any(
                t in node.target.tags for t in _RANDOM_TAGS)
            if random or any(a in tainted for a in ins):
                tainted.add(node)
                host_reason = host_reason or f"{node.name} ({name}) computes on the CPU every call"
    for node in gm.graph.nodes:
        if node.op == "output":
            outs = node.args[0] if node.args else ()
            for o in (outs if isinstance(outs, (list, tuple)) else [outs]):
                if isinstance(o, torch.fx.Node):
                    for v in _tensors(o.meta.get("val")):
                        if v.device.type != "tpu":
                            host_reason = host_reason or f"output {o.name} is a {v.device} tensor"
    return missing, host_reason


# ---------------------------------------------------------------- compiled graphs

_stats = {"captures": 0, "graphs": 0, "eager_graphs": 0, "fused_attention": 0, "runs": 0}
_lock = threading.Lock()


def compile_stats() -> dict:
    """Counters of this process: graphs compiled by the backend, captures
    (one per graph and input signature), graphs run eagerly, written-out
    attentions rewritten into SDPA, program runs."""
    return dict(_stats)


def _symbolic_inputs(gm: torch.fx.GraphModule) -> list:
    """The graph's tensor inputs (placeholder indices) with a dimension of
    symbolic size that the graph does not write."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    written = {n.args[0] for n in gm.graph.nodes
               if n.op == "call_function" and getattr(n.target, "_schema", None) is not None
               and n.target._schema.is_mutable and n.args}
    found = []
    for i, n in enumerate(placeholders):
        val = n.meta.get("val")
        if isinstance(val, torch.Tensor) and n not in written and any(
                isinstance(size, torch.SymInt) and not isinstance(size.node.maybe_as_int(), int)
                for size in val.shape):
            found.append(i)
    return found


_ASSERTS = (torch.ops.aten._assert_async.msg, torch.ops.aten._assert_async.default)


def _asserts_to_outputs(gm: torch.fx.GraphModule) -> list:
    """Moves each `_assert_async` (one_hot's range check, in decompositions)
    to the end of the graph's outputs and returns their messages: a program
    cannot raise, so the caller reads each condition once the program has
    run and raises the assert's RuntimeError. Checked late like CUDA's device
    asserts, but on every call, never dropped."""
    messages, conds = [], []
    for node in list(gm.graph.nodes):
        if node.op == "call_function" and node.target in _ASSERTS:
            conds.append(node.args[0])
            messages.append(node.args[1] if len(node.args) > 1 else
                            "Expected Tensor with single nonzero value, but got zero")
            gm.graph.erase_node(node)
    if conds:
        out = next(n for n in gm.graph.nodes if n.op == "output")
        values = out.args[0]
        values = list(values) if isinstance(values, (list, tuple)) else [values]
        out.args = (tuple(values + conds),)
        gm.recompile()
    return messages


def _views_to_reshapes(gm: torch.fx.GraphModule) -> None:
    """aten.view -> aten.reshape (a view where the strides allow it, else a
    copy, which inside a captured program is just another fused op).

    AOTAutograd chose `view` from the strides the meta functions predict; a
    tpu kernel whose output strides differ (a contiguous attention output
    where the meta keeps the query's layout) would make that view fail while
    the values are the same. The graph is functional, so no alias is lost."""
    changed = False
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is torch.ops.aten.view.default:
            node.target = torch.ops.aten.reshape.default
            changed = True
    if changed:
        gm.recompile()


# Ops that read a tensor's values on the host to size their result
# (csrc/aten/data_dependent.cpp); the index ops only with a boolean mask.
_SIZED_BY_VALUES = {"aten::bincount", "aten::masked_scatter", "aten::masked_select", "aten::nonzero",
                    "aten::repeat_interleave.Tensor", "aten::_unique2", "aten::unique_consecutive",
                    "aten::unique_dim"}
_MASKED_INDEX = {"aten::index.Tensor", "aten::index_put", "aten::index_put_", "aten::_index_put_impl_"}


def _sized_by_values(gm: torch.fx.GraphModule) -> str:
    """The first node that reads values on the host, for the warning."""
    for node in gm.graph.nodes:
        name = _op_name(node.target)
        masks = [t for a in node.all_input_nodes for t in _tensors(a.meta.get("val"))
                 if t.dtype == torch.bool] if name in _MASKED_INDEX else []
        if name in _SIZED_BY_VALUES or masks:
            return f"{node.name} ({name})"
    return "a data-dependent op"


class CompiledGraph:
    """One AOT graph (forward, backward or inference): a program per input
    signature, captured on first use. AOT calls it the boxed way (one list,
    cleared here so that saved activations die as soon as they are used)."""

    def __init__(self, gm: torch.fx.GraphModule, kind: str):
        self._boxed_call = True  # in __dict__, so that functools.wraps copies it
        self.gm = gm
        self.kind = kind
        # A _C.CompiledCall per input signature (the key of its _C.CallPlan),
        # and the one that ran last: a call first tries that one, whose plan
        # checks the new inputs in C++ (csrc/aten/compiled_call.cpp).
        self.programs: dict = {}
        self.last = None
        # Inputs that cover their storage but whose storage holds a buffer of
        # another shape (a (3,) gradient viewing a (1, 3) sum): the capture
        # API needs buffers of the tensor's own shape, so they are copied.
        self.copy_slots: set[int] = set()
        _views_to_reshapes(gm)
        self.asserts = _asserts_to_outputs(gm)
        missing, host_reason = _analyze(gm)
        if missing:
            if not _cpu_fallback_enabled():
                raise NotImplementedError(
                    "torch.compile(backend='tpu'): the graph uses operator(s) without a tpu "
                    f"lowering or decomposition: {', '.join(missing)}. Set "
                    "TORCH_TPU_CPU_FALLBACK=1 to run such graphs op by op (those ops on the "
                    "CPU), or move that code out of the compiled region.")
            host_reason = f"ops without a tpu lowering: {', '.join(missing)}"
        with _lock:
            _stats["graphs"] += 1
        self.eager_reason = None
        if host_reason:
            self._go_eager(host_reason)
        # Inputs of symbolic sizes: their sizes at the first call, and the
        # dimension that has since changed (the one padded from then on).
        self.symbolic = _symbolic_inputs(gm)
        self.first_shapes: dict[int, tuple] = {}
        self.dynamic: dict[int, int] = {}

    def _go_eager(self, reason: str, stacklevel: int = 3):
        self.eager_reason = reason
        with _lock:
            _stats["eager_graphs"] += 1
        article = "an" if self.kind[0] in "aeiou" else "a"
        warnings.warn(f"torch.compile(backend='tpu'): {article} {self.kind} graph runs op by op in "
                      f"eager mode ({reason})", stacklevel=stacklevel)

    def __call__(self, *args):
        args = args[0] if len(args) == 1 and isinstance(args[0], list) else list(args)
        outs = self._call(args)
        if not self.asserts:
            return outs
        kept = len(outs) - len(self.asserts)
        outs, conds = list(outs[:kept]), outs[kept:]
        for cond, message in zip(conds, self.asserts):
            if not bool(cond):  # one host read: the program has run
                raise RuntimeError(message)
        return outs

    def _call(self, args):
        if self.eager_reason:
            with torch.no_grad():
                outs = self.gm(*args)
            args.clear()
            return outs
        if self.symbolic and self._note_sizes(args):
            return self._run_bucketed(args)
        if self.last is not None:
            outs = self.last(args)  # None: not the last call's signature
            if outs is not None:
                _stats["runs"] += 1
                return outs
        for attempt in range(2):
            try:
                plan, key = self._plan(args)
                program = self.programs.get(key)
                if program is None:
                    program = self._capture(args, plan, key)
                outs = program(args)
                if outs is None:  # the plan was made from these inputs
                    raise NotWholeBase()
                self.last = program
                _stats["runs"] += 1
                return outs
            except ReadsItsOwnValue as e:
                # x[mask] = y[mask] and the like, traced whole by Dynamo: the
                # op needs a value the graph computes, which a capture only
                # records. The capture was undone (inputs as they were).
                self._go_eager(f"{e.op} needs a value the graph computes", stacklevel=5)
                return self._call(args)
            except NotWholeBase:
                if attempt:
                    raise RuntimeError("torch.compile(backend='tpu'): could not make the inputs "
                                       "whole contiguous buffers") from None
                self._find_copy_slots(args)

    def _note_sizes(self, args) -> bool:
        """Whether some symbolic input has changed size since the first call."""
        for i in self.symbolic:
            a = args[i]
            if i in self.dynamic or not isinstance(a, torch.Tensor):
                continue
            first = self.first_shapes.setdefault(i, tuple(a.shape))
            changed = [d for d, (x, y) in enumerate(zip(first, a.shape)) if x != y]
            if changed and len(first) == a.dim():
                self.dynamic[i] = changed[0]
        return bool(self.dynamic)

    def _run_bucketed(self, args):
        """A graph with symbolic sizes (dynamic=True, mark_dynamic) whose
        inputs changed size: each such input is padded along the dimension
        that changed (runtime/dynamic_dims.h) and the graph's ops recorded
        into one deferred graph, keyed by the buckets rather than the sizes,
        so one program serves every size of a bucket. A captured program
        could not: it bakes the sizes the padded ops take as numbers. Inputs
        the graph writes to stay as given."""
        for i, d in self.dynamic.items():
            a = args[i]
            if isinstance(a, torch.Tensor) and a.device.type == "tpu" and padding(a) is None:
                args[i] = dynamic_dims(a, d)
        with torch.no_grad(), eager_mode("defer_and_fuse"):
            outs = self.gm(*args)
            flush("torch.compile")
        args.clear()
        return outs

    def _plan(self, args):
        """How each graph input reaches the program, and the cache key.

        The program's inputs are whole contiguous buffers. A tensor that is
        one is passed as is; a tensor over part of a storage (a transpose or
        a slice of another; a saved activation AOTAutograd detached from its
        base) passes the storage's buffer, once however many tensors over it
        come in, and the view is taken inside the program; a tensor whose
        storage holds a buffer of another dtype is copied (and written back
        if the graph mutates it).
        _C.CallPlan does it per input (C++: hundreds of inputs per training
        step); its key covers those choices, the inputs' signatures and the
        float32 matmul precision (a capture bakes it into its program, and
        Dynamo's guards do not see all of PyTorch's switches for it). The
        values of the non-tensor arguments complete the key."""
        plan = _C.CallPlan(args, self.copy_slots)
        plain = plan.plain
        if not plain:
            return plan, plan.key
        return plan, (plan.key, tuple((type(args[i]), args[i]) for i in plain))

    def _find_copy_slots(self, args):
        """The inputs whose buffers the capture API refuses (rare: a buffer of
        another shape than the storage's) are copied from now on."""
        self.last = None  # its plan passes these inputs as they are
        plan = _C.CallPlan(args, self.copy_slots)
        inputs = plan.inputs(args)
        for i, how in enumerate(plan.how()):
            if how is None or how[0] == "copy":
                continue
            src = inputs[how[1]]
            try:
                _C._capture_begin(src.device.index, [src])
            except ValueError:
                self.copy_slots.add(i)
            else:
                _C._capture_abort()

    def _capture(self, args, plan, key):
        try:
            program = capture_program(self.gm, args, plan,
                                      f"torch.compile(backend='tpu')'s {self.kind} graph",
                                      whole_views=self.kind == "backward")
        except ReadsItsOwnValue as e:
            e.op = _sized_by_values(self.gm)
            raise
        with _lock:
            _stats["captures"] += 1
        self.programs[key] = program
        return program


# ---------------------------------------------------------------- recompilation storms

_frame_warned: set = set()  # Dynamo frame ids already warned about


def _note_compile():
    try:
        from torch._guards import CompileContext

        cid = CompileContext.current_compile_id()
    except Exception:
        cid = None
    if cid is None or getattr(cid, "frame_id", None) is None:
        return
    if getattr(cid, "compiled_autograd_id", None) is not None:
        return
    # frame_compile_id counts Dynamo's compilations of this frame (0 = first),
    # so it is the number of recompilations.
    n = cid.frame_compile_id or 0
    key = cid.frame_id
    if n <= recompile_warn_limit or key in _frame_warned:
        return
    _frame_warned.add(key)
    reason = _last_recompile_reason()
    name = _frame_name()
    warnings.warn(
        f"torch.compile(backend='tpu'): {name} has been recompiled {n} times "
        f"(more than torch_tpu.dynamo.recompile_warn_limit={recompile_warn_limit}); "
        f"the guard that failed: {reason}. Each recompilation traces and compiles again: "
        "mark changing sizes dynamic (torch._dynamo.mark_dynamic or dynamic=True), or "
        "keep Python values that guards check constant. Dynamo stops compiling this "
        f"function after torch._dynamo.config.recompile_limit="
        f"{torch._dynamo.config.recompile_limit} compilations.",
        TpuRecompileWarning, stacklevel=2)


def _last_recompile_reason() -> str:
    try:
        from torch._dynamo.utils import get_metrics_context

        reason = get_metrics_context()._metrics.get("recompile_reason")
        if reason:
            return reason.strip()
    except Exception:
        pass
    return "unknown (run with TORCH_LOGS=recompiles to see it)"


def _frame_name() -> str:
    try:  # the frame Dynamo is translating right now
        from torch._dynamo.symbolic_convert import InstructionTranslator

        code = InstructionTranslator.current_tx().f_code
        return f"'{code.co_name}' ({code.co_filename}:{code.co_firstlineno})"
    except Exception:
        return "a compiled function"


# ---------------------------------------------------------------- the backend

def _compiler(kind: str):
    def compile_graph(gm: torch.fx.GraphModule, example_inputs):
        return CompiledGraph(gm, kind)

    compile_graph.__name__ = f"tpu_{kind}_compiler"
    return compile_graph


def _make_aot():
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.partitioners import min_cut_rematerialization_partition

    return aot_autograd(
        # Inductor's partitioner: the forward saves fewer activations for the
        # backward (views of parameters and cheap elementwise results are
        # recomputed there, inside its program) -- fewer, smaller outputs.
        partition_fn=min_cut_rematerialization_partition,
        fw_compiler=_compiler("forward"),
        bw_compiler=_compiler("backward"),
        inference_compiler=_compiler("inference"),
        decompositions=decompositions,
        keep_inference_input_mutations=True,
    )


def backend(gm: torch.fx.GraphModule, example_inputs, **kwargs):
    """The `tpu` Dynamo backend (`torch.compile(model, backend="tpu")`)."""
    _note_compile()
    aot = _make_aot()
    compile_fn = functools.partial(aot, **kwargs)
    if not fuse_attention:
        return compile_fn(gm, example_inputs)
    compiled, fused = attention_fusion.rewrite_and_compile(gm, example_inputs, compile_fn)
    with _lock:
        _stats["fused_attention"] += fused
    return compiled


def reset() -> None:
    """Zero compile_stats() and forget recompilation counts
    (torch._dynamo.reset() forgets the compiled graphs)."""
    for k in _stats:
        _stats[k] = 0
    _frame_warned.clear()


def _register():
    from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend

    _register_device_interface()
    if "tpu" not in _COMPILER_FNS:
        register_backend(name="tpu")(backend)
    from .default_backend import install

    install(backend)  # torch.compile(model) on tpu graphs: see default_backend.py


_register()
