"""Sums over leading dims through the block_sum platform kernel (csrc/kernels/block_sum.cpp,
csrc/lowering/sum_kernel.cpp): f32 sums over >= 256 leading rows (a bias's or a layer norm's
parameter gradient) as levels of sums of 16 rows in order, the last <= 16 in XLA's reduce:
PyTorch's CPU cascade, so the result is the CPU's bit for bit in its vectorized columns. Their
accuracy against float64 is no worse than XLA's reduce alone (TORCH_TPU_KERNELS=composite) and
within the tolerance table's bound taken of the summed magnitudes, at odd sizes too; debug mode's
check against the CPU passes; they equal the CPU's as aten::sum and inside the layer norm
backward, in every eager mode and under torch.compile(backend="tpu"); the kernel is emitted only
past the table's bounds."""
import json

import pytest
import torch
import torch.nn.functional as F

import torch_tpu

# (rows, columns, along): sums over `rows` terms of [rows, columns] (leading; the kernel's) or of
# [columns, rows] (trailing: XLA's reduce either way).
ACCURACY_CASES = [(257, 129, "leading"), (1025, 129, "leading"), (4096, 129, "leading"), (4097, 70, "leading"),
                  (1024, 129, "trailing")]

# Per case, over seeds of `randn * 2` data on tpu: the largest error against float64, and the
# largest error over the tolerance table's bound taken of the summed magnitudes (a sum's rounding
# error scales with them, not with the sum).
ERRORS = """
import json, torch, torch_tpu
rtol, atol = torch_tpu.tolerance(torch.float32, "aten::sum")
out = []
for rows, columns, along in {cases}:
    worst = over_bound = 0.0
    for seed in range(10):
        x = torch.randn(rows, columns, generator=torch.Generator().manual_seed(seed)) * 2
        x, dim = (x, 0) if along == "leading" else (x.T.contiguous(), 1)
        error = (x.to("tpu").sum(dim).cpu().double() - x.double().sum(dim)).abs()
        worst = max(worst, error.max().item())
        over_bound = max(over_bound, (error / (atol + rtol * x.double().abs().sum(dim))).max().item())
    out.append([worst, over_bound])
print(json.dumps(out))
"""


def errors(run_python, **env):
    r = run_python(ERRORS.format(cases=ACCURACY_CASES), TORCH_TPU_CACHE_DIR=None, **env)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_accuracy_against_float64_no_worse_than_xla_reduce(run_python):
    kernel, composite = errors(run_python), errors(run_python, TORCH_TPU_KERNELS="composite")
    for case, (k, k_over_bound), (c, _) in zip(ACCURACY_CASES, kernel, composite):
        assert k <= c and k_over_bound <= 1, (case, k, c, k_over_bound)


def make(shape, seed):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def largest(t):
    return t.abs().double().max().item()


@pytest.mark.parametrize("shape,dims", [((8, 128, 768), (0, 1)), ((1024, 256), (0,)), ((600, 65), (0,)),
                                        ((3, 200, 2, 70), (0, 1)), ((2, 128, 4, 64), (0, 1, 2)),
                                        ((256, 4096), (1,)), ((70, 1100), (-1,)), ((4, 20, 32, 40), (2, 3))])
def test_sum_over_leading_or_trailing_dims_equals_the_cpu(shape, dims):
    x = make(shape, 0)
    got = x.to("tpu").sum(dims).cpu()
    want = x.double().sum(dims)
    rows = x.numel() // got.numel()
    rtol, atol = torch_tpu.tolerance(torch.float32, "aten::sum")
    bound = atol + rtol * x.abs().double().sum(dims)
    assert got.shape == want.shape and bool(((got.double() - want).abs() <= bound).all()), rows


@pytest.mark.parametrize("shape,dims", [((257, 129), (0,)), ((8, 128, 256), (0, 1)), ((4096, 64), (0,))])
def test_the_cpus_sum_bit_for_bit(shape, dims):
    """In the columns PyTorch's CPU sum vectorizes (all but 129's last): its cascade's order."""
    x = make(shape, 0) * 2
    got, want = x.to("tpu").sum(dims).cpu(), x.sum(dims)
    assert torch.equal(got[..., :128], want[..., :128])


@pytest.mark.parametrize("rows", [257, 1025, 4096])
def test_debug_mode(rows):
    """Debug mode compares each op with the CPU's under the tolerance table (the pinned-memory
    test's sum over 257 rows failed it with bdc685a's single product)."""
    for seed in range(3):
        src = make((rows, 129), seed)
        with torch_tpu.eager_mode("debug"):
            e = (src.to("tpu") * 2).sum(0)
        torch.testing.assert_close(e.cpu(), (src * 2).sum(0))


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
    """How many kernel calls and XLA reduces the programs of `body` hold, printed by a fresh
    interpreter."""
    r = run_python("import torch, torch_tpu\n" + body + "\nprint('ok')\n", TORCH_TPU_DUMP_HLO="1",
                   TORCH_TPU_CACHE_DIR=None, **env)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-4000:]
    return r.stderr.count('call_target_name = "torch_tpu_block_sum"'), r.stderr.count('"stablehlo.reduce"')


SUM = """
x = torch.randn({shape})
torch.testing.assert_close(x.to("tpu").sum({dims}).cpu(), x.sum({dims}), rtol=1e-5, atol=1e-4)
"""


def test_the_kernel_runs_for_leading_or_long_trailing_dims_past_the_bounds(run_python):
    # Levels of 16: 1024 rows -> 64 -> 4 block sums, then XLA's reduce of 4; 257 -> 17 -> 2.
    for shape, dims in [("8, 128, 768", "(0, 1)"), ("257, 129", "(0,)")]:
        assert count_sums(run_python, SUM.format(shape=shape, dims=dims)) == (2, 1), (shape, dims)
    # Trailing dims, middle dims, too few rows, too few columns, integers: XLA's reduce alone.
    for shape, dims in [("8, 128, 768", "(2,)"), ("64, 4096", "(1,)"), ("8, 128, 768", "(1,)"), ("200, 768", "(0,)"),
                        ("1024, 8", "(0,)")]:
        kernels, reduces = count_sums(run_python, SUM.format(shape=shape, dims=dims))
        assert kernels == 0 and reduces > 0, (shape, dims)
    ints = "x = torch.randint(0, 9, (1024, 256)); assert (x.to('tpu').sum(0).cpu() == x.sum(0)).all()"
    assert count_sums(run_python, ints)[0] == 0


def test_composite_keeps_xla_reduce(run_python):
    kernels, reduces = count_sums(run_python, SUM.format(shape="8, 128, 768", dims="(0, 1)"),
                                  TORCH_TPU_KERNELS="composite")
    assert kernels == 0 and reduces > 0
