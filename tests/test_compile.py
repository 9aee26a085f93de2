"""torch.compile(model, backend="tpu"): Dynamo + AOTAutograd, one captured
StableHLO program per graph, compared with the CPU through the tolerance table."""
import copy
import os
import sys
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu
from torch_tpu import dynamo as tpu_dynamo

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
from gpt import GPT, loss_fn  # noqa: E402


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def close(actual, expected, op=""):
    rtol, atol = torch_tpu.tolerance(expected.dtype, op)
    torch.testing.assert_close(actual.cpu(), expected, rtol=rtol, atol=atol)


def captures():
    return tpu_dynamo.compile_stats()["captures"]


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


# ---------------------------------------------------------------- registration

def test_backend_and_device_interface_registered():
    assert "tpu" in torch._dynamo.list_backends()
    from torch._dynamo.device_interface import get_interface_for_device

    iface = get_interface_for_device("tpu")
    assert iface is tpu_dynamo.TpuInterface
    assert iface.is_available() and iface.device_count() >= 1
    assert iface.current_device() == torch.tpu.current_device()


def test_decompositions_only_for_ops_without_a_kernel():
    table = tpu_dynamo.decompositions()
    assert table, "expected decompositions for some ops we lack"
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    assert not [op.name() for op in table if has(op.name(), "PrivateUse1")]
    assert torch.ops.aten.mm.default not in table


# ---------------------------------------------------------------- models

def test_mlp_forward_backward_matches_cpu():
    torch.manual_seed(0)
    ref = MLP()
    model = MLP().to("tpu")
    model.load_state_dict(ref.state_dict())
    x = torch.randn(8, 16)
    compiled = torch.compile(model, backend="tpu")
    out = compiled(x.to("tpu"))
    expected = ref(x)
    close(out.detach(), expected.detach())
    out.sum().backward()
    expected.sum().backward()
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        close(p.grad, q.grad)
    # Same shapes again: no new capture, no XLA compilation.
    n, compiled_before = captures(), torch_tpu.metrics()["graphs_compiled"]
    x2 = torch.randn(8, 16)
    close(compiled(x2.to("tpu")).detach(), ref(x2).detach())
    assert captures() == n
    assert torch_tpu.metrics()["graphs_compiled"] == compiled_before


def test_small_cnn_matches_cpu(require_ops):
    require_ops("aten::convolution", "aten::convolution_backward", "aten::max_pool2d_with_indices")
    torch.manual_seed(0)
    ref = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                        nn.MaxPool2d(2), nn.Conv2d(8, 8, 3), nn.ReLU(),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))
    model = copy.deepcopy(ref).to("tpu")
    x = torch.randn(4, 3, 12, 12)
    compiled = torch.compile(model, backend="tpu")
    out = compiled(x.to("tpu"))
    expected = ref(x)
    close(out.detach(), expected.detach(), "aten::convolution")
    out.square().mean().backward()
    expected.square().mean().backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        close(p.grad, q.grad, "aten::convolution")
    # BatchNorm's running statistics: an input mutation written back.
    close(model[1].running_mean, ref[1].running_mean)
    close(model[1].running_var, ref[1].running_var)


def _offsets(*ends):
    return torch.tensor(ends, dtype=torch.int32)


@pytest.mark.parametrize("a_shape, b_shape, offs", [
    ((6, 8), (2, 8, 4), _offsets(2, 6)),          # rows by expert (MoE experts)
    ((8, 8), (3, 8, 4), _offsets(0, 4, 8)),       # ... with an empty group
    ((8, 8), (8, 4), _offsets(2, 8)),             # the contraction by expert
    ((2, 4, 8), (8, 8), _offsets(4, 8)),          # columns by expert
    ((2, 4, 8), (2, 8, 4), None),                 # batched
])
def test_grouped_mm_float32_matches_cpu_in_one_graph(a_shape, b_shape, offs):
    # transformers' MoE experts call grouped_mm in float32 on tpu; PyTorch's
    # meta kernel takes bfloat16 only, and a failed fake run left Dynamo in a
    # state where later graphs failed at random.
    def f(a, b, *offs):
        return torch._grouped_mm(a, b, *offs)

    torch.manual_seed(0)
    a = torch.randn(a_shape, requires_grad=True)
    b = torch.randn(b_shape, requires_grad=True)
    extra = () if offs is None else (offs,)
    expected = f(a, b, *extra)
    expected.square().sum().backward()
    at, bt = (t.detach().to("tpu").requires_grad_() for t in (a, b))
    out = torch.compile(f, backend="tpu", fullgraph=True)(at, bt, *(o.to("tpu") for o in extra))
    out.square().sum().backward()
    close(out.detach(), expected.detach(), "aten::mm")
    close(at.grad, a.grad, "aten::mm")
    close(bt.grad, b.grad, "aten::mm")
    assert tpu_dynamo.compile_stats()["eager_graphs"] == 0


def test_complex_rotary_backward_keeps_the_saved_conjugate():
    # DeepSeek-V2's rotary embedding: the forward saves conj(freqs) for the
    # backward, a lazy conjugate view; a program output that lost the bit gave
    # gradients off by 100%, silently.
    def rotary(x, freqs):
        xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(xc * freqs.unsqueeze(1)).flatten(3)

    torch.manual_seed(0)
    x = torch.randn(2, 4, 16, 8, requires_grad=True)
    angles = torch.randn(2, 16, 4)
    freqs = torch.polar(torch.ones_like(angles), angles)
    w = torch.randn(2, 4, 16, 8)
    expected = rotary(x, freqs)
    (expected * w).sum().backward()
    xt = x.detach().to("tpu").requires_grad_()
    out = torch.compile(rotary, backend="tpu")(xt, freqs.to("tpu"))
    (out * w.to("tpu")).sum().backward()
    close(out.detach(), expected.detach())
    close(xt.grad, x.grad)


@pytest.mark.parametrize("view", ["conj", "neg"])
def test_lazy_conj_and_neg_outputs(view):
    make = torch.Tensor.conj if view == "conj" else torch._neg_view
    x = torch.randn(4, dtype=torch.complex64)
    for fn in (lambda a: make(a), lambda a: make(a * 2)):
        out = torch.compile(fn, backend="tpu")(x.to("tpu"))
        assert (out.is_conj(), out.is_neg()) == (view == "conj", view == "neg")
        close(out.resolve_conj().resolve_neg(), fn(x).resolve_conj().resolve_neg())


def test_grouped_mm_fake_kernel_is_for_tpu_only():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        a, b = torch.empty(6, 8), torch.empty(2, 8, 4)
        with pytest.raises(RuntimeError, match="BF16"):  # PyTorch's own check, for the CPU
            torch._grouped_mm(a, b, offs=torch.tensor([2, 6], dtype=torch.int32))
        out = torch._grouped_mm(a.to("tpu"), b.to("tpu"),
                                offs=torch.tensor([2, 6], dtype=torch.int32, device="tpu"))
        assert out.shape == (6, 4) and out.dtype == torch.float32 and out.device.type == "tpu"
        with pytest.raises(RuntimeError, match="int32"):
            torch._grouped_mm(a.to("tpu"), b.to("tpu"), offs=torch.tensor([2, 6], device="tpu"))


GPT_SMALL = dict(vocab=256, d_model=64, heads=4, layers=2, seq=32)


def test_gpt_training_20_steps_matches_cpu_loss_curve():
    """Forward, backward and AdamW(capturable=True), all compiled."""
    def make(device, capturable):
        torch.manual_seed(0)
        model = GPT(**GPT_SMALL).to(device)
        return model, torch.optim.AdamW(model.parameters(), lr=3e-3, capturable=capturable)

    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, GPT_SMALL["vocab"], (4, GPT_SMALL["seq"]), generator=g)
    tgt = torch.randint(0, GPT_SMALL["vocab"], (4, GPT_SMALL["seq"]), generator=g)
    ref, ref_opt = make("cpu", False)
    model, opt = make("tpu", True)
    d_idx, d_tgt = idx.to("tpu"), tgt.to("tpu")
    compiled_loss = torch.compile(loss_fn, backend="tpu")

    @torch.compile(backend="tpu")
    def opt_step():
        opt.step()

    expected, actual = [], []
    for _ in range(20):
        ref_opt.zero_grad()
        loss = loss_fn(ref, idx, tgt)
        loss.backward()
        ref_opt.step()
        expected.append(loss.item())
        opt.zero_grad()
        loss = compiled_loss(model, d_idx, d_tgt)
        loss.backward()
        opt_step()
        actual.append(loss.item())
    assert expected[-1] < expected[0] - 0.5, "the reference must actually train"
    rtol, atol = torch_tpu.tolerance(torch.float32, "aten::mm")
    torch.testing.assert_close(torch.tensor(actual), torch.tensor(expected),
                               rtol=max(rtol, 1e-4), atol=max(atol, 1e-4))
    # forward, backward, optimizer step: three captured programs, reused 19 times.
    assert captures() == 3
    assert tpu_dynamo.compile_stats()["eager_graphs"] == 0


def test_adamw_capturable_step_compiles_inside_the_step():
    torch.manual_seed(0)
    ref = MLP()
    model = MLP().to("tpu")
    model.load_state_dict(ref.state_dict())
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, capturable=True)
    step = torch.compile(opt.step, backend="tpu")
    x = torch.randn(8, 16)
    for _ in range(3):
        for m, o in ((ref, ref_opt), (model, opt)):
            o.zero_grad()
            m(x.to(next(m.parameters()).device)).square().mean().backward()
        ref_opt.step()
        step()
    stats = tpu_dynamo.compile_stats()
    assert stats["captures"] >= 1 and stats["eager_graphs"] == 0
    for p, q in zip(model.parameters(), ref.parameters()):
        close(p.detach(), q.detach())
    state = opt.state[next(model.parameters())]
    assert state["step"].device.type == "tpu" and state["step"].item() == 3


def test_non_capturable_optimizer_step_runs_its_graph_eagerly():
    """Its step counters live on the CPU: replaying a capture would not
    advance them, so that graph runs op by op (with a warning) — still right."""
    torch.manual_seed(0)
    ref = MLP()
    model = MLP().to("tpu")
    model.load_state_dict(ref.state_dict())
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=False)
    step = torch.compile(opt.step, backend="tpu")
    x = torch.randn(8, 16)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        for _ in range(3):
            for m, o in ((ref, ref_opt), (model, opt)):
                o.zero_grad()
                m(x.to(next(m.parameters()).device)).square().mean().backward()
            ref_opt.step()
            step()
    for p, q in zip(model.parameters(), ref.parameters()):
        close(p.detach(), q.detach())


# ---------------------------------------------------------------- semantics

def test_input_mutation_is_written_back():
    def f(x, y):
        x.add_(y)
        y.mul_(2)
        return (x * y).sum()

    x, y = torch.randn(5, 3), torch.randn(5, 3)
    dx, dy = x.to("tpu"), y.to("tpu")
    out = torch.compile(f, backend="tpu")(dx, dy)
    expected = f(x, y)
    close(out, expected)
    close(dx, x)
    close(dy, y)


def donated():
    return torch_tpu.metrics().get("donated_buffers", 0)


def test_updated_inputs_are_donated_when_nothing_else_reads_them():
    def step(p, m):
        m.mul_(0.9).add_(p)
        p.sub_(0.1 * m)

    p, m = torch.randn(64), torch.randn(64)
    dp, dm = p.to("tpu"), m.to("tpu")
    compiled = torch.compile(step, backend="tpu")
    for _ in range(3):
        before = donated()
        compiled(dp, dm)
        step(p, m)
        assert donated() - before == 2  # both updated buffers reused in place
    close(dp, p)
    close(dm, m)


def test_updated_input_read_by_pending_work_is_not_donated():
    # A deferred graph that still has to read x's old value holds its buffer:
    # the program must not consume it (a twin without aliases runs instead).
    def f(x):
        x.add_(1)

    x = torch.randn(32)
    dx = x.to("tpu")
    compiled = torch.compile(f, backend="tpu")
    compiled(dx)
    f(x)
    with torch_tpu.eager_mode("defer_and_fuse"):
        pending = dx * 2  # recorded, not run
        before = donated()
        compiled(dx)
        assert donated() == before
        close(pending, x * 2)
    f(x)
    close(dx, x)


def test_empty_parameter_input():
    # DINOv3 with no register tokens: a (1, 0, C) parameter nothing writes.
    registers = nn.Parameter(torch.zeros(1, 0, 4, device="tpu"))

    def f(x, extra):
        return torch.cat([registers.expand(2, -1, -1), x], 1) * 2, extra + 1

    x = torch.randn(2, 3, 4)
    out, extra = torch.compile(f, backend="tpu")(x.to("tpu"), torch.empty(0, device="tpu"))
    close(out.detach(), x * 2)
    assert extra.shape == (0,) and extra.device.type == "tpu"


def test_non_contiguous_and_offset_inputs():
    def f(a, b):
        return a @ b + 1

    a = torch.randn(4, 6)
    b = torch.randn(8, 6)
    da, db = a.to("tpu"), b.to("tpu")
    compiled = torch.compile(f, backend="tpu")
    close(compiled(da.t(), db[2:, :4].t()), f(a.t(), b[2:, :4].t()), "aten::mm")
    close(compiled(da[1:4], db[:6, 2:]), f(a[1:4], b[:6, 2:]), "aten::mm")


def ops_recorded():
    return torch_tpu.metrics().get("ops_recorded", 0)


def test_detached_views_pass_their_storage_without_a_copy():
    # AOTAutograd detaches the activations it saves: a slice of a bigger
    # result comes to the backward without _base. Its storage's buffer is the
    # program input (shared by the slices of one storage); nothing is copied.
    def f(q, k, v):
        return (q @ k.t()).softmax(-1) @ v

    qkv = torch.randn(6, 12)
    dqkv = qkv.to("tpu")
    compiled = torch.compile(f, backend="tpu")
    views = [dqkv[:, i:i + 4].detach() for i in (0, 4, 8)]
    assert all(t._base is None and not t.is_contiguous() for t in views)
    close(compiled(*views), f(*qkv.split(4, 1)), "aten::mm")
    before = ops_recorded()
    out = compiled(*[dqkv[:, i:i + 4].detach() for i in (0, 4, 8)])
    assert ops_recorded() == before  # no eager copy of an input
    close(out, f(*qkv.split(4, 1)), "aten::mm")


# AOTAutograd detaches the activations it saves: a detached slice comes
# without _base, and its write must still reach its storage.
@pytest.mark.parametrize("detached", [False, True])
def test_mutation_through_a_view_input_reaches_its_storage(detached):
    def f(v):
        v.mul_(3)
        return v.sum()

    base = torch.arange(12.0).reshape(3, 4)
    dbase = base.to("tpu")
    compiled = torch.compile(f, backend="tpu")
    for _ in range(2):
        view = dbase[:, 1]
        out = compiled(view.detach() if detached else view)
        close(out, f(base[:, 1]))
        close(dbase, base)


def test_calls_alternating_between_signatures_reuse_their_programs():
    # A call first tries the program of the last call; other signatures
    # (shapes, numbers, the matmul precision) find theirs by key.
    def f(x, n):
        return x @ x.t() * n

    compiled = torch.compile(f, backend="tpu", dynamic=False)
    a, b = torch.randn(3, 5), torch.randn(4, 5)
    da, db = a.to("tpu"), b.to("tpu")
    for _ in range(2):
        for x, dx in ((a, da), (b, db), (a, da)):
            for n in (2, 3):
                close(compiled(dx, n), f(x, n), "aten::mm")
    start = captures()
    for x, dx in ((a, da), (b, db)):
        close(compiled(dx, 2), f(x, 2), "aten::mm")
    assert captures() == start
    old = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("high")
        close(compiled(da, 2), f(a, 2), "aten::mm")
        assert captures() == start + 1
    finally:
        torch.set_float32_matmul_precision(old)
    close(compiled(da, 2), f(a, 2), "aten::mm")
    assert captures() == start + 1


def test_outputs_aliasing_inputs_and_views():
    def f(x):
        y = x + 1
        return y.t(), x.view(-1), y[1]

    x = torch.randn(3, 4)
    outs = torch.compile(f, backend="tpu")(x.to("tpu"))
    for o, e in zip(outs, f(x)):
        assert o.shape == e.shape
        close(o, e)


def test_graph_break_runs_the_rest_eagerly():
    def f(x):
        y = torch.sin(x) * 2
        if y.sum().item() > 0:  # data-dependent: graph break
            y = y + 1
        else:
            y = y - 1
        return torch.relu(y)

    compiled = torch.compile(f, backend="tpu")
    for sign in (1, -1):
        x = sign * torch.rand(4, 4) + sign * 0.1
        close(compiled(x.to("tpu")), f(x))
    assert tpu_dynamo.compile_stats()["graphs"] >= 2


def test_graph_with_an_op_sized_by_values_runs_eagerly():
    # Dynamo can trace such an op whole (here by config; transformers'
    # Idefics3 does `ids[mask] = pos[mask]`): the capture cannot size it, so
    # the graph runs op by op, with a warning naming the op, and stays right
    # for every mask.
    def f(y):
        return torch.nonzero(y > 0).float().sum() + y.sum()

    y = torch.randn(4, 5)
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        compiled = torch.compile(f, backend="tpu", fullgraph=True)
        with pytest.warns(UserWarning, match=r"runs op by op in eager mode \(nonzero"):
            close(compiled(y.to("tpu")), f(y))
        close(compiled((-y).to("tpu")), f(-y))
    assert tpu_dynamo.compile_stats()["eager_graphs"] == 1


def test_one_hot_range_check_raises_after_the_program():
    # one_hot's decomposition checks its classes with _assert_async, which a
    # program cannot raise: the backend reads the condition after each run.
    def route(x, idx):
        mask = F.one_hot(idx, num_classes=4).permute(2, 1, 0)
        return x * mask.sum((0, 1)).float()

    x = torch.randn(3, 5)
    idx = torch.randint(0, 4, (5, 2))
    compiled = torch.compile(route, backend="tpu")
    close(compiled(x.to("tpu"), idx.to("tpu")), route(x, idx))
    for bad, message in ((idx + 4, "smaller than num_classes"), (idx - 5, "non-negative")):
        with pytest.raises(RuntimeError, match=message):
            route(x, bad)
        with pytest.raises(RuntimeError, match=message):
            compiled(x.to("tpu"), bad.to("tpu"))
    assert tpu_dynamo.compile_stats()["eager_graphs"] == 0


def test_dropout_draws_fresh_randomness_every_call():
    model = nn.Sequential(nn.Linear(64, 64), nn.Dropout(0.5)).to("tpu").train()
    compiled = torch.compile(model, backend="tpu")
    x = torch.randn(32, 64).to("tpu")
    a, b = compiled(x).detach().cpu(), compiled(x).detach().cpu()
    assert not torch.equal(a, b)
    zeros = (a == 0).float().mean().item()
    assert 0.4 < zeros < 0.6


def test_graph_numbers_are_literals_of_the_captured_program(run_python):
    # A captured program serves one set of numbers (a new value is a new
    # graph), so they are constants XLA can fold (pow(x, 2) -> x * x), not
    # runtime parameters: the program's only parameter is x.
    r = run_python("""
        import torch, torch_tpu
        x = torch.linspace(-2, 2, 12)
        g = torch.compile(lambda x: torch.pow(x, 2) * 0.5 + 3.0, backend="tpu")
        torch.testing.assert_close(g(x.to("tpu")).cpu(), torch.pow(x, 2) * 0.5 + 3.0)
        print("ok")
    """, TORCH_TPU_DUMP_HLO="1", TORCH_TPU_CACHE_DIR=None)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-4000:]
    mains = [line.strip() for line in r.stderr.splitlines()
             if "func.func public @main" in line and "12xf32" in line]
    assert len(mains) == 1, r.stderr[-4000:]
    assert mains[0].startswith("func.func public @main(%v0: tensor<12xf32>) ->"), mains[0]


def test_static_shapes_recompile_per_shape():
    def f(x):
        return torch.tanh(x) * 2

    compiled = torch.compile(f, backend="tpu", dynamic=False)
    for n in (3, 5, 7):
        x = torch.randn(n, 4)
        close(compiled(x.to("tpu")), f(x))
    assert tpu_dynamo.compile_stats()["graphs"] == 3


def test_dynamic_true_traces_once_and_compiles_per_bucket():
    """The first size is captured; once a size changes, the graph runs on
    padded inputs (runtime/dynamic_dims.h) in one deferred program per bucket."""
    def f(x):
        return (torch.tanh(x) * x.shape[0]).sum(0)

    compiled = torch.compile(f, backend="tpu", dynamic=True)
    before = tpu_dynamo.compile_stats()
    programs = torch_tpu.metrics()["graphs_compiled"]
    for n in (3, 5, 7, 5, 9, 15, 20, 31):
        x = torch.randn(n, 4)
        close(compiled(x.to("tpu")), f(x))
    after = tpu_dynamo.compile_stats()
    assert after["graphs"] - before["graphs"] == 1      # one Dynamo/AOT graph
    assert after["captures"] - before["captures"] == 1  # the first size
    # The capture, then buckets 16 and 32 (8 sizes).
    assert torch_tpu.metrics()["graphs_compiled"] - programs <= 3


def test_dynamic_true_training_matches_cpu_over_sizes():
    torch.manual_seed(0)
    lin = torch.nn.Linear(6, 3)
    lin_tpu = torch.nn.Linear(6, 3).to("tpu")
    lin_tpu.load_state_dict(lin.state_dict())
    step = torch.compile(lambda m, x: torch.tanh(m(x)).softmax(0).square().sum(), backend="tpu",
                         dynamic=True)
    for n in (4, 9, 13, 21):
        x = torch.randn(n, 6)
        lin.zero_grad()
        lin_tpu.zero_grad()
        ref = torch.tanh(lin(x)).softmax(0).square().sum()
        ref.backward()
        loss = step(lin_tpu, x.to("tpu"))
        loss.backward()
        close(loss, ref)
        close(lin_tpu.weight.grad, lin.weight.grad)
        close(lin_tpu.bias.grad, lin.bias.grad)


def test_recompilation_storm_warns_with_the_failed_guard():
    def f(x):
        return x * 2 + 1

    compiled = torch.compile(f, backend="tpu", dynamic=False)
    limit = tpu_dynamo.recompile_warn_limit
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, limit + 3):
            compiled(torch.randn(n).to("tpu"))
    storm = [w for w in caught if issubclass(w.category, tpu_dynamo.TpuRecompileWarning)]
    assert len(storm) == 1, [str(w.message) for w in caught]
    msg = str(storm[0].message)
    assert "'f'" in msg and "recompiled" in msg
    assert "size mismatch" in msg or "x" in msg, msg


def test_unsupported_op_is_a_clear_error(monkeypatch):
    real = tpu_dynamo._has_tpu_kernel
    monkeypatch.setattr(tpu_dynamo, "_has_tpu_kernel", lambda name: name != "aten::cosh" and real(name))
    monkeypatch.setattr(tpu_dynamo, "_decomp_cache", {})

    def f(x):
        return torch.cosh(x) + 1

    with pytest.raises(Exception, match=r"aten::cosh.*TORCH_TPU_CPU_FALLBACK"):
        torch.compile(f, backend="tpu")(torch.randn(4).to("tpu"))


def test_unsupported_op_with_cpu_fallback_runs_eagerly(run_python):
    # aten::cosh pretends to have no lowering; with TORCH_TPU_CPU_FALLBACK=1
    # the graph runs op by op instead of failing.
    r = run_python("""
        import warnings, torch, torch_tpu
        from torch_tpu import dynamo
        real = dynamo._has_tpu_kernel
        dynamo._has_tpu_kernel = lambda n: n != "aten::cosh" and real(n)
        dynamo._decomp_cache = {}
        x = torch.randn(4)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            out = torch.compile(lambda x: torch.cosh(x) + 1, backend="tpu")(x.to("tpu"))
        torch.testing.assert_close(out.cpu(), torch.cosh(x) + 1)
        assert any("runs op by op" in str(m.message) for m in w), [str(m.message) for m in w]
        print("OK")
    """, TORCH_TPU_CPU_FALLBACK="1")
    assert r.returncode == 0 and "OK" in r.stdout, r.stderr[-3000:]


def test_programs_persist_in_the_disk_cache(run_python, tmp_path):
    code = """
        import torch, torch_tpu
        f = torch.compile(lambda x, y: (x @ y).relu().sum(0), backend="tpu")
        f(torch.randn(16, 8).to("tpu"), torch.randn(8, 4).to("tpu")).cpu()
        print("disk_hits", torch_tpu.metrics()["disk_cache_hits"])
    """
    first = run_python(code, TORCH_TPU_CACHE_DIR=str(tmp_path))
    second = run_python(code, TORCH_TPU_CACHE_DIR=str(tmp_path))
    assert first.returncode == 0 and second.returncode == 0, first.stderr[-2000:] + second.stderr[-2000:]
    hits = int(second.stdout.split("disk_hits")[-1])
    assert hits >= 1


# ---------------------------------------------------------------- Hugging Face models

def _hf_check(model, inputs, field):
    model.eval()
    with torch.no_grad():
        expected = getattr(model(**inputs), field)
        model.to("tpu")
        compiled = torch.compile(model, backend="tpu")
        out = getattr(compiled(**{k: v.to("tpu") for k, v in inputs.items()}), field)
    close(out, expected, "aten::bmm")
    assert tpu_dynamo.compile_stats()["eager_graphs"] == 0


@pytest.fixture
def transformers():
    return pytest.importorskip("transformers")


def test_hf_bert_inference(transformers):
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2,
                                  num_attention_heads=4, intermediate_size=64,
                                  max_position_embeddings=64)
    ids = torch.randint(0, 128, (2, 16))
    mask = torch.ones_like(ids)
    mask[1, 12:] = 0
    _hf_check(transformers.BertModel(cfg), {"input_ids": ids, "attention_mask": mask},
              "last_hidden_state")


def test_hf_gpt2_inference(transformers):
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=128, n_embd=32, n_layer=2, n_head=4, n_positions=64,
                                  bos_token_id=0, eos_token_id=0)
    _hf_check(transformers.GPT2LMHeadModel(cfg), {"input_ids": torch.randint(0, 128, (2, 16))},
              "logits")


def test_hf_llama_inference(transformers):
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=64)
    _hf_check(transformers.LlamaForCausalLM(cfg), {"input_ids": torch.randint(0, 128, (2, 16))},
              "logits")
