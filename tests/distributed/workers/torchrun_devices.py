"""Run by torchrun: each rank uses tpu:LOCAL_RANK (init_process_group's
device_id), and a tensor on tpu:0 works in the same group too."""
import os

import torch
import torch.distributed as dist
import torch_tpu

local_rank = int(os.environ["LOCAL_RANK"])
assert torch.tpu.device_count() >= 1
device = torch_tpu.distributed.local_device()
assert device == torch.device("tpu", local_rank % torch.tpu.device_count())
torch.tpu.set_device(device)
dist.init_process_group("cpu:gloo,tpu:tpu_dist", device_id=device)
assert torch.tpu.current_device() == device.index
t = torch.ones(3, device=device) * (dist.get_rank() + 1)
dist.all_reduce(t)
u = torch.ones(2, device="tpu:0")
dist.all_reduce(u)
c = torch.ones(2)
dist.all_reduce(c)  # CPU tensors go to Gloo in the same group
ok = t.cpu().tolist() == [3.0] * 3 and u.cpu().tolist() == [2.0] * 2 and c.tolist() == [2.0] * 2
print(f"rank {dist.get_rank()} {'ok' if ok else 'wrong'}", flush=True)
dist.destroy_process_group()
