"""`torch_tpu._internal.pallas.tpu_torch_pallas`: kernels registered by name
and key, with the signatures Helion's launcher and Inductor's Pallas backend
call (torch_tpu/kernels/kernel_registry.py is the registry).

A call whose arguments fit none of these signatures raises TypeError naming
the function and its signature (Inductor retries an older signature on
TypeError; both of its forms are accepted here).
"""
import functools
import inspect

from ...kernels import kernel_registry

__all__ = ["call_custom_kernel", "lookup_custom_kernel", "register_custom_kernel"]


def _known_signature(fn):
    sig = inspect.signature(fn)
    where = f"torch_tpu._internal.pallas.tpu_torch_pallas.{fn.__name__}"

    @functools.wraps(fn)
    def checked(*args, **kwargs):
        try:
            sig.bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"{where}: {e}; its signature is {fn.__name__}{sig}") from None
        return fn(*args, **kwargs)

    return checked


@_known_signature
def register_custom_kernel(name, kernel_key, serialized_mlir_module):
    """Registers a StableHLO module (text, or the bytes jax.export writes)
    under (name, kernel_key); a pair that has one keeps it."""
    kernel_registry.register(name, kernel_key, serialized_mlir_module)


@_known_signature
def lookup_custom_kernel(name, kernel_key) -> bool:
    return kernel_registry.lookup(name, kernel_key)


@_known_signature
def call_custom_kernel(name, kernel_key, *, inputs, output_shapes, donate_argnums=(),
                       device_assignment=None, input_output_aliases=None):
    """Runs the kernel registered under (name, kernel_key) on `inputs`;
    returns new tensors shaped as `output_shapes`. `input_output_aliases`
    ({input: output}) is the older spelling of `donate_argnums` (its keys).
    `device_assignment` names the devices of the mesh the kernel was traced
    for (Helion 1.5.1): one device at most."""
    if input_output_aliases is not None:
        if donate_argnums and set(donate_argnums) != set(input_output_aliases):
            raise ValueError(f"call_custom_kernel({name!r}): donate_argnums {list(donate_argnums)} "
                             f"differ from the inputs of input_output_aliases "
                             f"{dict(input_output_aliases)}")
        donate_argnums = list(input_output_aliases)
    return kernel_registry.call(name, kernel_key, inputs, output_shapes, donate_argnums,
                                device_assignment)
