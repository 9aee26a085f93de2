"""torch_tpu.pallas: JAX and Pallas functions as PyTorch operators.

`jax_op(name, fn)` (TorchTPU's API) makes `fn`, a function of JAX arrays
(plain `jax.numpy` code, or code calling `pl.pallas_call`), the operator
`name` on tpu tensors. For each input signature `fn` is traced once, with
JAX, on abstract values, to a StableHLO module (python/torch_tpu/_jax_lower.py);
the op then runs that module as a node of our own programs
(python/torch_tpu/custom_ops.py). JAX is needed to define and trace a kernel,
never to run it, and no JAX client or device is ever created.

Gradients: unless `backward` is given, the backward is `jax.vjp` of `fn`,
lowered the same way, as the operator `name + "_vjp"` (it recomputes the
forward inside the backward program; XLA fuses both). `backward`, when given,
is a JAX function of (*inputs, *grads of the floating results) returning one
gradient per floating input. Either is replaced by torch.library's own
`.register_autograd(...)`. The backward operators are not differentiable
again.
"""
from __future__ import annotations

import inspect

import torch

from . import _C, _jax_lower
from .custom_ops import KernelOp

__all__ = ["jax_op"]

_checked_plugin = False


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


def _check_plugin_reads_jax(who: str):
    """The loaded plugin must parse what this JAX emits: one small module is
    traced and compiled once per process, and a failure names both sides."""
    global _checked_plugin
    if _checked_plugin:
        return
    import jax

    text = _jax_lower.lower(lambda x: x * 2 + 1, [(torch.float32, (2,))], who)
    try:
        mid, _, _ = _C._custom_module("torch_tpu::jax_probe", text)
        _C._check_custom_module(mid, torch.tpu.current_device())
    except (ValueError, RuntimeError) as e:
        raise RuntimeError(
            f"{who}: the PJRT plugin cannot read the StableHLO that JAX {jax.__version__} emits "
            f"(torch_tpu is tested with jax=={_jax_lower.PINNED_JAX}: pip install "
            f"'torch_tpu[jax]'). The plugin said: {e}") from e
    _checked_plugin = True


class _JaxKernel(KernelOp):
    def __init__(self, name: str, nargs, fn, *, describe: str):
        self.fn = fn
        who = f"{describe}({name!r})"
        super().__init__(name, nargs, lambda sig: _jax_lower.lower(fn, sig, who), describe=describe)
        self._who = who

    def _output_types(self, signature):
        return _jax_lower.output_types(self.fn, signature, self._who)


def _vjp_of(fn, n: int):
    """A JAX function of (*primals, *cotangents of the inexact results) giving
    the gradients of the inexact primals."""
    import jax
    import jax.numpy as jnp

    def inexact(x):
        return jnp.issubdtype(x.dtype, jnp.inexact)

    def vjp(*args):
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
    signature (dtypes, shapes) is traced and compiled once. Pallas kernels run
    on TPU as Mosaic and elsewhere in Pallas' interpret mode."""
    who = f"jax_op({name!r})"
    _jax_lower.import_jax(who)
    if not callable(fn):
        raise TypeError(f"{who}: fn must be callable, got {type(fn).__name__}")
    if backward is not None and not callable(backward):
        raise TypeError(f"{who}: backward must be callable, got {type(backward).__name__}")
    nargs = _arity(fn, who)
    _check_plugin_reads_jax(who)
    op = _JaxKernel(name, nargs, fn, describe="jax_op")
    bwd_fn = backward if backward is not None else _vjp_of(fn, nargs)
    bwd_op = _JaxKernel(name + "_vjp", None, bwd_fn, describe="jax_op backward")
    _attach_backward(op, bwd_op)
    op.backward_op = bwd_op
    return op

