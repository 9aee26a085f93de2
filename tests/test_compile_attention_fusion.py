"""torch.compile(backend="tpu") rewrites written-out attention into SDPA
(python/torch_tpu/compile/attention_fusion.py), so that the forward and the
backward run the fused SDPA kernel: each form it matches gives the CPU's
output and gradients; graphs that only look like attention (a mask that is
not causal, a softmax over another dim, a score read elsewhere, a mask that
learns) keep their ops; a causal mask changed after compiling runs the graph
as written; TORCH_TPU_KERNELS=composite keeps every graph as written. The
rewrite's size class (attention_fusion.MIN_KEYS keys) is lowered to 0 here so
that small shapes exercise it, except where the size class itself is tested."""
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu
from torch_tpu import dynamo as tpu_dynamo
from torch_tpu.compile import attention_fusion

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


@pytest.fixture(autouse=True)
def every_size_fused(monkeypatch, request):
    if "size_class" not in request.node.name:
        monkeypatch.setattr(attention_fusion, "MIN_KEYS", 0)

B, H, L, E = 2, 3, 20, 8


def causal_additive(n):
    return torch.full((n, n), float("-inf")).triu(1)


class Attention(nn.Module):
    """One written-out attention of `form` over q, k, v [B, H, L, E]."""

    def __init__(self, form):
        super().__init__()
        self.form = form
        self.register_buffer("mask", causal_additive(32), persistent=False)  # sliced to L, as GPTs do
        self.register_buffer("tril", torch.tril(torch.ones(32, 32)).view(1, 1, 32, 32), persistent=False)
        self.register_buffer("other", torch.zeros(L, L).masked_fill(torch.rand(L, L) > 0.6, float("-inf"))
                             .fill_diagonal_(0), persistent=False)

    def forward(self, q, k, v):
        t, c = q.shape[-2], 1 / math.sqrt(q.shape[-1])
        f = self.form
        if f == "div_add_buffer":  # benchmarks/gpt.py
            return (q @ k.transpose(-2, -1) / math.sqrt(E) + self.mask[:t, :t]).softmax(-1) @ v
        if f == "mul_masked_fill":  # nanoGPT
            s = torch.matmul(q, k.transpose(-1, -2)) * c
            s = s.masked_fill(self.tril[:, :, :t, :t] == 0, float("-inf"))
            return torch.matmul(F.softmax(s, dim=-1), v)
        if f == "number_times_scores_no_mask":
            return torch.softmax(c * (q @ k.transpose(2, 3)), dim=3) @ v
        if f == "no_scale_no_mask":
            return (q @ k.transpose(-2, -1)).softmax(dim=-1).matmul(v)
        if f == "hugging_face_eager":  # transformers' eager_attention_forward, in eval
            w = torch.matmul(q, k.transpose(2, 3)) * c + self.mask[:t, :t]
            w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
            w = F.dropout(w, p=0.1, training=False)
            return torch.matmul(w, v)
        if f == "mask_made_in_graph":
            m = torch.full((t, t), float("-inf"), device=q.device).triu(1)
            return (q @ k.transpose(-2, -1) * c + m).softmax(-1) @ v
        # Not attention as SDPA computes it:
        if f == "mask_not_causal":
            return (q @ k.transpose(-2, -1) * c + self.other).softmax(-1) @ v
        if f == "softmax_over_queries":
            return (q @ k.transpose(-2, -1) * c + self.mask[:t, :t]).softmax(-2) @ v
        if f == "probabilities_read_elsewhere":
            p = (q @ k.transpose(-2, -1) * c + self.mask[:t, :t]).softmax(-1)
            return p @ v + p.sum(-1, keepdim=True)
        if f == "scores_read_elsewhere":
            s = q @ k.transpose(-2, -1) * c
            return s.softmax(-1) @ v + s.mean(-1, keepdim=True)
        raise AssertionError(f)


REWRITTEN = ["div_add_buffer", "mul_masked_fill", "number_times_scores_no_mask", "no_scale_no_mask",
             "hugging_face_eager", "mask_made_in_graph"]
KEPT = ["mask_not_causal", "softmax_over_queries", "probabilities_read_elsewhere", "scores_read_elsewhere"]


def inputs(seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, H, L, E, generator=g) for _ in range(3)] + [torch.randn(B, H, L, E, generator=g)]


def run(model, q, k, v, up, compiled):
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out = model(*leaves) if compiled is None else compiled(*leaves)
    out.backward(up)
    return [out.detach()] + [t.grad for t in leaves]


def check_against_cpu(form):
    model = Attention(form)
    q, k, v, up = inputs()
    expected = run(model, q, k, v, up, None)
    device_model = Attention(form).to("tpu")
    device_model.load_state_dict(model.state_dict())
    for name, buf in model.named_buffers():  # the random mask too
        getattr(device_model, name).copy_(buf)
    compiled = torch.compile(device_model, backend="tpu")
    got = run(device_model, *(t.to("tpu") for t in (q, k, v, up)), compiled)
    # A fused row sums its products in another order than the CPU's written-out ops.
    rtol, atol = torch_tpu.tolerance(torch.float32, "aten::bmm")
    for name, a, b in zip(("out", "dq", "dk", "dv"), got, expected):
        torch.testing.assert_close(a.cpu(), b, rtol=rtol, atol=atol, msg=lambda m: f"{form} {name}: {m}")
    return tpu_dynamo.compile_stats()["fused_attention"]


@pytest.mark.parametrize("form", REWRITTEN)
def test_written_out_attention_is_fused_and_equals_the_cpu(form):
    assert check_against_cpu(form) == 1


@pytest.mark.parametrize("form", KEPT)
def test_look_alikes_are_kept_as_written(form):
    assert check_against_cpu(form) == 0


def test_the_rewritten_graph_calls_sdpa():
    seen = []

    def spy(gm, example_inputs):
        seen.append(gm)
        return tpu_dynamo.backend(gm, example_inputs)

    model = Attention("div_add_buffer").to("tpu")
    q, k, v, up = (t.to("tpu") for t in inputs())
    run(model, q, k, v, up, torch.compile(model, backend=spy))
    targets = [str(n.target) for gm in seen for n in gm.graph.nodes]
    assert any("scaled_dot_product_attention" in t for t in targets)
    assert not any("softmax" in t for t in targets)


def test_a_learned_mask_keeps_its_gradient():
    class Learned(nn.Module):
        def __init__(self):
            super().__init__()
            self.bias = nn.Parameter(causal_additive(L).clamp(min=-1e4) + 0.1 * torch.randn(L, L))

        def forward(self, q, k, v):
            return (q @ k.transpose(-2, -1) + self.bias).softmax(-1) @ v

    ref = Learned()
    model = Learned().to("tpu")
    model.load_state_dict(ref.state_dict())
    q, k, v, up = inputs()
    ref_out = ref(q, k, v)
    ref_out.backward(up)
    out = torch.compile(model, backend="tpu")(q.to("tpu"), k.to("tpu"), v.to("tpu"))
    out.backward(up.to("tpu"))
    assert tpu_dynamo.compile_stats()["fused_attention"] == 0
    rtol, atol = torch_tpu.tolerance(torch.float32, "aten::bmm")
    torch.testing.assert_close(model.bias.grad.cpu(), ref.bias.grad, rtol=rtol, atol=atol)


def test_a_mask_changed_after_compiling_runs_the_graph_as_written():
    model = Attention("div_add_buffer")
    device_model = Attention("div_add_buffer").to("tpu")
    compiled = torch.compile(device_model, backend="tpu")
    q, k, v, up = inputs()
    dq, dk, dv, dup = (t.to("tpu") for t in (q, k, v, up))
    run(device_model, dq, dk, dv, dup, compiled)
    assert tpu_dynamo.compile_stats()["fused_attention"] == 1
    graphs = tpu_dynamo.compile_stats()["graphs"]
    # No longer causal: key 0 hidden from every query but the first.
    for m in (model.mask, device_model.mask):
        m[1:, 0] = float("-inf")
    got = run(device_model, dq, dk, dv, dup, compiled)
    assert tpu_dynamo.compile_stats()["graphs"] > graphs  # the graph as written, compiled now
    rtol, atol = torch_tpu.tolerance(torch.float32, "aten::bmm")
    for a, b in zip(got, run(model, q, k, v, up, None)):
        torch.testing.assert_close(a.cpu(), b, rtol=rtol, atol=atol)
    # Causal again: the fused graph is back, nothing compiled.
    for m in (model.mask, device_model.mask):
        m[1:, 0] = 0.0
    graphs = tpu_dynamo.compile_stats()["graphs"]
    got = run(device_model, dq, dk, dv, dup, compiled)
    assert tpu_dynamo.compile_stats()["graphs"] == graphs
    for a, b in zip(got, run(model, q, k, v, up, None)):
        torch.testing.assert_close(a.cpu(), b, rtol=rtol, atol=atol)


def test_active_dropout_is_kept_as_written():
    mask = causal_additive(L).to("tpu")
    f = torch.compile(lambda q, k, v: F.dropout((q @ k.transpose(-2, -1) + mask).softmax(-1), p=0.5) @ v,
                      backend="tpu")
    q, k, v = (t.to("tpu") for t in inputs()[:3])
    torch.tpu.manual_seed(0)
    out = f(q, k, v).cpu()
    assert tpu_dynamo.compile_stats()["fused_attention"] == 0
    # Query 0 sees key 0 alone: where dropout drops it, its row is zero (the graph's own draw).
    assert (out[:, :, 0] == 0).all(-1).any() and out.isfinite().all()


def test_size_class_keeps_short_sequences_written_out():
    fused = []
    for n in (attention_fusion.MIN_KEYS - 1, attention_fusion.MIN_KEYS):
        torch._dynamo.reset()
        tpu_dynamo.reset()
        mask = torch.full((n, n), float("-inf")).triu(1).to("tpu")
        q, k, v = (torch.randn(1, 2, n, 8, device="tpu") for _ in range(3))
        f = torch.compile(lambda q, k, v: (q @ k.transpose(-2, -1) + mask).softmax(-1) @ v, backend="tpu")
        f(q, k, v)
        fused.append(tpu_dynamo.compile_stats()["fused_attention"])
    assert fused == [0, 1]


def test_turned_off_keeps_the_graph(monkeypatch):
    monkeypatch.setattr(tpu_dynamo, "fuse_attention", False)
    assert check_against_cpu("div_add_buffer") == 0


PROGRAMS = """
import math, torch, torch_tpu
torch_tpu.compile.attention_fusion.MIN_KEYS = 0
q, k, v = (torch.randn(2, 3, 20, 8, device="tpu", requires_grad=True) for _ in range(3))
mask = torch.full((20, 20), float("-inf")).triu(1).to("tpu")
f = torch.compile(lambda q, k, v: (q @ k.transpose(-2, -1) / math.sqrt(8) + mask).softmax(-1) @ v, backend="tpu")
f(q, k, v).sum().backward()
print("fused", torch_tpu.dynamo.compile_stats()["fused_attention"])
"""


@pytest.mark.parametrize("kernels", ["default", "composite"])
def test_programs_hold_the_kernel_and_composite_keeps_the_ops(run_python, kernels):
    env = {"TORCH_TPU_KERNELS": "composite"} if kernels == "composite" else {}
    r = run_python(PROGRAMS, TORCH_TPU_DUMP_HLO="1", TORCH_TPU_CACHE_DIR=None, **env)
    assert r.returncode == 0, r.stderr[-4000:]
    calls = [r.stderr.count(f'call_target_name = "torch_tpu_sdpa_{d}"') for d in ("forward", "backward")]
    if kernels == "composite":
        assert "fused 0" in r.stdout and calls == [0, 0]
    else:
        assert "fused 1" in r.stdout and calls == [1, 1]
