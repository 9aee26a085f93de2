"""torch.amp.GradScaler("tpu") (csrc/lowering/grad_scaler.cpp): its two ops
against the CPU's kernels, and an fp16 autocast training loop that skips the
steps whose gradients overflow, step for step with the same loop on the CPU,
in every eager mode."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu

MODES = ("strict", "debug", "defer_and_fuse")
INF, NAN = float("inf"), float("nan")


def grads(device):
    return [torch.tensor([1e30, 2.0, -3.0], device=device),                    # overflows only once unscaled
            torch.tensor([[1.0, 4.0]], dtype=torch.float16, device=device),
            torch.tensor([3.0, 2.0, 0.1], dtype=torch.bfloat16, device=device),
            torch.tensor(5.0, dtype=torch.float64, device=device)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("poison", [None, INF, -INF, NAN])
def test_unscale_matches_cpu(poison, mode):
    def run(device):
        g = grads(device)
        if poison is not None:
            g[1][0, 1] = poison
        found = torch.zeros((), device=device)
        torch._amp_foreach_non_finite_check_and_unscale_(g, found, torch.tensor(1 / 3, device=device))
        return g, found

    expected, expected_found = run("cpu")
    with torch_tpu.eager_mode(mode):
        actual, found = run("tpu")
    assert found.item() == expected_found.item() == (0.0 if poison is None else 1.0)
    for a, e in zip(actual, expected):
        assert a.dtype == e.dtype and a.shape == e.shape
        torch.testing.assert_close(a.cpu(), e, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("mode", MODES)
def test_functional_unscale_matches_cpu(mode):
    # The out-of-place variant (what functionalization, and so torch.compile,
    # calls) returns the unscaled list and a new found_inf; its inputs stay.
    def run(device):
        g = grads(device)
        g[0][1] = NAN
        found = torch.zeros((), device=device)
        out, new_found = torch.ops.aten._amp_foreach_non_finite_check_and_unscale(
            g, found, torch.tensor(0.25, device=device))
        return out, new_found, g, found

    e_out, e_found, e_in, e_flag = run("cpu")
    with torch_tpu.eager_mode(mode):
        out, new_found, g, found = run("tpu")
    assert len(out) == len(e_out)
    for a, e in zip(list(out) + [new_found] + g + [found], list(e_out) + [e_found] + e_in + [e_flag]):
        assert a.dtype == e.dtype and a.shape == e.shape
        torch.testing.assert_close(a.cpu(), e, rtol=0, atol=0, equal_nan=True)


def test_unscale_inside_a_compiled_function():
    def f(g, found, inv):
        torch._amp_foreach_non_finite_check_and_unscale_(g, found, inv)
        return found

    def run(device, fn):
        g = [torch.tensor([1.0, INF], device=device), torch.ones(3, device=device)]
        found = fn(g, torch.zeros(1, device=device), torch.full((1,), 0.5, device=device))
        return [t.cpu() for t in g], found.cpu()

    e_g, e_found = run("cpu", f)
    a_g, a_found = run("tpu", torch.compile(f, backend="tpu"))
    torch.testing.assert_close(a_found, e_found, rtol=0, atol=0)
    for a, e in zip(a_g, e_g):
        torch.testing.assert_close(a, e, rtol=0, atol=0)


def test_unscale_keeps_a_raised_flag_and_takes_a_one_element_vector():
    g = [torch.ones(3, device="tpu")]
    found = torch.full((1,), 2.0, device="tpu")  # summed over devices by GradScaler
    torch._amp_foreach_non_finite_check_and_unscale_(g, found, torch.full((1,), 0.5, device="tpu"))
    assert found.cpu().tolist() == [2.0] and g[0].cpu().tolist() == [0.5] * 3


@pytest.mark.parametrize("found_pattern", [[0, 0, 0, 0, 0], [0, 1, 0, 0, 1], [1, 1, 0, 0, 0]])
@pytest.mark.parametrize("start", [4.0, 3e38])
def test_update_scale_matches_cpu(found_pattern, start):
    def run(device):
        scale = torch.tensor(start, device=device)
        tracker = torch.tensor(0, dtype=torch.int32, device=device)
        history = []
        for f in found_pattern:
            out = torch._amp_update_scale_(scale, tracker, torch.tensor(float(f), device=device),
                                           2.0, 0.5, 2)
            assert out is scale
            history.append((scale.item(), tracker.item()))
        return history

    assert run("tpu") == run("cpu")


def errors(call):
    try:
        call()
    except Exception as e:  # noqa: BLE001 (the type is what is compared)
        return type(e), str(e).replace("_cpu", "_tpu")
    return None


BAD = [
    ("found_inf of two elements", lambda d: torch._amp_foreach_non_finite_check_and_unscale_(
        [torch.ones(2, device=d)], torch.zeros(2, device=d), torch.ones((), device=d))),
    ("found_inf float64", lambda d: torch._amp_foreach_non_finite_check_and_unscale_(
        [torch.ones(2, device=d)], torch.zeros((), dtype=torch.float64, device=d), torch.ones((), device=d))),
    ("inv_scale of two elements", lambda d: torch._amp_foreach_non_finite_check_and_unscale_(
        [torch.ones(2, device=d)], torch.zeros((), device=d), torch.ones(2, device=d))),
    ("integer gradients", lambda d: torch._amp_foreach_non_finite_check_and_unscale_(
        [torch.ones(2, dtype=torch.int64, device=d)], torch.zeros((), device=d), torch.ones((), device=d))),
    ("int64 growth tracker", lambda d: torch._amp_update_scale_(
        torch.ones((), device=d), torch.zeros((), dtype=torch.int64, device=d), torch.zeros((), device=d),
        2.0, 0.5, 2)),
    ("scale of two elements", lambda d: torch._amp_update_scale_(
        torch.ones(2, device=d), torch.zeros((), dtype=torch.int32, device=d), torch.zeros((), device=d),
        2.0, 0.5, 2)),
]


@pytest.mark.parametrize("name,call", BAD, ids=[b[0] for b in BAD])
def test_bad_input_raises_the_cpus_error(name, call):
    expected = errors(lambda: call("cpu"))
    assert expected is not None
    assert errors(lambda: call("tpu")) == expected


def test_mixed_devices_raise():
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch._amp_foreach_non_finite_check_and_unscale_(
            [torch.ones(2, device="tpu")], torch.zeros((), device="tpu"), torch.ones(1))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.norm, self.fc2 = nn.Linear(16, 32), nn.LayerNorm(32), nn.Linear(32, 5)

    def forward(self, x):
        return self.fc2(F.relu(self.norm(self.fc1(x))))


# Steps whose gradients are made to overflow; the scaler must skip them.
OVERFLOW_STEPS = {2, 3, 7}


def train(device, steps=10, compiled=False):
    torch.manual_seed(0)
    net = Net().to(device)
    model = torch.compile(net, backend="tpu") if compiled else net
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    scaler = torch.amp.GradScaler(device, init_scale=2.0**10, growth_interval=3)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(32, 16, generator=g).to(device)
    y = torch.randint(0, 5, (32,), generator=g).to(device)
    scales, skipped = [], []
    for step in range(steps):
        opt.zero_grad()
        with torch.autocast(device, dtype=torch.float16):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        if step in OVERFLOW_STEPS:
            net.fc1.weight.grad[0, 0] = INF
        before = net.fc2.weight.detach().clone()
        scaler.step(opt)
        scaler.update()
        skipped.append(torch.equal(before, net.fc2.weight.detach()))
        scales.append(scaler.get_scale())
    return scales, skipped, {k: v.cpu() for k, v in net.state_dict().items()}


@pytest.mark.parametrize("mode", MODES)
def test_fp16_training_loop_skips_overflowing_steps_like_the_cpu(mode):
    cpu_scales, cpu_skipped, cpu_state = train("cpu")
    with torch_tpu.eager_mode(mode):
        tpu_scales, tpu_skipped, tpu_state = train("tpu")
    assert [i for i, s in enumerate(cpu_skipped) if s] == sorted(OVERFLOW_STEPS)
    assert tpu_skipped == cpu_skipped
    assert tpu_scales == cpu_scales
    for k in cpu_state:
        torch.testing.assert_close(tpu_state[k], cpu_state[k], rtol=1e-2, atol=1e-2)


def test_compiled_model_with_the_scaler_outside_matches_the_cpu():
    torch._dynamo.reset()
    try:
        cpu_scales, cpu_skipped, cpu_state = train("cpu")
        tpu_scales, tpu_skipped, tpu_state = train("tpu", compiled=True)
    finally:
        torch._dynamo.reset()
    assert tpu_skipped == cpu_skipped and tpu_scales == cpu_scales
    for k in cpu_state:
        torch.testing.assert_close(tpu_state[k], cpu_state[k], rtol=1e-2, atol=1e-2)


def test_tpu_amp_grad_scaler_alias():
    s = torch.tpu.amp.GradScaler(init_scale=8.0)
    assert isinstance(s, torch.amp.GradScaler) and s._device == "tpu"
    out = s.scale(torch.ones(2, device="tpu"))
    assert out.device.type == "tpu" and out.cpu().tolist() == [8.0, 8.0]
