"""DDP training of an MLP for 10 steps on 2 ranks, each with half of the batch,
against single-process training on the whole batch (on tpu, in rank 0)."""
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from _common import dist, init, report

STEPS = 10

rank, world, dev = init()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
x = torch.randn(8 * world, 16)
y = torch.randint(0, 4, (8 * world,))
reference = copy.deepcopy(model).to(dev)

ddp = DDP(model.to(dev), device_ids=None)
opt = torch.optim.AdamW(ddp.parameters(), lr=1e-2)
xs, ys = x.chunk(world)[rank].to(dev), y.chunk(world)[rank].to(dev)
losses = []
for _ in range(STEPS):
    opt.zero_grad()
    loss = F.cross_entropy(ddp(xs), ys)
    loss.backward()
    opt.step()
    losses.append(loss.item())

ropt = torch.optim.AdamW(reference.parameters(), lr=1e-2)
for _ in range(STEPS):
    ropt.zero_grad()
    F.cross_entropy(reference(x.to(dev)), y.to(dev)).backward()
    ropt.step()

diffs = [(a.detach().cpu() - b.detach().cpu()).abs().max().item()
         for a, b in zip(ddp.module.parameters(), reference.parameters())]
# Replicas must stay bit-identical across ranks.
flat = torch.cat([p.detach().reshape(-1) for p in ddp.module.parameters()])
gathered = [torch.empty_like(flat) for _ in range(world)]
dist.all_gather(gathered, flat)
same = all(torch.equal(gathered[0].cpu(), g.cpu()) for g in gathered)
report(dict(max_diff=max(diffs), replicas_identical=same, losses=losses))
dist.destroy_process_group()
