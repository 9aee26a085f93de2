"""nll_loss's forward picks each target's input by a gather (csrc/lowering/loss.cpp's
picked_input), not by a one-hot mask summed over the classes: cross_entropy at a
language model's size equals the CPU (loss and gradient, ignored targets included) in
strict and torch.compile(backend="tpu"), and the forward program holds a gather and no
reduction over the classes."""
import re

import pytest
import torch
import torch.nn.functional as F

import torch_tpu


def make(shape, seed):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def loss_and_grad(fn, logits, target):
    x = logits.detach().requires_grad_()
    loss = fn(x, target)
    loss.backward()
    return loss.detach().cpu(), x.grad.cpu()


@pytest.mark.parametrize("mode", ["strict", "compile"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_equals_the_cpu(mode, reduction):
    logits = make((256, 4096), 0)
    target = torch.randint(0, 4096, (256,), generator=torch.Generator().manual_seed(1))
    target[::7] = -100  # ignored

    def ce(x, t):
        out = F.cross_entropy(x, t, reduction=reduction)
        return out if reduction != "none" else out.sum()

    want = loss_and_grad(ce, logits, target)
    fn = torch.compile(ce, backend="tpu") if mode == "compile" else ce
    got = loss_and_grad(fn, logits.to("tpu"), target.to("tpu"))
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)


def test_spatial_targets_equal_the_cpu():
    x, t = make((2, 5, 3, 4), 0), torch.randint(0, 5, (2, 3, 4), generator=torch.Generator().manual_seed(2))
    t[0, 1, 2] = -100
    for fn in (F.nll_loss, lambda x, t: F.nll_loss(x, t, reduction="none")):
        torch.testing.assert_close(fn(x.to("tpu"), t.to("tpu")).cpu(), fn(x, t))


def test_the_forward_gathers(run_python):
    body = ("import torch, torch_tpu, torch.nn.functional as F\n"
            "x, t = torch.randn(64, 1000), torch.randint(0, 1000, (64,))\n"
            "torch.testing.assert_close(torch.ops.aten.nll_loss_forward(x.to('tpu'), t.to('tpu'), None, 1, -100)[0].cpu(),"
            " torch.ops.aten.nll_loss_forward(x, t, None, 1, -100)[0])\nprint('ok')\n")
    r = run_python(body, TORCH_TPU_DUMP_HLO="1", TORCH_TPU_CACHE_DIR=None)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-4000:]
    module = [m for m in r.stderr.split("module @") if "stablehlo.gather" in m]
    assert len(module) == 1, r.stderr[-4000:]
    # The reductions left sum the 64 targets' losses and weights, none a [64, classes] operand.
    reduced = re.findall(r"\}\) \{dimensions = [^}]*\} : \((tensor<[0-9x]*)", module[0])
    assert reduced and not [t for t in reduced if t.startswith("tensor<64x")], reduced
