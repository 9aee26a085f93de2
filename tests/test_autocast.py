"""torch.autocast("tpu") (csrc/aten/autocast.cpp): CUDA's op policy, bfloat16 by
default and float16 on request, in every eager mode and under torch.compile.

References: the registrations are held against the AutocastCUDA kernels
PyTorch itself registers; op results against the CPU computing the same op on
inputs cast the way the policy says; a small model against PyTorch's own CPU
autocast, whose policy agrees with CUDA's on the ops it uses."""
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu

MODES = ("strict", "debug", "defer_and_fuse")
# cuDNN's own convolution kernels: listed by CUDA, never reached on tpu.
CUDA_ONLY = {"aten::cudnn_convolution", "aten::cudnn_convolution_transpose"}


def close(actual, expected, op=""):
    rtol, atol = torch_tpu.tolerance(expected.dtype, op)
    torch.testing.assert_close(actual.cpu(), expected, rtol=rtol, atol=atol)


def randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def test_registrations_are_cudas():
    def with_kernel(key):
        return {n for n in torch._C._dispatch_get_all_op_names()
                if torch._C._dispatch_has_kernel_for_dispatch_key(n, key)}

    cuda = with_kernel("AutocastCUDA") - CUDA_ONLY
    ours = with_kernel("AutocastPrivateUse1")
    assert cuda, "PyTorch registers AutocastCUDA kernels in every build"
    assert ours == cuda


def test_device_module_and_defaults():
    import torch.tpu.amp  # noqa: F401  (importable like torch.cuda.amp)

    assert torch.get_autocast_dtype("tpu") == torch.bfloat16
    assert torch.tpu.get_amp_supported_dtype() == [torch.bfloat16, torch.float16]
    assert torch.tpu.is_bf16_supported()
    assert torch.amp.is_autocast_available("tpu")
    a, b = randn(4, 8).to("tpu"), randn(8, 3, seed=1).to("tpu")
    with torch.tpu.amp.autocast():
        assert torch.is_autocast_enabled("tpu")
        assert (a @ b).dtype == torch.bfloat16
    with torch.tpu.amp.autocast(dtype=torch.float16):
        assert (a @ b).dtype == torch.float16
    assert not torch.is_autocast_enabled("tpu")
    assert (a @ b).dtype == torch.float32


# (name, function, inputs as CPU tensors). The reference runs the function on
# the CPU with every floating input cast to the autocast dtype.
LOWER = [
    ("mm", torch.mm, lambda: [randn(4, 8), randn(8, 3, seed=1)]),
    ("bmm", torch.bmm, lambda: [randn(2, 4, 8), randn(2, 8, 3, seed=1)]),
    ("matmul", torch.matmul, lambda: [randn(2, 4, 8), randn(8, 3, seed=1)]),
    ("addmm", torch.addmm, lambda: [randn(3), randn(4, 8, seed=1), randn(8, 3, seed=2)]),
    ("baddbmm", torch.baddbmm, lambda: [randn(2, 4, 3), randn(2, 4, 8, seed=1), randn(2, 8, 3, seed=2)]),
    ("linear", F.linear, lambda: [randn(4, 8), randn(3, 8, seed=1), randn(3, seed=2)]),
    ("conv2d", F.conv2d, lambda: [randn(1, 2, 6, 6), randn(3, 2, 3, 3, seed=1)]),
    ("einsum", lambda a, b: torch.einsum("ij,jk->ik", a, b), lambda: [randn(4, 8), randn(8, 3, seed=1)]),
    ("prelu", F.prelu, lambda: [randn(2, 3, 4), torch.full((3,), 0.25)]),
    ("sdpa", F.scaled_dot_product_attention,
     lambda: [randn(1, 2, 5, 8), randn(1, 2, 5, 8, seed=1), randn(1, 2, 5, 8, seed=2)]),
]

# The reference runs on float32 copies of the (lower precision) inputs.
FP32 = [
    ("softmax", lambda x: torch.softmax(x, -1)),
    ("log_softmax", lambda x: F.log_softmax(x, -1)),
    ("layer_norm", lambda x: F.layer_norm(x, (8,))),
    ("group_norm", lambda x: F.group_norm(x, 2)),
    ("exp", torch.exp),
    ("log", torch.log),
    ("pow", lambda x: torch.pow(x, 2)),
    ("rsqrt", torch.rsqrt),
    ("cumsum", lambda x: torch.cumsum(x, -1)),
    ("sum", torch.sum),
    ("norm", torch.norm),
    ("logsumexp", lambda x: torch.logsumexp(x, -1)),
    ("mse_loss", lambda x: F.mse_loss(x, torch.ones_like(x))),
    ("nll_loss", lambda x: F.nll_loss(x, torch.zeros(4, dtype=torch.long, device=x.device))),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("name,fn,make", LOWER, ids=[c[0] for c in LOWER])
def test_lower_precision_ops(name, fn, make, dtype, mode):
    inputs = make()
    expected = fn(*[t.to(dtype) for t in inputs])
    with torch_tpu.eager_mode(mode), torch.autocast("tpu", dtype=dtype):
        actual = fn(*[t.to("tpu") for t in inputs])
    assert actual.dtype == dtype
    close(actual, expected, "aten::mm")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,fn", FP32, ids=[c[0] for c in FP32])
def test_float32_ops(name, fn, mode):
    x = (randn(4, 8).abs() + 0.5).to(torch.bfloat16)
    expected = fn(x.float())
    with torch_tpu.eager_mode(mode), torch.autocast("tpu"):
        actual = fn(x.to("tpu"))
    assert actual.dtype == torch.float32
    close(actual, expected)


@pytest.mark.parametrize("mode", MODES)
def test_promote_ops_take_the_widest_type(mode):
    a = randn(4, dtype=torch.bfloat16)
    b, c = randn(4, seed=1), randn(4, seed=2)
    with torch_tpu.eager_mode(mode), torch.autocast("tpu"):
        ta, tb, tc = a.to("tpu"), b.to("tpu"), c.to("tpu")
        r = torch.addcmul(ta, tb, tc, value=0.5)
        s = torch.atan2(ta, tb)
        same = torch.addcmul(ta, ta, ta)
        joined = torch.cat([ta, tb])  # cat promotes by itself (CUDA lists it no more)
    assert r.dtype == s.dtype == joined.dtype == torch.float32
    assert same.dtype == torch.bfloat16
    close(r, torch.addcmul(a.float(), b, c, value=0.5))
    close(s, torch.atan2(a.float(), b))
    close(joined, torch.cat([a.float(), b]))


def test_integer_and_float64_inputs_are_left_alone():
    i = torch.arange(6).reshape(2, 3).to("tpu")
    d = randn(3, 3, dtype=torch.float64).to("tpu")
    with torch.autocast("tpu"):
        assert (i @ i.T).dtype == torch.int64
        assert (d @ d).dtype == torch.float64


def test_cpu_tensors_in_a_tpu_region_are_not_cast():
    a = randn(4, 4)
    with torch.autocast("tpu"):
        assert (a @ a).dtype == torch.float32


def test_unsupported_dtype_warns_and_disables_as_torch_does_for_non_cuda_backends():
    a = randn(4, 4).to("tpu")
    for dtype in (torch.float64, torch.float32):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with torch.autocast("tpu", dtype=dtype):
                assert not torch.is_autocast_enabled("tpu")
                assert (a @ a).dtype == torch.float32
        assert any("In tpu autocast, but the target dtype is not supported" in str(w.message)
                   for w in caught)


def test_binary_cross_entropy_is_refused_as_on_cuda():
    p = torch.rand(4).to("tpu")
    with torch.autocast("tpu"), pytest.raises(RuntimeError, match="binary_cross_entropy"):
        F.binary_cross_entropy(p, torch.ones_like(p))
    F.binary_cross_entropy(p, torch.ones_like(p))  # allowed outside autocast


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.norm, self.fc2 = nn.Linear(16, 32), nn.LayerNorm(32), nn.Linear(32, 5)

    def forward(self, x):
        return self.fc2(F.gelu(self.norm(self.fc1(x))))


def forward_backward(device, autocast_device, model=None):
    torch.manual_seed(0)
    net = Net().to(device)
    x, y = randn(8, 16).to(device), torch.arange(8).remainder(5).to(device)
    run = model(net) if model else net
    with torch.autocast(autocast_device, dtype=torch.bfloat16):
        out = run(x)
        loss = F.cross_entropy(out, y)
    loss.backward()
    return out, loss, [p.grad for p in net.parameters()]


@pytest.mark.parametrize("mode", MODES)
def test_model_forward_backward_matches_cpu_autocast(mode):
    out_c, loss_c, grads_c = forward_backward("cpu", "cpu")
    with torch_tpu.eager_mode(mode):
        out_t, loss_t, grads_t = forward_backward("tpu", "tpu")
        assert out_t.dtype == out_c.dtype == torch.bfloat16
        assert loss_t.dtype == loss_c.dtype == torch.float32
        close(out_t, out_c, "aten::mm")
        torch.testing.assert_close(loss_t.cpu(), loss_c, rtol=2e-2, atol=2e-2)
        for gt, gc in zip(grads_t, grads_c):
            assert gt.dtype == gc.dtype == torch.float32
            torch.testing.assert_close(gt.cpu(), gc, rtol=3e-2, atol=3e-2)


@pytest.fixture
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_compiled_model_under_autocast_matches_eager_autocast(fresh_dynamo):
    out_e, loss_e, grads_e = forward_backward("tpu", "tpu")
    out_c, loss_c, grads_c = forward_backward(
        "tpu", "tpu", model=lambda net: torch.compile(net, backend="tpu"))
    assert out_c.dtype == torch.bfloat16
    close(out_c, out_e.cpu(), "aten::mm")
    close(loss_c, loss_e.cpu())
    for gc, ge in zip(grads_c, grads_e):
        close(gc, ge.cpu(), "aten::mm")


def test_autocast_entered_inside_a_compiled_function(fresh_dynamo):
    torch.manual_seed(0)
    net = Net().to("tpu")
    x = randn(8, 16).to("tpu")

    def f(x):
        with torch.autocast("tpu", dtype=torch.bfloat16):
            h = net(x)
        return h, h.float().softmax(-1)

    eager_h, eager_p = f(x)
    compiled_h, compiled_p = torch.compile(f, backend="tpu")(x)
    assert compiled_h.dtype == torch.bfloat16 and compiled_p.dtype == torch.float32
    close(compiled_h, eager_h.cpu(), "aten::mm")
    close(compiled_p, eager_p.cpu())


def test_custom_fwd_casts_inputs_and_leaves_autocast_off_inside():
    class Square(torch.autograd.Function):
        @staticmethod
        @torch.tpu.amp.custom_fwd(cast_inputs=torch.float32)
        def forward(ctx, x):
            inner = torch.is_autocast_enabled("tpu")
            return x @ x, torch.tensor(inner)

        @staticmethod
        @torch.tpu.amp.custom_bwd
        def backward(ctx, g, _):
            return g

    x = randn(3, 3, dtype=torch.bfloat16).to("tpu")
    with torch.autocast("tpu"):
        y, inner = Square.apply(x)
    assert y.dtype == torch.float32 and not inner.item()
    close(y, x.cpu().float() @ x.cpu().float())
