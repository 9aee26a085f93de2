"""vLLM's device communicator on `tpu`: the collectives of tensor parallelism.

vLLM's parallel layers call their group's communicator (RowParallelLinear and
the vocabulary-parallel embedding all-reduce, the logits processor
all-gathers); the platform names this class (`get_device_communicator_cls`).
The runner captures the whole step as one program (worker.py), so these
collectives are torch_tpu's in-program ones (`torch_tpu.program_collectives`):
custom calls recorded into the step like its other ops, each rank's program
calling into a Gloo group of the ranks in place, rather than tpu_dist's
collectives, which run between programs. What tensor parallelism of a dense
model does not use is refused naming it.

Pipeline parallelism needs nothing here: vLLM's pipeline group sends a
stage's hidden states with torch.distributed itself, not through this class
(`GroupCoordinator.isend_tensor_dict`; pipeline.py says how they travel), so
`send` and `recv`, which only other uses of vLLM's group call, stay refused.

One collective of tensor parallelism runs outside this class and outside a
step: vLLM's online weight quantization (fp8, int8 MoE) all-reduces each
sharded weight's amax over the group's device group, so that every shard
takes the scale of the whole weight; that group is Gloo here, which takes no
tpu tensor. `register()` routes those reductions through the host, once per
weight at load time.
"""
import functools

import torch
from torch_tpu.program_collectives import ProgramCollectives
from vllm.distributed.device_communicators.base_device_communicator import DeviceCommunicatorBase


class TpuCommunicator(DeviceCommunicatorBase):
    def __init__(self, cpu_group, device=None, device_group=None, unique_name="", **kwargs):
        super().__init__(cpu_group, device, device_group, unique_name, **kwargs)
        # vLLM names the device by the rank's local index; each worker process
        # has its own PJRT client, whose device is the current one.
        self.device = torch.device("tpu", torch.tpu.current_device())
        self.collectives = ProgramCollectives(self.ranks)

    def all_reduce(self, input_: torch.Tensor) -> torch.Tensor:
        return self.collectives.all_reduce(input_)

    def all_gather(self, input_: torch.Tensor, dim: int = -1) -> torch.Tensor:
        dim = dim + input_.dim() if dim < 0 else dim
        gathered = self.collectives.all_gather(input_.movedim(dim, 0))   # [world * n, ...]
        return gathered.movedim(0, dim)


def _refusal(what: str):
    def refuse(self, *args, **kwargs):
        raise NotImplementedError(f"vLLM on tpu: the device communicator has no {what} "
                                  f"(group {self.unique_name!r}): only tensor parallelism's "
                                  "all_reduce and all_gather are done")
    return refuse


# What vLLM's base class would run through `device_group` (Gloo, which takes
# no tpu tensors) or that expert parallelism needs.
for _name, _what in (("all_gatherv", "all_gatherv"), ("broadcast", "broadcast"),
                     ("combine", "expert-parallel combine"), ("dispatch", "expert-parallel dispatch"),
                     ("dispatch_router_logits", "expert-parallel dispatch"), ("gather", "gather"),
                     ("recv", "recv"), ("reduce_scatter", "reduce_scatter"),
                     ("reduce_scatterv", "reduce_scatterv"), ("send", "send")):
    setattr(TpuCommunicator, _name, _refusal(_what))


def _through_host(reduce):
    """`reduce(amax, ...)`, an in-place all-reduce over a Gloo group, on a
    host copy of a tpu `amax`."""
    @functools.wraps(reduce)
    def on_host(amax, *args, **kwargs):
        if amax.device.type != "tpu":
            return reduce(amax, *args, **kwargs)
        return reduce(amax.cpu(), *args, **kwargs).to(amax.device)
    on_host._torch_tpu = True
    return on_host


_AMAX_REDUCTIONS = ("amax_for_moe_weight_quant", "amax_for_tp_weight_quant")


def register() -> None:
    """Routes vLLM's load-time amax all-reduces through the host (module
    docstring), wherever vLLM's quantization modules imported them (once
    per process, before the model is loaded)."""
    from vllm.model_executor.layers.quantization.online import fp8, int8
    from vllm.model_executor.layers.quantization.utils import quant_utils
    for module in (fp8, int8, quant_utils):
        for name in _AMAX_REDUCTIONS:
            reduce = getattr(module, name, None)
            # Marked, not told by __wrapped__: a decorator of vLLM's own may set that.
            if reduce is not None and not getattr(reduce, "_torch_tpu", False):
                setattr(module, name, _through_host(reduce))
