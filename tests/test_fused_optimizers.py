"""Fused optimizer steps (csrc/lowering/optimizer.cpp): `fused=True` on tpu
matches `foreach=True` on tpu and the CPU's fused step, step by step, in
every eager mode and under torch.compile; grad_scale / found_inf as PyTorch's
fused kernels treat them; tensor learning rates; a new lr reuses the
executable; device mix-ups name the argument."""
import pytest
import torch

import torch_tpu

MODES = ("strict", "debug", "defer_and_fuse")


def close(actual, expected):
    rtol, atol = torch_tpu.tolerance(expected.dtype, "")
    torch.testing.assert_close(actual.detach().cpu(), expected.detach().cpu(), rtol=rtol, atol=atol)


def model(device, dtype=torch.float32):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
    return m.to(device=device, dtype=dtype)


def trajectory(device, cls, kw, steps=3, dtype=torch.float32, mode="strict", step_fn=None):
    """Parameters and optimizer state after each of `steps` steps."""
    m = model(device, dtype)
    opt = cls(m.parameters(), **kw)
    g = torch.Generator().manual_seed(1)
    xs = [torch.randn(4, 6, generator=g).to(dtype) for _ in range(steps)]
    out = []
    step = step_fn(opt) if step_fn else opt.step
    with torch_tpu.eager_mode(mode):
        for x in xs:
            opt.zero_grad()
            m(x.to(device)).square().mean().backward()
            step()
            state = [t.detach().cpu().clone() for p in m.parameters()
                     for k, t in sorted(opt.state[p].items())
                     if torch.is_tensor(t) and k != "step"]
            out.append([p.detach().cpu().clone() for p in m.parameters()] + state)
    return out


def assert_same_trajectory(got, ref):
    assert len(got) == len(ref)
    for step, (a, b) in enumerate(zip(got, ref)):
        assert len(a) == len(b), f"step {step}"
        for x, y in zip(a, b):
            close(x, y)


CASES = [
    ("adamw", torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1)),
    ("adamw amsgrad maximize", torch.optim.AdamW,
     dict(lr=1e-2, weight_decay=0.05, amsgrad=True, maximize=True)),
    ("adam", torch.optim.Adam, dict(lr=1e-2, betas=(0.8, 0.95))),
    ("adam weight_decay amsgrad", torch.optim.Adam, dict(lr=1e-2, weight_decay=0.1, amsgrad=True)),
    ("adam maximize", torch.optim.Adam, dict(lr=1e-2, maximize=True, eps=1e-6)),
    ("sgd", torch.optim.SGD, dict(lr=0.1)),
    ("sgd momentum dampening", torch.optim.SGD, dict(lr=0.1, momentum=0.9, dampening=0.2)),
    ("sgd nesterov weight_decay", torch.optim.SGD,
     dict(lr=0.1, momentum=0.8, nesterov=True, weight_decay=0.01)),
    ("sgd maximize weight_decay", torch.optim.SGD, dict(lr=0.05, maximize=True, weight_decay=0.1)),
    ("adagrad", torch.optim.Adagrad, dict(lr=0.1, lr_decay=0.01, weight_decay=0.1)),
    ("adagrad maximize", torch.optim.Adagrad, dict(lr=0.1, maximize=True, eps=1e-5)),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,cls,kw", CASES, ids=[c[0] for c in CASES])
def test_fused_matches_foreach_and_cpu(name, cls, kw, mode):
    cpu_fused = trajectory("cpu", cls, dict(kw, fused=True))
    cpu_foreach = trajectory("cpu", cls, dict(kw, foreach=True))
    fused = trajectory("tpu", cls, dict(kw, fused=True), mode=mode)
    foreach = trajectory("tpu", cls, dict(kw, foreach=True), mode=mode)
    assert_same_trajectory(fused, cpu_fused)
    assert_same_trajectory(fused, cpu_foreach)
    assert_same_trajectory(fused, foreach)


def test_fused_step_is_one_recorded_op():
    m = model("tpu")
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2, fused=True)
    m(torch.randn(4, 6, device="tpu")).sum().backward()
    opt.step()  # creates the state
    torch_tpu.reset_metrics()
    opt.step()
    # the step counters' _foreach_add_ and the fused update
    assert torch_tpu.metrics()["ops_recorded"] == 2


@pytest.mark.parametrize("op", ["_fused_adamw_", "_fused_sgd_", "_fused_adagrad_"])
def test_bfloat16_params(op):
    """Half types compute in f32 and round once, as the CPU's kernels do (the
    same inputs on both sides: a bf16 forward would differ by itself)."""
    def args(device):
        ls = [[t.to(torch.bfloat16) for t in lists(seed=s)] for s in range(4)]
        ls[3] = [t.abs() for t in ls[3]]
        steps = [torch.tensor(2.0) for _ in ls[0]]
        if op == "_fused_adamw_":
            ls = ls + [[t.abs() + 0.5 for t in ls[3]], steps]
            kw = dict(lr=0.01, beta1=0.9, beta2=0.999, weight_decay=0.1, eps=1e-8, amsgrad=True,
                      maximize=False)
        elif op == "_fused_sgd_":
            ls = ls[:3]
            kw = dict(weight_decay=0.1, momentum=0.9, lr=0.1, dampening=0.1, nesterov=False,
                      maximize=False, is_first_step=False)
        else:
            ls = [ls[0], ls[1], ls[3], steps]
            kw = dict(lr=0.1, lr_decay=0.01, weight_decay=0.1, eps=1e-10, maximize=False)
        return [[t.to(device) for t in l] for l in ls], kw
    (cpu, kw), (dev, _) = args("cpu"), args("tpu")
    getattr(torch, op)(*cpu, **kw)
    getattr(torch, op)(*dev, **kw)
    for lc, ld in zip(cpu, dev):
        for c, d in zip(lc, ld):
            assert d.dtype == c.dtype
            close(d, c)


@pytest.mark.parametrize("cls,kw", [
    (torch.optim.AdamW, dict(weight_decay=0.1)),
    (torch.optim.Adam, dict(amsgrad=True)),
    (torch.optim.SGD, dict(momentum=0.9)),
    (torch.optim.Adagrad, dict()),
])
def test_tensor_learning_rate(cls, kw):
    ref = trajectory("cpu", cls, dict(kw, lr=torch.tensor(0.02), fused=True))
    got = trajectory("tpu", cls, dict(kw, lr=torch.tensor(0.02), fused=True))
    assert_same_trajectory(got, ref)


def test_a_new_learning_rate_reuses_the_executable():
    """lr (and every other float hyper-parameter) is a program parameter:
    a scheduler changing it each step compiles nothing new."""
    def sched(opt):
        def step():
            opt.step()
            sched_.step()
        sched_ = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 / (s + 1))
        return step

    ref = trajectory("cpu", torch.optim.AdamW, dict(lr=1e-2, fused=True), steps=4,
                     step_fn=sched)
    m = model("tpu")
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2, fused=True)
    step = sched(opt)
    g = torch.Generator().manual_seed(1)
    for i in range(4):
        x = torch.randn(4, 6, generator=g)
        opt.zero_grad()
        m(x.to("tpu")).square().mean().backward()
        if i == 2:
            torch_tpu.reset_metrics()
        step()
        if i >= 2:
            assert torch_tpu.metrics()["cache_misses"] == 0, opt.param_groups[0]["lr"]
    for p, q in zip(m.parameters(), ref[-1]):
        close(p, q)


def lists(n=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    shapes = [(3, 4), (5,), ()][:n]
    return [torch.randn(s, generator=g) for s in shapes]


def adam_args(device, amsgrad=False):
    params, grads, m = lists(seed=0), lists(seed=1), lists(seed=2)
    v = [t.abs() for t in lists(seed=3)]
    mx = [t.abs() + 0.5 for t in lists(seed=4)] if amsgrad else []
    steps = [torch.tensor(3.0) for _ in params]
    return [[t.to(device) for t in l] for l in (params, grads, m, v, mx, steps)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("found", [0.0, 1.0])
@pytest.mark.parametrize("op", ["_fused_adamw_", "_fused_adam_"])
def test_grad_scale_and_found_inf(op, found, mode):
    """grad_scale divides the gradients (which are written back unscaled);
    found_inf nonzero leaves every tensor as it was."""
    kw = dict(lr=0.01, beta1=0.9, beta2=0.999, weight_decay=0.1, eps=1e-8, amsgrad=True,
              maximize=False)
    cpu = adam_args("cpu", amsgrad=True)
    dev = adam_args("tpu", amsgrad=True)
    before = [[t.clone() for t in l] for l in cpu]
    getattr(torch, op)(*cpu, **kw, grad_scale=torch.tensor(4.0), found_inf=torch.tensor(found))
    with torch_tpu.eager_mode(mode):
        getattr(torch, op)(*dev, **kw, grad_scale=torch.tensor(4.0, device="tpu"),
                           found_inf=torch.tensor(found, device="tpu"))
    for lc, ld, lb in zip(cpu, dev, before):
        for c, d, b in zip(lc, ld, lb):
            close(d, c)
            if found:
                assert torch.equal(d.cpu(), b)
    if not found:
        close(dev[1][0], before[1][0] / 4)


@pytest.mark.parametrize("found", [0.0, 1.0])
def test_sgd_grad_scale_and_found_inf(found):
    def args(device):
        return [[t.to(device) for t in l] for l in (lists(seed=0), lists(seed=1), lists(seed=2))]
    kw = dict(weight_decay=0.01, momentum=0.9, lr=0.1, dampening=0.0, nesterov=True,
              maximize=True, is_first_step=False)
    cpu, dev = args("cpu"), args("tpu")
    torch._fused_sgd_(*cpu, **kw, grad_scale=torch.tensor(2.0), found_inf=torch.tensor(found))
    torch._fused_sgd_(*dev, **kw, grad_scale=torch.tensor(2.0, device="tpu"),
                      found_inf=torch.tensor(found, device="tpu"))
    for lc, ld in zip(cpu, dev):
        for c, d in zip(lc, ld):
            close(d, c)


def test_functional_form_returns_one_list_per_updated_list():
    kw = dict(lr=0.01, beta1=0.9, beta2=0.999, weight_decay=0.0, eps=1e-8, amsgrad=False,
              maximize=False)
    cpu = torch.ops.aten._fused_adamw(*adam_args("cpu"), **kw)
    dev = torch.ops.aten._fused_adamw(*adam_args("tpu"), **kw)
    assert [len(l) for l in dev] == [len(l) for l in cpu] == [3, 3, 3, 3, 0]
    for lc, ld in zip(cpu, dev):
        for c, d in zip(lc, ld):
            assert d.device.type == "tpu"
            close(d, c)


def test_compiled_fused_step_matches_cpu():
    """PyTorch wraps its fused step in torch.compiler.disable ("don't trace
    into fused optimizer"): a compiled opt.step calls the fused op eagerly,
    which must still be our lowering and right."""
    ref = trajectory("cpu", torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1, fused=True))
    got = trajectory("tpu", torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1, fused=True),
                     step_fn=lambda opt: torch.compile(opt.step, backend="tpu"))
    assert_same_trajectory(got, ref)


@pytest.mark.parametrize("which,name", [(2, "exp_avgs"), (1, "grads"), (3, "exp_avg_sqs")])
def test_cpu_tensor_among_tpu_tensors_names_the_argument(which, name):
    args = adam_args("tpu")
    args[which][0] = args[which][0].cpu()
    with pytest.raises(RuntimeError, match=f"same device.*tpu:0 and cpu.*argument {name} .*_fused_adamw_"):
        torch._fused_adamw_(*args, lr=0.01, beta1=0.9, beta2=0.999, weight_decay=0.0, eps=1e-8,
                            amsgrad=False, maximize=False)


def test_mismatched_list_lengths_raise():
    args = adam_args("tpu")
    args[2] = args[2][:2]
    with pytest.raises(RuntimeError, match="_fused_adamw_"):
        torch._fused_adamw_(*args, lr=0.01, beta1=0.9, beta2=0.999, weight_decay=0.0, eps=1e-8,
                            amsgrad=False, maximize=False)


@pytest.mark.parametrize("cls,kw", [
    (torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1)),
    (torch.optim.SGD, dict(lr=0.1, momentum=0.9)),
])
def test_grad_scaler_with_a_fused_optimizer(cls, kw, require_ops):
    """GradScaler hands the fused step grad_scale and found_inf; a step whose
    gradients overflow is skipped, as on the CPU."""
    require_ops("aten::_amp_foreach_non_finite_check_and_unscale", "aten::_amp_update_scale")

    def run(device):
        m = model(device)
        opt = cls(m.parameters(), fused=True, **kw)
        scaler = torch.amp.GradScaler(device.split(":")[0], init_scale=2.0 ** 8)
        g = torch.Generator().manual_seed(1)
        out = []
        for step in range(4):
            x = torch.randn(4, 6, generator=g).to(device)
            opt.zero_grad()
            loss = m(x).square().mean() * (float("inf") if step == 1 else 1.0)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            out.append([p.detach().cpu().clone() for p in m.parameters()] +
                       [torch.tensor(scaler.get_scale())])
        return out

    assert_same_trajectory(run("tpu"), run("cpu"))
