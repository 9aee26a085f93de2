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
"""
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
