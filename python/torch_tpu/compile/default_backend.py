"""`torch.compile(model)` with the default backend, on `tpu` graphs.

PyTorch's default backend is Inductor. For the `tpu` device, Inductor 2.13
generates Pallas kernels and runs them through Google TorchTPU's internals
(`torch_tpu._internal.pallas`), which call JAX for every kernel at run time.
We do not provide that path: this backend runs no JAX at run time, and its
compiler already turns a whole graph into one StableHLO program through the
same lowerings eager mode uses (dynamo.py). So the default backend hands
`tpu` graphs to that compiler, and a CUDA user's `torch.compile(model)` gets
exactly what `backend="tpu"` gives, training included; a graph with an op
that cannot be compiled fails naming the op.

The hand-off wraps the call of `torch._TorchCompileInductorWrapper`, the
object `torch.compile` makes for its default backend (and for
`backend="inductor"`) and calls with each graph Dynamo captures. Inductor's
own extension point, `register_backend_for_device`, could not serve: it
plugs a code generator for Inductor's loop-level IR, after Inductor has
lowered the graph away from the ATen ops our lowerings take. Wrapping
Inductor's entry function (`torch._inductor.compile_fx.compile_fx`) instead
would cost every `import torch` a second or two of Inductor imports. A graph
with no `tpu` tensor goes to Inductor unchanged. Inductor's `mode` and
`options` (CUDA graphs, autotuning) mean nothing to a tpu graph and are not
applied.
"""
import functools

import torch


def _is_tpu_graph(gm, example_inputs) -> bool:
    for t in example_inputs:
        if isinstance(t, torch.Tensor) and t.device.type == "tpu":
            return True
    # A graph without tensor inputs that makes tpu tensors itself
    for node in gm.graph.nodes:
        for key in ("example_value", "val"):
            v = node.meta.get(key)
            if isinstance(v, torch.Tensor) and v.device.type == "tpu":
                return True
    return False


def install(tpu_backend) -> None:
    """Routes tpu graphs of the default backend to `tpu_backend` (dynamo.backend)."""
    wrapper = torch._TorchCompileInductorWrapper
    inductor_call = wrapper.__call__
    if getattr(inductor_call, "_tpu_hands_off", False):
        return

    @functools.wraps(inductor_call)
    def __call__(self, model_, inputs_, **kwargs):
        # Not AOTInductor's subclass: a package for ahead-of-time use is Inductor's alone.
        if (getattr(self, "compiler_name", None) == "inductor"
                and isinstance(model_, torch.fx.GraphModule) and _is_tpu_graph(model_, inputs_)):
            return tpu_backend(model_, inputs_)
        return inductor_call(self, model_, inputs_, **kwargs)

    __call__._tpu_hands_off = True
    wrapper.__call__ = __call__
