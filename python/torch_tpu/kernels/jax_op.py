"""`jax_op`: JAX and Pallas functions as PyTorch operators (public as `torch_tpu.pallas.jax_op`).

`jax_op(name, fn)` (TorchTPU's API) makes `fn`, a function of JAX arrays
(plain `jax.numpy` code, or code calling `pl.pallas_call`), the operator
`name` on tpu tensors. For each input signature `fn` is traced once, with
JAX, on abstract values, to a StableHLO module (jax_lower.py);
the op then runs that module as a node of our own programs
(custom_ops.py). JAX is needed to trace a kernel, never to
run it, and no JAX client or device is ever created. The traced text goes
into the persistent cache (trace_cache.py): a later process
with the same kernel reads it instead of tracing, without importing JAX.

Gradients: unless `backward` is given, the backward is `jax.vjp` of `fn`,
lowered the same way, as the operator `name + "_vjp"` (it recomputes the
forward inside the backward program; XLA fuses both). `backward`, when given,
is a JAX function of (*inputs, *grads of the floating results) returning one
gradient per floating input. Either is replaced by torch.library's own
`.register_autograd(...)`. The backward operators are not differentiable
again.
"""
from __future__ import annotations

import importlib.util
import inspect
import sys

import torch

from .. import _C
from . import jax_lower, trace_cache
from .custom_ops import KernelOp, signature_text

__all__ = ["jax_op"]


def _differentiable(dtype) -> bool:
    return dtype.is_floating_point or dtype.is_complex


def _arity(fn, who: str) -> int:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError) as e:
        raise TypeError(f"{who}: cannot read the signature of {fn!r}: {e}") from e
    n = 0
    for p in params:
        if p.kind == p.VAR_POSITIONAL:
            raise TypeError(f"{who}: fn takes *args; wrap it in a function with one parameter per "
                            "tensor (other arguments: functools.partial)")
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty:
            n += 1
    return n


def _jax_importable() -> bool:
    if "jax" in sys.modules:
        return sys.modules["jax"] is not None
    try:
        return importlib.util.find_spec("jax") is not None
    except (ImportError, ValueError):
        return False


class _JaxKernel(KernelOp):
    """A JAX function as a kernel: each signature's module comes from the
    persistent cache when it holds one, and is traced (and stored) otherwise."""

    def __init__(self, name: str, nargs, fn, *, describe: str):
        self.fn = fn
        self._who = f"{describe}({name!r})"
        self._from_disk: dict[tuple, str] = {}
        super().__init__(name, nargs, self._text, describe=describe)

    def _key(self, signature):
        """(key, None), or (None, why the kernel stays out of the disk cache)."""
        try:
            fp = trace_cache.fingerprint(self.fn)
        except trace_cache.Unsafe as e:
            return None, str(e)
        platform = jax_lower.lowering_platform()
        return trace_cache.key(self.name, signature, platform,
                                jax_lower.pallas_lowering(platform), fp), None

    def _cached(self, signature):
        text = self._from_disk.get(signature)
        if text is None:
            k, _ = self._key(signature)
            text = trace_cache.load(k) if k is not None else None
            if text is not None:
                self._from_disk[signature] = text
        return text

    def _text(self, signature) -> str:
        text = self._cached(signature)
        if text is not None:
            return text
        k, unsafe = self._key(signature)
        if not _jax_importable():
            why = (f" and this kernel is kept out of the persistent cache ({unsafe})" if unsafe else
                   f" and the persistent cache ({_C._cache_dir()}) holds no trace of it for inputs "
                   f"{signature_text(signature)}")
            jax_lower.import_jax(self._who, why)
        jax_lower.import_jax(self._who)
        text = jax_lower.lower(self.fn, signature, self._who)
        if k is not None:
            trace_cache.store(k, text)
        return text

    def _output_types(self, signature):
        if self._cached(signature) is not None or not _jax_importable():
            return self.module(signature)[1]
        return jax_lower.output_types(self.fn, signature, self._who)


def _vjp_of(fn, n: int):
    """A JAX function of (*primals, *cotangents of the inexact results) giving
    the gradients of the inexact primals. JAX is imported inside, when it is
    traced: a backward read from the persistent cache runs without JAX."""

    def vjp(*args):
        import jax
        import jax.numpy as jnp

        def inexact(x):
            return jnp.issubdtype(x.dtype, jnp.inexact)

        primals, cts = list(args[:n]), list(args[n:])
        diff = [i for i, p in enumerate(primals) if inexact(p)]

        def of_diff(*d):
            full = list(primals)
            for i, v in zip(diff, d):
                full[i] = v
            return [o for o in jax.tree_util.tree_leaves(fn(*full)) if inexact(o)]

        _, pull = jax.vjp(of_diff, *[primals[i] for i in diff])
        return list(pull(cts))

    return vjp


def _attach_backward(op: KernelOp, bwd_op: KernelOp):
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)
        ctx.out_meta = [(o.dtype, tuple(o.shape), o.device) for o in output]

    def backward(ctx, grads):
        inputs = ctx.saved_tensors
        cts = []
        for g, (dtype, shape, device) in zip(grads, ctx.out_meta):
            if _differentiable(dtype):
                cts.append(g if g is not None else torch.zeros(shape, dtype=dtype, device=device))
        diff = [_differentiable(t.dtype) for t in inputs]
        if not cts or not any(diff):
            return tuple(None for _ in inputs)
        out = bwd_op(*inputs, *cts)
        out = [out] if isinstance(out, torch.Tensor) else list(out)
        it = iter(out)
        return tuple(next(it) if d else None for d in diff)

    op.register_autograd(backward, setup_context=setup_context)


def jax_op(name: str, fn, *, backward=None) -> KernelOp:
    """The JAX function `fn` as the operator `name` ("namespace::name").

    `fn` takes one JAX array per tensor argument and returns an array or a
    tuple/list of arrays; the op returns a tensor or a tuple. Each new input
    signature (dtypes, shapes) is traced and compiled once (or read from the
    persistent cache, where JAX is not needed). Pallas kernels run on TPU as
    Mosaic and elsewhere in Pallas' interpret mode."""
    who = f"jax_op({name!r})"
    if not callable(fn):
        raise TypeError(f"{who}: fn must be callable, got {type(fn).__name__}")
    if backward is not None and not callable(backward):
        raise TypeError(f"{who}: backward must be callable, got {type(backward).__name__}")
    nargs = _arity(fn, who)
    if not _jax_importable():
        # Only a kernel the persistent cache can hold could ever run.
        for f in (fn, backward):
            try:
                trace_cache.fingerprint(f)
            except trace_cache.Unsafe as e:
                jax_lower.import_jax(who, f" and this kernel is kept out of the persistent cache "
                                           f"({e})")
    op = _JaxKernel(name, nargs, fn, describe="jax_op")
    bwd_fn = backward if backward is not None else _vjp_of(fn, nargs)
    bwd_op = _JaxKernel(name + "_vjp", None, bwd_fn, describe="jax_op backward")
    _attach_backward(op, bwd_op)
    op.backward_op = bwd_op
    return op

