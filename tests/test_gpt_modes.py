"""A small GPT-style decoder trains the same in every eager mode as on the CPU."""
import os
import sys

import pytest
import torch

import torch_tpu

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
from gpt import GPT, loss_fn  # noqa: E402


def train(device, mode, steps=4):
    torch.manual_seed(0)
    model = GPT(vocab=64, d_model=32, heads=4, layers=2, seq=16).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, 64, (4, 16), generator=g).to(device)
    tgt = torch.randint(0, 64, (4, 16), generator=g).to(device)
    losses = []
    with torch_tpu.eager_mode(mode):
        for _ in range(steps):
            opt.zero_grad()
            loss = loss_fn(model, idx, tgt)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return losses


@pytest.mark.parametrize("mode", ["strict", "debug", "defer_and_fuse"])
def test_gpt_training_matches_cpu(mode):
    cpu = train("cpu", "strict")
    tpu = train("tpu", mode)
    assert tpu[-1] < tpu[0]
    for a, b in zip(tpu, cpu):
        assert abs(a - b) <= 1e-4 * abs(b), (tpu, cpu)
