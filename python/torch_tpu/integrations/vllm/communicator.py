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

    def _refuse(self, what: str):
        raise NotImplementedError(f"vLLM on tpu: the device communicator has no {what} "
                                  f"(group {self.unique_name!r}): only tensor parallelism's "
                                  "all_reduce and all_gather are done")

    def all_gatherv(self, *args, **kwargs):
        self._refuse("all_gatherv")

    def reduce_scatter(self, *args, **kwargs):
        self._refuse("reduce_scatter")

    def reduce_scatterv(self, *args, **kwargs):
        self._refuse("reduce_scatterv")

    def gather(self, *args, **kwargs):
        self._refuse("gather")

    def send(self, *args, **kwargs):
        self._refuse("send")

    def recv(self, *args, **kwargs):
        self._refuse("recv")

    def broadcast(self, *args, **kwargs):
        self._refuse("broadcast")

    def dispatch_router_logits(self, *args, **kwargs):
        self._refuse("expert-parallel dispatch")

    def dispatch(self, *args, **kwargs):
        self._refuse("expert-parallel dispatch")

    def combine(self, *args, **kwargs):
        self._refuse("expert-parallel combine")
