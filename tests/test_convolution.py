"""aten::convolution and aten::convolution_backward on tpu against the CPU: 1-D/2-D/3-D,
stride, padding, dilation, groups, transposed with output_padding, bias or not, input,
weight and bias gradients, errors, and a small CNN that trains like it does on the CPU.

Tolerances: float32 uses assert_close's defaults. In bfloat16/float16 both sides accumulate
in float32 and round once, but in different orders (XLA's convolution emitter vs oneDNN /
PyTorch's slow kernels), so a sum of K products may land one half-precision ulp apart; the
sums here have up to ~100 terms of magnitude ~10, hence HALF_TOL (a few ulps at that size).
Gradients, which are sums over the batch and spatial positions too, are compared the same
way.
"""
import pytest
import torch
import torch.nn.functional as F
import torch_tpu

DEV = "tpu"
FLOATS = [torch.float32, torch.bfloat16, torch.float16]
HALF_TOL = {torch.bfloat16: dict(atol=5e-2, rtol=2e-2), torch.float16: dict(atol=1e-2, rtol=5e-3)}


def make(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-4, 5, shape, generator=g).to(dtype)


def check(fn, *inputs, grad=False, **tol):
    """fn on CPU inputs and on their tpu copies gives the same results, and with grad=True
    the same gradients for every input (None inputs stay None)."""
    tol = tol or HALF_TOL.get(next(x for x in inputs if x is not None).dtype, {})
    cpu = [None if x is None else x.detach().clone().requires_grad_(grad) for x in inputs]
    dev = [None if x is None else x.detach().to(DEV).requires_grad_(grad) for x in inputs]
    out_c, out_d = fn(*cpu), fn(*dev)
    assert out_d.device.type == DEV
    torch.testing.assert_close(out_d.cpu(), out_c, **tol)
    if grad:
        g = make(out_c.shape, out_c.dtype, seed=9)
        out_c.backward(g)
        out_d.backward(g.to(DEV))
        for c, d in zip(cpu, dev):
            if c is not None:
                torch.testing.assert_close(d.grad.cpu(), c.grad, **tol)


CONV2D = [
    # (N, C_in, H, W), (C_out, C_in/groups, kH, kW), kwargs
    ((2, 3, 8, 8), (4, 3, 3, 3), dict()),
    ((1, 4, 7, 9), (6, 2, 3, 2), dict(stride=2, padding=1, groups=2)),
    ((2, 2, 9, 8), (3, 2, 3, 3), dict(stride=(2, 3), padding=(2, 1), dilation=(2, 1))),
    ((2, 6, 5, 5), (6, 1, 3, 3), dict(padding=1, groups=6)),  # depthwise
    ((1, 3, 6, 6), (2, 3, 1, 1), dict(stride=3)),  # strides that skip trailing rows
    ((3, 1, 4, 4), (2, 1, 4, 4), dict()),  # kernel covering the input
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("xs,ws,kw", CONV2D)
def test_conv2d(dtype, bias, xs, ws, kw):
    b = make((ws[0],), dtype, 2) if bias else None
    check(lambda x, w, b: F.conv2d(x, w, b, **kw), make(xs, dtype), make(ws, dtype, 1), b,
          grad=True)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("kw", [dict(), dict(stride=2, padding=2, dilation=2), dict(groups=2, padding=1)])
def test_conv1d(dtype, kw):
    check(lambda x, w, b: F.conv1d(x, w, b, **kw), make((2, 4, 11), dtype), make((6, 4 // kw.get("groups", 1), 3), dtype, 1),
          make((6,), dtype, 2), grad=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kw", [dict(), dict(stride=(1, 2, 2), padding=1), dict(dilation=2, groups=2)])
def test_conv3d(dtype, kw):
    g = kw.get("groups", 1)
    check(lambda x, w, b: F.conv3d(x, w, b, **kw), make((2, 4, 6, 7, 7), dtype), make((4, 4 // g, 2, 3, 2), dtype, 1),
          make((4,), dtype, 2), grad=True)


TRANSPOSED = [
    ((2, 4, 5, 5), (4, 3, 3, 3), dict()),
    ((1, 4, 4, 6), (4, 2, 3, 3), dict(stride=2, padding=1, output_padding=1)),
    ((2, 4, 5, 4), (4, 3, 3, 2), dict(stride=(3, 2), padding=(1, 0), output_padding=(2, 1), groups=2)),
    ((1, 2, 6, 6), (2, 2, 3, 3), dict(stride=2, dilation=2, padding=3)),  # padding > dilation*(k-1)
    ((2, 3, 4, 4), (3, 1, 2, 2), dict(stride=2, groups=3)),
    # output_padding past the stride (allowed below the dilation): the input
    # gradient's plain convolution yields rows past the input (OpInfo's sample).
    ((2, 2, 4, 4), (2, 2, 4, 5), dict(stride=(3, 2), padding=(1, 2), output_padding=(2, 3), groups=2,
                                      dilation=(4, 4))),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("xs,ws,kw", TRANSPOSED)
def test_conv_transpose2d(dtype, bias, xs, ws, kw):
    c_out = ws[1] * kw.get("groups", 1)
    b = make((c_out,), dtype, 2) if bias else None
    check(lambda x, w, b: F.conv_transpose2d(x, w, b, **kw), make(xs, dtype), make(ws, dtype, 1), b,
          grad=True)


@pytest.mark.parametrize("kw", [dict(stride=2, output_padding=1), dict(padding=1, dilation=2)])
def test_conv_transpose1d_3d(kw):
    check(lambda x, w, b: F.conv_transpose1d(x, w, b, **kw), make((2, 3, 7), torch.float32),
          make((3, 5, 3), torch.float32, 1), make((5,), torch.float32, 2), grad=True)
    check(lambda x, w, b: F.conv_transpose3d(x, w, b, **kw), make((1, 2, 4, 3, 5), torch.float32),
          make((2, 3, 3, 2, 3), torch.float32, 1), make((3,), torch.float32, 2), grad=True)


def test_conv_float64():
    check(lambda x, w, b: F.conv2d(x, w, b, padding=1), make((2, 3, 5, 5), torch.float64),
          make((4, 3, 3, 3), torch.float64, 1), make((4,), torch.float64, 2), grad=True)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_conv_integer(dtype):
    check(lambda x, w: F.conv2d(x, w, stride=2, padding=1), make((2, 3, 6, 6), dtype),
          make((4, 3, 3, 3), dtype, 1))


@pytest.mark.parametrize("mask", [(True, False, False), (False, True, False), (False, False, True),
                                  (True, True, True)])
def test_convolution_backward_output_mask(mask):
    g, x, w = make((2, 4, 4, 4), torch.float32), make((2, 3, 7, 7), torch.float32, 1), make((4, 3, 3, 3), torch.float32, 2)
    args = ([4], [2, 2], [1, 1], [1, 1], False, [0, 0], 1, list(mask))
    cpu = torch.ops.aten.convolution_backward(g, x, w, *args)
    dev = torch.ops.aten.convolution_backward(g.to(DEV), x.to(DEV), w.to(DEV), *args)
    for want, c, d in zip(mask, cpu, dev):
        if want:
            torch.testing.assert_close(d.cpu(), c)


@pytest.mark.parametrize("transposed", [False, True])
def test_wide_grouped_weight_grad_matches_cpu_without_batch_groups(run_python, transposed):
    # EfficientNet's depthwise convolutions have thousands of channels.
    # batch_group_count would cost seconds per weight gradient on XLA's CPU
    # compiler, which expands it into a dense masked convolution. In a fresh
    # interpreter, for the programs it prints.
    r = run_python(f"""
        import torch, torch.nn.functional as F, torch_tpu
        torch_tpu.set_eager_mode("{torch_tpu.get_eager_mode()}")
        g = torch.Generator().manual_seed(0)
        groups, transposed = 1024, {transposed}
        x = torch.randn(2, groups, 3, 3, generator=g)
        w = torch.randn(*((groups, 2) if transposed else (2 * groups, 1)), 3, 3, generator=g)
        conv = F.conv_transpose2d if transposed else F.conv2d
        grads = []
        for dev in ("cpu", "tpu"):
            wd = w.clone().to(dev).requires_grad_()
            y = conv(x.to(dev), wd, stride=2, padding=1, groups=groups)
            (y * torch.randn(y.shape, generator=torch.Generator().manual_seed(1)).to(dev)).sum().backward()
            grads.append(wd.grad.cpu())
        torch.testing.assert_close(grads[1], grads[0])
        print("ok")
    """, TORCH_TPU_DUMP_HLO="1", TORCH_TPU_CACHE_DIR=None)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-3000:]
    assert "feature_group_count = 1024" in r.stderr
    assert "batch_group_count = 1024" not in r.stderr


def test_only_weight_grad():
    x = make((2, 3, 6, 6), torch.float32)
    w = make((4, 3, 3, 3), torch.float32, 1)
    wc, wd = w.clone().requires_grad_(), w.to(DEV).requires_grad_()
    F.conv2d(x, wc, stride=2).sum().backward()
    F.conv2d(x.to(DEV), wd, stride=2).sum().backward()
    torch.testing.assert_close(wd.grad.cpu(), wc.grad)


@pytest.mark.parametrize("fn", [
    lambda x, w: F.conv2d(x, w[:, :2]),                      # channel mismatch
    lambda x, w: F.conv2d(x, w, groups=2),                   # groups mismatch
    lambda x, w: F.conv2d(x[:, :, :2, :2], w),               # kernel larger than input
    lambda x, w: F.conv2d(x, w, torch.zeros(5, device=x.device)),  # bias size
    lambda x, w: torch.ops.aten.convolution(x, w[0], None, [1], [0], [1], False, [0], 1),  # rank
    lambda x, w: F.conv2d(x, w.double()),                    # dtype mismatch
    lambda x, w: F.conv_transpose2d(x, w),                   # transposed channel mismatch
])
def test_errors(fn):
    x, w = make((2, 3, 5, 5), torch.float32), make((4, 3, 3, 3), torch.float32, 1)
    with pytest.raises(Exception) as cpu_err:
        fn(x, w)
    with pytest.raises(type(cpu_err.value)) as dev_err:
        fn(x.to(DEV), w.to(DEV))
    first = str(cpu_err.value).splitlines()[0]
    if "type (" not in first:  # the CPU names its tensor types ("torch.FloatTensor")
        assert first in str(dev_err.value)


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 8, 3, stride=2, groups=2)
        self.pool = torch.nn.MaxPool2d(2)
        self.fc = torch.nn.Linear(8 * 3 * 3, 5)

    def forward(self, x):
        x = self.pool(torch.relu(self.c1(x)))
        x = torch.relu(self.c2(x))
        return self.fc(x.flatten(1))


def test_small_cnn_trains_like_cpu(require_ops):
    require_ops("aten::max_pool2d_with_indices", "aten::max_pool2d_with_indices_backward")
    torch.manual_seed(0)
    cpu = SmallCNN()
    dev = SmallCNN()
    dev.load_state_dict(cpu.state_dict())
    dev.to(DEV)
    opt_c = torch.optim.SGD(cpu.parameters(), lr=0.05)
    opt_d = torch.optim.SGD(dev.parameters(), lr=0.05)
    x = make((4, 3, 14, 14), torch.float32, 3)
    y = torch.tensor([0, 1, 2, 4])
    for _ in range(3):
        losses = []
        for model, opt, xx, yy in ((cpu, opt_c, x, y), (dev, opt_d, x.to(DEV), y.to(DEV))):
            opt.zero_grad()
            loss = F.cross_entropy(model(xx), yy)
            loss.backward()
            opt.step()
            losses.append(loss.detach().cpu())
        torch.testing.assert_close(losses[1], losses[0], rtol=1e-4, atol=1e-5)
    for (n, pc), pd in zip(cpu.named_parameters(), dev.parameters()):
        torch.testing.assert_close(pd.detach().cpu(), pc.detach(), rtol=1e-4, atol=1e-5, msg=n)
