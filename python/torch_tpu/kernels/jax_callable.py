"""`JaxCallable`: a jitted JAX function (typically a Pallas kernel) called
with tpu tensors, under the name and contract of TorchTPU's
`torch_tpu._internal.pallas.pallas.JaxCallable`, which Helion's Pallas
launcher builds and subclasses.

A call computes the invocation key (`invocation_key`: the trace key, the
tensors' shapes and dtypes, the static arguments' values); the first call
with a key traces the function on abstract values with our own lowering
(jax_lower.py: no JAX client, Pallas in interpret form where the plugin is
not a TPU, Mosaic on a TPU), registers the module in the one kernel
registry (kernel_registry.py) under the function's name and the module's
fingerprint, and records for the key what a caller needs to call the
registry directly: `output_shapes[key] = (result placeholders, out_tree)`
and `kernel_key_to_mlir_fingerprint[key]`. Helion reads both to skip this
class on later calls. Every call then runs `call_custom_kernel`, copies the
results that alias inputs (`input_output_aliases`) into those inputs, and
returns the results in the function's pytree structure.

JAX runs here only to trace, never on the tensors.
"""
from __future__ import annotations

import hashlib

import torch

from . import jax_lower, kernel_registry


def invocation_key(trace_key: str, input_args, input_kwargs, static_argnums=()) -> str:
    """The key of one specialization of a kernel: tensors by shape and dtype,
    static arguments and keyword arguments by value."""
    static = frozenset(static_argnums)

    def part(i, v):
        if i in static:
            return f"static_{part(-1, v)}"
        if isinstance(v, torch.Tensor):
            return f"{tuple(v.shape)}x{v.dtype}"
        return repr(v)

    kwargs = ";".join(f"{k}:{part(-1, v)}" for k, v in sorted(input_kwargs.items()))
    args = ",".join(part(i, a) for i, a in enumerate(input_args))
    return ";".join([trace_key, args, kwargs])


def jax_placeholder(tensor, mesh=None, partition_spec=None):
    """A `jax.ShapeDtypeStruct` of the tensor's shape and dtype (the global
    shape and a NamedSharding when a mesh is given); anything that is not a
    tensor is returned as it is."""
    if not isinstance(tensor, torch.Tensor):
        return tensor
    import jax

    dtype = jax_lower.jax_dtype(tensor.dtype, "jax_placeholder")
    shape = tuple(tensor.shape)
    if mesh is None:
        return jax.ShapeDtypeStruct(shape, dtype)
    spec = partition_spec if partition_spec is not None else jax.sharding.PartitionSpec()
    sizes = dict(zip(mesh.axis_names, mesh.devices.shape))
    axes = tuple(spec) + (None,) * (len(shape) - len(spec))
    shape = tuple(s * _axes_size(axis, sizes) for s, axis in zip(shape, axes))
    return jax.ShapeDtypeStruct(shape, dtype, sharding=jax.sharding.NamedSharding(mesh, spec))


def _axes_size(axis, sizes) -> int:
    if axis is None:
        return 1
    n = 1
    for a in axis if isinstance(axis, tuple) else (axis,):
        n *= sizes[a]
    return n


class JaxCallable:
    """`jit_fn` (a `jax.jit`ted function of arrays) as a function of tpu
    tensors; see the module's docstring. `input_output_aliases` ({input:
    output}) is the older spelling of donation: its keys become
    `donate_argnums`, and each aliased input receives its result."""

    def __init__(self, name: str, jit_fn, trace_key: str, mesh=None, input_partition_specs=None,
                 static_argnums=(), donate_argnums=None, input_output_aliases=None):
        self._who = f"JaxCallable({name!r})"
        if not callable(jit_fn):
            raise TypeError(f"{self._who}: jit_fn must be callable, got {type(jit_fn).__name__}")
        if mesh is not None and mesh.devices.size > 1:
            raise NotImplementedError(
                f"{self._who}: a mesh of {mesh.devices.size} devices; torch_tpu runs kernels as "
                "one-device programs (each process drives its own device), so distributed "
                "kernels are not supported")
        self.name = name
        self.jit_fn = jit_fn
        self.trace_key = trace_key
        self.mesh = mesh
        self.input_partition_specs = input_partition_specs
        self.static_argnums = tuple(static_argnums)
        self.output_shapes: dict[str, tuple[list, object]] = {}
        self.kernel_key_to_mlir_fingerprint: dict[str, str] = {}
        if input_output_aliases is not None:
            if donate_argnums is not None and set(donate_argnums) != set(input_output_aliases):
                raise ValueError(f"{self._who}: donate_argnums {list(donate_argnums)} differ from "
                                 f"the inputs of input_output_aliases {dict(input_output_aliases)}")
            self.input_output_aliases = dict(input_output_aliases)
            self.donate_argnums = list(self.input_output_aliases)
        else:
            self.input_output_aliases = {}
            self.donate_argnums = list(donate_argnums) if donate_argnums is not None else []

    def __repr__(self):
        return (f"JaxCallable(name={self.name}, trace_key={self.trace_key}, "
                f"static_argnums={self.static_argnums})")

    def _check_args(self, args):
        for i, a in enumerate(args):
            if i in self.static_argnums:
                if isinstance(a, torch.Tensor):
                    raise ValueError(f"{self._who}: argument {i} is in static_argnums but is a "
                                     "tensor (tensors cannot be static)")
            elif a is not None and not isinstance(a, torch.Tensor):
                raise TypeError(f"{self._who}: argument {i} is {type(a).__name__}; a kernel "
                                "takes tensors and None (other values: static_argnums or "
                                "functools.partial)")

    def _trace(self, key, args, kwargs):
        """Lowers jit_fn for this specialization and registers it."""
        positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)
                     and i not in self.static_argnums]
        fixed = {i: a for i, a in enumerate(args) if i not in positions}

        def of_arrays(*arrays):
            full = [fixed.get(i) for i in range(len(args))]
            for i, x in zip(positions, arrays):
                full[i] = x
            return self.jit_fn(*full, **kwargs)

        signature = [(args[i].dtype, tuple(args[i].shape)) for i in positions]
        trees: list = []
        text = jax_lower.lower(of_arrays, signature, self._who, trees=trees)
        fingerprint = hashlib.sha256(text.encode()).hexdigest()
        kernel_registry.register(self.name, fingerprint, text)
        _, _, outs = kernel_registry._kernel(self.name, fingerprint)
        placeholders = [torch.empty(shape, dtype=dtype, device="meta") for dtype, shape in outs]
        self.kernel_key_to_mlir_fingerprint[key] = fingerprint
        self.output_shapes[key] = (placeholders, trees[0])

    def __call__(self, *args, **kwargs):
        self._check_args(args)
        key = invocation_key(self.trace_key, args, kwargs, self.static_argnums)
        if key not in self.output_shapes:
            self._trace(key, args, kwargs)
        output_shapes, out_tree = self.output_shapes[key]
        tensors = [a for i, a in enumerate(args)
                   if a is not None and i not in self.static_argnums]
        results = kernel_registry.call(self.name, self.kernel_key_to_mlir_fingerprint[key],
                                       tensors, output_shapes, self.donate_argnums)
        for i, o in self.input_output_aliases.items():
            tensors[i].copy_(results[o])
        return out_tree.unflatten(results)
