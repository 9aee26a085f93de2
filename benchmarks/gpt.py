"""A small GPT-style decoder shared by the benchmarks (plain nn modules and
ops every backend has, so the same model runs everywhere)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d_model, heads, seq):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, 4 * d_model)
        self.fc2 = nn.Linear(4 * d_model, d_model)
        mask = torch.full((seq, seq), float("-inf")).triu(1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        b, t, d = x.shape
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q = q.view(b, t, h, d // h).transpose(1, 2)
        k = k.view(b, t, h, d // h).transpose(1, 2)
        v = v.view(b, t, h, d // h).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // h) + self.mask[:t, :t]
        att = scores.softmax(-1) @ v
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab=4096, d_model=256, heads=4, layers=4, seq=128):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(seq, d_model)
        self.blocks = nn.ModuleList(Block(d_model, heads, seq) for _ in range(layers))
        self.ln = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab, bias=False)

    def forward(self, idx):
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def loss_fn(model, idx, targets):
    logits = model(idx)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


# Model sizes the benchmarks run side by side. "issue": the configuration the
# eager-modes and compile issues give as their example; on this 2-core CPU its
# matmuls take most of a step in every mode, so the host work that the modes
# differ in is a small part of it. "small": the same model shrunk until the
# math is cheap next to the per-op host work -- the balance a real
# accelerator gives the "issue" size, whose matmuls it runs ~1000x faster.
SIZES = {
    "issue": dict(vocab=4096, d_model=256, heads=4, layers=4, seq=128, batch=8),
    "small": dict(vocab=512, d_model=64, heads=4, layers=4, seq=32, batch=4),
}


def adamw_train_step(size, device="tpu", lr=1e-3):
    """A training step (zero_grad, forward, loss, backward, AdamW step) of the
    GPT of SIZES[size] on fixed random tokens; returns the step, which
    returns the loss."""
    cfg = dict(SIZES[size])
    batch = cfg.pop("batch")
    torch.manual_seed(0)
    model = GPT(**cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    idx = torch.randint(0, cfg["vocab"], (batch, cfg["seq"])).to(device)
    targets = torch.randint(0, cfg["vocab"], (batch, cfg["seq"])).to(device)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model, idx, targets)
        loss.backward()
        opt.step()
        return loss

    return step


def step_flops(vocab, d_model, heads, layers, seq, batch, train):
    """Multiply-add flops (x2) of the matmuls in one forward (x3 for a
    training step: the backward does two matmuls per forward matmul)."""
    tokens = batch * seq
    dense = layers * 12 * d_model * d_model + d_model * vocab  # qkv, proj, fc1, fc2; head
    attention = layers * 2 * seq * d_model  # q @ k^T and att @ v, per token
    forward = 2 * tokens * (dense + attention)
    return 3 * forward if train else forward
