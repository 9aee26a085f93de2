"""`torch_tpu._internal.pallas.pallas`: JAX kernels called with tpu tensors
(Helion's Pallas launcher uses these names). The implementation is
torch_tpu/kernels/jax_callable.py."""
from ...kernels.jax_callable import JaxCallable, invocation_key, jax_placeholder

__all__ = ["JaxCallable", "_get_kernel_invocation_key", "get_default_pallas_mesh", "jax_placeholder"]


def _get_kernel_invocation_key(trace_key, input_args, input_kwargs, static_argnums=()) -> str:
    return invocation_key(trace_key, input_args, input_kwargs, static_argnums)


def get_default_pallas_mesh():
    """Helion 1.5.1 asks for this mesh for a distributed kernel when
    torch.distributed is initialized; torch_tpu runs kernels as one-device
    programs, so there is none."""
    raise NotImplementedError(
        "torch_tpu._internal.pallas.pallas.get_default_pallas_mesh: distributed Pallas kernels "
        "(a mesh over the processes of torch.distributed) are not supported; torch_tpu runs "
        "kernels as one-device programs, each process on its own device")
