"""Sums through the GEMM platform kernel (csrc/lowering/gemm_kernel.cpp's sum_by_kernel:
ones[1, rows] @ x[rows, columns] over leading dims, x[rows, n] @ ones[n, 1] over trailing
ones): f32 sums over the leading dims (a bias's or a layer norm's parameter gradient) and
over long trailing ones (a softmax over a vocabulary) equal the CPU's, as aten::sum, inside
the layer norm backward and in cross-entropy's log_softmax, in strict, defer_and_fuse and
torch.compile(backend="tpu"); the kernel is emitted only past the table's bounds, and
TORCH_TPU_KERNELS=composite keeps XLA's reduce."""
import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from test_gemm_kernel import count_products


def make(shape, seed):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def largest(t):
    return t.abs().double().max().item()


@pytest.mark.parametrize("shape,dims", [((8, 128, 768), (0, 1)), ((1024, 256), (0,)), ((300, 65), (0,)),
                                        ((3, 100, 2, 70), (0, 1)), ((2, 128, 4, 64), (0, 1, 2)),
                                        ((256, 4096), (1,)), ((70, 1100), (-1,)), ((4, 20, 32, 40), (2, 3))])
def test_sum_over_leading_or_trailing_dims_equals_the_cpu(shape, dims):
    x = make(shape, 0)
    got = x.to("tpu").sum(dims).cpu()
    want = x.double().sum(dims)
    # f32 sums of `rows` terms: within a few roundings per term of the float64 sum, as the CPU's
    # own is (both ~5e-5 from it over 1024 rows: the tolerance table's 1e-5 is for one rounding).
    rows = x.numel() // got.numel()
    bound = 4 * torch.finfo(torch.float32).eps * largest(x) * rows
    cpu_err = largest(x.sum(dims).double() - want)
    assert got.shape == want.shape and largest(got.double() - want) <= max(2 * cpu_err, bound)


def block(x, w, b, ln_w, ln_b, target):
    h = F.layer_norm(x, (x.shape[-1],), ln_w, ln_b)
    logits = F.linear(F.gelu(F.linear(h, w, b)), w.T.repeat(8, 1)).flatten(0, 1)  # [1024, 2048]
    return F.cross_entropy(logits, target.flatten())


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse", "compile"])
def test_linear_layer_norm_and_cross_entropy_gradients(mode):
    ins = [make((8, 128, 256), 0), make((512, 256), 1).div(16), make((512,), 2), make((256,), 3), make((256,), 4)]
    target = torch.randint(0, 2048, (8, 128), generator=torch.Generator().manual_seed(5))

    def run(device, fn):
        ts = [t.to(device).detach().requires_grad_() for t in ins]
        fn(*ts, target.to(device)).backward()
        return [t.grad.cpu() for t in ts]

    want = run("cpu", block)
    fn = torch.compile(block, backend="tpu") if mode == "compile" else block
    with torch_tpu.eager_mode("strict" if mode == "compile" else mode):
        got = run("tpu", fn)
    for name, g, e in zip(["x", "weight", "bias", "ln_weight", "ln_bias"], got, want):
        torch.testing.assert_close(g, e, rtol=1e-4, atol=1e-5, msg=lambda m: f"{name}: {m}")


def count_sums(run_python, body, **env):
    """How many kernel calls and XLA reduces the programs of `body` hold."""
    return count_products(run_python, body, xla_op='"stablehlo.reduce"', **env)


SUM = """
x = torch.randn({shape})
torch.testing.assert_close(x.to("tpu").sum({dims}).cpu(), x.sum({dims}), rtol=1e-5, atol=1e-4)
"""


def test_the_kernel_runs_for_leading_or_long_trailing_dims_past_the_bounds(run_python):
    assert count_sums(run_python, SUM.format(shape="8, 128, 768", dims="(0, 1)")) == (1, 0)
    assert count_sums(run_python, SUM.format(shape="64, 4096", dims="(1,)")) == (1, 0)
    # Short trailing dims, middle dims, too few rows, too few columns, integers: XLA's reduce.
    for shape, dims in [("8, 128, 768", "(2,)"), ("8, 128, 768", "(1,)"), ("64, 768", "(0,)"), ("1024, 8", "(0,)"),
                        ("8, 4096", "(1,)")]:
        kernels, reduces = count_sums(run_python, SUM.format(shape=shape, dims=dims))
        assert kernels == 0 and reduces > 0, (shape, dims)
    ints = "x = torch.randint(0, 9, (1024, 256)); assert (x.to('tpu').sum(0).cpu() == x.sum(0)).all()"
    assert count_sums(run_python, ints)[0] == 0


def test_composite_keeps_xla_reduce(run_python):
    kernels, reduces = count_sums(run_python, SUM.format(shape="8, 128, 768", dims="(0, 1)"),
                                  TORCH_TPU_KERNELS="composite")
    assert kernels == 0 and reduces > 0
