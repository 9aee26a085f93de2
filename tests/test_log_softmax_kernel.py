"""The log_softmax platform kernel (csrc/kernels/log_softmax.cpp; where it runs:
csrc/lowering/log_softmax_kernel.cpp): log_softmax over the last dim of f32 data with rows
of >= 1024 classes and >= 2^20 elements, and its backward, one pass over the data each.
Forward and backward equal PyTorch's CPU kernels within the tolerance table, as close to the
float64 result as the CPU's own, at the kernel's shapes and at edge values (-inf entries, a
row of all -inf, NaN, +inf, large magnitudes: NaN and inf where the CPU has them); the
programs call the kernel there and not below its bounds or for other dtypes, and
TORCH_TPU_KERNELS=composite gives the composite the same values."""
import pytest
import torch
import torch.nn.functional as F

import torch_tpu

SHAPES = [(1024, 4096), (2, 512, 1024), (300, 5000)]


def make(shape, seed, scale=3.0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * scale


def with_edges(x):
    """Rows of -inf entries, all -inf, a NaN, a +inf, and magnitudes of 1e4 and 1e30."""
    x = x.clone().reshape(-1, x.shape[-1])
    x[0, :7] = float("-inf")
    x[1] = float("-inf")
    x[2, 5] = float("nan")
    x[3, 9] = float("inf")
    x[4] *= 1e4
    x[5] += 1e30
    x[6, 1:] = float("-inf")
    return x


def check_against_cpu(got, want, ref, op, terms=None):
    """`got` has the CPU's NaNs and infinities where the CPU has them; its finite values are
    within the tolerance table of the CPU's and no further from float64 than twice the CPU's
    own error plus a few roundings of the row's largest term (`terms`: per row; the result's
    magnitude by default), row by row, as errors scale with a row's magnitude."""
    assert torch.equal(got.isnan(), want.isnan())
    assert torch.equal(got.isinf(), want.isinf()) and torch.equal(got[got.isinf()], want[want.isinf()])
    fin = want.isfinite()
    rtol, atol = torch_tpu.tolerance(torch.float32, op)
    torch.testing.assert_close(got[fin], want[fin], rtol=rtol, atol=atol)
    err = (got.double() - ref).abs().where(fin, 0).amax(-1)
    cpu_err = (want.double() - ref).abs().where(fin, 0).amax(-1)
    scale = ref.abs().where(fin, 0).amax(-1) if terms is None else terms
    assert (err <= 2 * cpu_err + 4 * torch.finfo(torch.float32).eps * scale).all()


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("edges", [False, True])
def test_forward_equals_the_cpu(shape, edges):
    x = make(shape, 0)
    if edges:
        x = with_edges(x)
    got = torch.log_softmax(x.to("tpu"), -1).cpu()
    check_against_cpu(got, torch.log_softmax(x, -1), torch.log_softmax(x.double(), -1), "aten::_log_softmax")


@pytest.mark.parametrize("shape", SHAPES)
def test_backward_equals_the_cpu(shape):
    x, g = make(shape, 1), make(shape, 2, 1.0)

    def grad(device):
        t = x.to(device).requires_grad_()
        torch.log_softmax(t, -1).backward(g.to(device))
        return t.grad.cpu()

    t64 = x.double().requires_grad_()
    torch.log_softmax(t64, -1).backward(g.double())
    # grad - softmax * sum(grad): terms of the size of sum(grad).
    terms = g.double().abs().amax(-1) + g.double().sum(-1).abs()
    check_against_cpu(grad("tpu"), grad("cpu"), t64.grad, "aten::_log_softmax_backward_data", terms)


def test_backward_at_edge_values_equals_the_cpu():
    # The output's edges: -inf (a class of probability 0), NaN rows, +inf.
    y = torch.log_softmax(with_edges(make((1024, 4096), 3)), -1)
    y[7, 3] = float("inf")
    g = make((1024, 4096), 4, 1.0)
    op = torch.ops.aten._log_softmax_backward_data
    got = op(g.to("tpu"), y.to("tpu"), 1, torch.float32).cpu()
    terms = g.double().abs().amax(-1) + g.double().sum(-1).abs()
    check_against_cpu(got, op(g, y, 1, torch.float32), op(g.double(), y.double(), 1, torch.float64),
                      "aten::_log_softmax_backward_data", terms)


def test_cross_entropy_under_compile_equals_the_cpu():
    logits, target = make((1024, 4096), 5), torch.randint(0, 4096, (1024,), generator=torch.Generator().manual_seed(6))

    def run(device, fn):
        t = logits.to(device).requires_grad_()
        loss = fn(t, target.to(device))
        loss.backward()
        return loss.detach().cpu(), t.grad.cpu()

    got = run("tpu", torch.compile(F.cross_entropy, backend="tpu"))
    want = run("cpu", F.cross_entropy)
    torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got[1], want[1], rtol=1.3e-6, atol=1e-8)


def count_calls(run_python, body, **env):
    """How many log_softmax kernel calls (forward, backward) the programs of `body` hold."""
    r = run_python("import torch, torch.nn.functional as F, torch_tpu\n" + body + "\nprint('ok')\n",
                   TORCH_TPU_DUMP_HLO="1", TORCH_TPU_CACHE_DIR=None, **env)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-4000:]
    return (r.stderr.count('call_target_name = "torch_tpu_log_softmax"'),
            r.stderr.count('call_target_name = "torch_tpu_log_softmax_backward"'))


BOTH = """
x = torch.randn({shape}, dtype=torch.{dtype})
t = x.to("tpu").requires_grad_()
y = torch.log_softmax(t, {dim})
y.backward(torch.ones_like(y))
torch.testing.assert_close(y.detach().cpu(), torch.log_softmax(x, {dim}), rtol=1e-2, atol=1e-2)
"""


def test_the_programs_call_the_kernel_past_its_bounds(run_python):
    assert count_calls(run_python, BOTH.format(shape="1024, 4096", dtype="float32", dim=-1)) == (1, 1)
    assert count_calls(run_python, BOTH.format(shape="2, 512, 1024", dtype="float32", dim=2)) == (1, 1)
    # Short rows, too little data, another dim than the last, half precision: the composite.
    for shape, dtype, dim in [("4096, 512", "float32", -1), ("255, 4096", "float32", -1),
                              ("4096, 1024", "float32", 0), ("1024, 4096", "bfloat16", -1)]:
        assert count_calls(run_python, BOTH.format(shape=shape, dtype=dtype, dim=dim)) == (0, 0), (shape, dtype, dim)


def test_composite_runs_under_torch_tpu_kernels_composite(run_python):
    body = BOTH.format(shape="1024, 4096", dtype="float32", dim=-1) + """
torch.testing.assert_close(y.detach().cpu(), torch.log_softmax(x, -1), rtol=5.2e-6, atol=4e-5)
torch.testing.assert_close(t.grad.cpu(), torch.log_softmax(x, -1).exp().mul(-4096).add(1), rtol=1e-4, atol=1e-4)
"""
    assert count_calls(run_python, body, TORCH_TPU_KERNELS="composite") == (0, 0)
    assert count_calls(run_python, body) == (1, 1)
