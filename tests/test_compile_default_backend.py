"""torch.compile(model) with PyTorch's default backend on tpu tensors: tpu
graphs go to the "tpu" backend (python/torch_tpu/compile/default_backend.py
says why), so training and inference give what backend="tpu" gives; a graph
that cannot be compiled fails naming its op; graphs without tpu tensors still
go to Inductor."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu
from torch_tpu import dynamo as tpu_dynamo


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(12, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 5))


def train(model, compile_kwargs, xs, ys, device):
    model = copy.deepcopy(model).to(device)
    step_model = torch.compile(model, **compile_kwargs) if compile_kwargs is not None else model
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for x, y in zip(xs, ys):
        loss = F.cross_entropy(step_model(x.to(device)), y.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.detach().cpu())
    return torch.stack(losses), [p.detach().cpu() for p in model.parameters()]


def test_default_compile_trains_as_backend_tpu():
    g = torch.Generator().manual_seed(1)
    xs = [torch.randn(16, 12, generator=g) for _ in range(4)]
    ys = [torch.randint(0, 5, (16,), generator=g) for _ in range(4)]
    model = make_model()
    default_losses, default_params = train(model, {}, xs, ys, "tpu")
    stats = tpu_dynamo.compile_stats()
    assert stats["captures"] >= 2 and stats["eager_graphs"] == 0, stats  # forward and backward, captured
    torch._dynamo.reset()
    tpu_losses, tpu_params = train(model, {"backend": "tpu"}, xs, ys, "tpu")
    torch.testing.assert_close(default_losses, tpu_losses, rtol=0, atol=0)
    for a, b in zip(default_params, tpu_params):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    cpu_losses, cpu_params = train(model, None, xs, ys, "cpu")
    torch.testing.assert_close(default_losses, cpu_losses, rtol=1e-4, atol=1e-5)
    for a, b in zip(default_params, cpu_params):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_default_compile_infers_and_mode_is_accepted():
    model = make_model().eval()
    x = torch.randn(8, 12)
    want = model(x)
    m = model.to("tpu")
    with torch.no_grad():
        got = torch.compile(m, mode="reduce-overhead")(x.to("tpu"))
        torch._dynamo.reset()
        same = torch.compile(m, backend="tpu")(x.to("tpu"))
    assert tpu_dynamo.compile_stats()["captures"] == 2
    torch.testing.assert_close(got.cpu(), same.cpu(), rtol=0, atol=0)
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)


def test_graph_without_tensor_inputs_that_makes_tpu_tensors():
    fn = torch.compile(lambda: torch.arange(6, device="tpu").float().reshape(2, 3).cos())
    torch.testing.assert_close(fn().cpu(), torch.arange(6).float().reshape(2, 3).cos())
    assert tpu_dynamo.compile_stats()["captures"] == 1


@torch.library.custom_op("cuda_habits_test::host_only", mutates_args=(), device_types="cpu")
def host_only(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@host_only.register_fake
def _(x):
    return torch.empty_like(x)


def test_uncompilable_graph_names_its_op():
    fn = torch.compile(lambda x: host_only(x + 1) * 3)
    with pytest.raises(Exception) as err:
        fn(torch.ones(3, device="tpu"))
    text = str(err.value)
    assert "cuda_habits_test::host_only" in text, text
    assert "ModuleNotFoundError" not in text and "torch_tpu._internal" not in text, text


def test_cpu_graphs_still_go_to_inductor():
    fn = torch.compile(lambda a: torch.sin(a) * 2 + 1)
    x = torch.linspace(-1, 1, 7)
    torch.testing.assert_close(fn(x), torch.sin(x) * 2 + 1)
    assert tpu_dynamo.compile_stats()["graphs"] == 0
