"""DTensor on a DeviceMesh("tpu", ...): distribute_tensor, redistribute
(shard <-> replicate) and a tensor-parallel MLP (colwise then rowwise
linear), each against the same computation on CPU tensors."""
import torch
import torch.nn as nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

from _common import dist, init, report

rank, world, dev = init()
mesh = DeviceMesh("tpu", list(range(world)))
torch.manual_seed(0)
full = torch.randn(4 * world, 6)
checks = {}

d = distribute_tensor(full.to(dev), mesh, [Shard(0)])
checks["distribute_shard0_local"] = torch.equal(d.to_local().cpu(), full.chunk(world)[rank])
checks["shard0_to_replicate"] = torch.equal(d.redistribute(mesh, [Replicate()]).to_local().cpu(), full)
r = distribute_tensor(full.to(dev), mesh, [Replicate()])
s1 = r.redistribute(mesh, [Shard(1)])
checks["replicate_to_shard1"] = torch.equal(s1.to_local().cpu(), full.chunk(world, dim=1)[rank])
checks["shard1_to_shard0"] = torch.equal(s1.redistribute(mesh, [Shard(0)]).to_local().cpu(),
                                         full.chunk(world)[rank])
checks["full_tensor"] = torch.equal(s1.full_tensor().cpu(), full)
# A reduction over a sharded dim makes a Partial placement that DTensor
# resolves with all_reduce.
checks["sum_over_shards"] = torch.allclose(d.sum().full_tensor().cpu(), full.sum(), atol=1e-5)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.down = nn.Linear(8, 16), nn.Linear(16, 8)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


cpu_model = MLP()
tp_model = MLP()
tp_model.load_state_dict(cpu_model.state_dict())
tp_model = parallelize_module(tp_model.to(dev), mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
x = torch.randn(5, 8)
out = tp_model(x.to(dev))
expected = cpu_model(x)
checks["tp_forward"] = torch.allclose(out.cpu(), expected, atol=1e-5)
out.sum().backward()
expected.sum().backward()
g = tp_model.up.weight.grad.full_tensor().cpu()
checks["tp_backward_grad"] = torch.allclose(g, cpu_model.up.weight.grad, atol=1e-5)
report(checks)
dist.destroy_process_group()
