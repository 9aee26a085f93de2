"""FSDP2 (`fully_shard`) training of a small GPT-style model on 2 ranks against
single-process training on the concatenated batch (on tpu, in each rank)."""
import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from _common import dist, init, report

STEPS = 3
VOCAB, DIM, HEADS, SEQ, LAYERS = 32, 32, 2, 8, 2


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
        self.qkv, self.proj = nn.Linear(DIM, 3 * DIM), nn.Linear(DIM, DIM)
        self.fc, self.out = nn.Linear(DIM, 4 * DIM), nn.Linear(4 * DIM, DIM)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(DIM, dim=2)
        q, k, v = (z.view(b, t, HEADS, c // HEADS).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // HEADS)
        # Causal mask as an additive bias built on the host (masked_fill has
        # no tpu lowering yet).
        att = (att + torch.full((t, t), -1e4).triu(1).to(x.device)).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok, self.pos = nn.Embedding(VOCAB, DIM), nn.Embedding(SEQ, DIM)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln, self.head = nn.LayerNorm(DIM), nn.Linear(DIM, VOCAB)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


rank, world, dev = init()
torch.manual_seed(0)
model = GPT()
tokens = torch.randint(0, VOCAB, (2 * world, SEQ + 1))
reference = copy.deepcopy(model).to(dev)

mesh = init_device_mesh("tpu", (world,))
model.to(dev)
for blk in model.blocks:
    fully_shard(blk, mesh=mesh)
fully_shard(model, mesh=mesh)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
mine = tokens.chunk(world)[rank].to(dev)
for _ in range(STEPS):
    opt.zero_grad()
    logits = model(mine[:, :-1])
    F.cross_entropy(logits.reshape(-1, VOCAB), mine[:, 1:].reshape(-1)).backward()
    opt.step()

ropt = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
full = tokens.to(dev)
for _ in range(STEPS):
    ropt.zero_grad()
    logits = reference(full[:, :-1])
    F.cross_entropy(logits.reshape(-1, VOCAB), full[:, 1:].reshape(-1)).backward()
    ropt.step()

diffs = {}
for (name, p), r in zip(model.named_parameters(), reference.parameters()):
    diffs[name] = (p.full_tensor().detach().cpu() - r.detach().cpu()).abs().max().item()
report(dict(max_diff=max(diffs.values()), worst=max(diffs, key=diffs.get)))
dist.destroy_process_group()
