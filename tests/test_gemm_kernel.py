"""The GEMM platform kernel (csrc/kernels/gemm.cpp: MKL inside programs) against XLA's dot
and the CPU: its custom call alone at many shapes (odd sizes, 1, empty dimensions,
transposed operands, batches, f32 and bf16), and the matrix-product lowerings that emit
it where csrc/lowering/gemm_kernel.cpp's table says it wins (nn.Linear forward and
backward, bmm, matmul) in strict, defer_and_fuse and torch.compile(backend="tpu");
TORCH_TPU_KERNELS=composite emits XLA's dot instead. The table applies only on a CPU
where MKL runs vectors as wide as XLA's (no AVX-512, or Intel's); TORCH_TPU_KERNELS=all
applies it on any CPU, so that the kernel's lowering is tested everywhere."""
import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from torch_tpu.kernels import platform as platform_kernels
from torch_tpu.kernels.ffi import ffi_op

_MLIR = {torch.float32: "f32", torch.bfloat16: "bf16"}
_ops = {}


def make(shape, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(dtype)


def kernel_op(ta, tb):
    """The kernel's custom call as an operator, whatever the lowering's table says."""
    key = ("kernel", ta, tb)
    if key not in _ops:
        def result(a, b):
            (_, sa), (_, sb) = a, b
            r = len(sa) - 2
            return torch.float32, tuple(sa[:r]) + (sa[r + 1] if ta else sa[r], sb[r] if tb else sb[r + 1])

        _ops[key] = ffi_op(f"test_gemm_kernel::gemm_{int(ta)}{int(tb)}", platform_kernels.target("gemm"), result,
                           attributes={"transpose_lhs": ta, "transpose_rhs": tb}, nargs=2)
    return _ops[key]


def _type(shape, dtype):
    return "tensor<" + "".join(f"{d}x" for d in shape) + _MLIR[dtype] + ">"


def xla_dot(a, b, ta, tb):
    """XLA's dot_general on the same operands (f32 accumulation), as a StableHLO module."""
    batched = a.dim() == 3
    r = 1 if batched else 0
    out = tuple(a.shape[:r]) + (a.shape[r + 1] if ta else a.shape[r], b.shape[r] if tb else b.shape[r + 1])
    key = ("xla", tuple(a.shape), tuple(b.shape), a.dtype, ta, tb)
    if key not in _ops:
        ta_, tb_, to = _type(a.shape, a.dtype), _type(b.shape, b.dtype), _type(out, torch.float32)
        dims = ("batching_dims = [0] x [0], " if batched else "") + \
            f"contracting_dims = [{r if ta else r + 1}] x [{r + 1 if tb else r}]"
        text = (f"func.func @main(%a: {ta_}, %b: {tb_}) -> {to} {{\n"
                f"  %0 = stablehlo.dot_general %a, %b, {dims} : ({ta_}, {tb_}) -> {to}\n"
                f"  return %0 : {to}\n}}\n")
        _ops[key] = torch_tpu.stablehlo_op(f"test_gemm_kernel::dot_{len(_ops)}", text)
    return _ops[key](a, b)


def test_the_kernel_runs_on_the_cpu_plugin():
    rows = {row["name"]: row for row in platform_kernels.table()}
    assert rows["gemm"]["platforms"] == ["Host"] and rows["gemm"]["runs"], rows["gemm"]


SHAPES = [(1, 1, 1), (7, 5, 3), (33, 17, 65), (1, 300, 64), (300, 1, 64), (0, 4, 5), (3, 4, 0), (256, 320, 192)]
CASES = ([(shape, batch, torch.float32) for shape in SHAPES for batch in (None, 3)]
         + [(shape, None, torch.bfloat16) for shape in [(7, 5, 3), (1, 300, 64), (256, 320, 192)]])


def largest(t):
    return t.abs().double().max().item() if t.numel() else 0.0


@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT"])
@pytest.mark.parametrize("shape,batch,dtype", CASES)
def test_kernel_equals_xla_dot_and_the_cpu(shape, batch, dtype, layout):
    m, n, k = shape
    ta, tb = layout[0] == "T", layout[1] == "T"
    pre = (batch,) if batch else ()
    a = make(pre + ((k, m) if ta else (m, k)), dtype, 0)
    b = make(pre + ((n, k) if tb else (k, n)), dtype, 1)
    # The reference: float64 on the CPU, from the same (rounded) operands.
    want = (a.double().transpose(-1, -2) if ta else a.double()) @ (b.double().transpose(-1, -2) if tb else b.double())
    got = kernel_op(ta, tb)(a.to("tpu"), b.to("tpu")).cpu()
    dot = xla_dot(a.to("tpu"), b.to("tpu"), ta, tb).cpu()
    assert got.dtype == dot.dtype == torch.float32 and got.shape == dot.shape == want.shape
    # Both accumulate in f32: the kernel is as close to the reference as XLA's dot, within
    # a few roundings of f32 per term.
    bound = 4 * torch.finfo(torch.float32).eps * largest(a) * largest(b) * max(k, 1)
    err_kernel, err_dot = largest(got.double() - want), largest(dot.double() - want)
    assert err_kernel <= max(2 * err_dot, bound), (err_kernel, err_dot, bound)
    if k == 0:
        assert not got.any()


def test_bad_operands_fail_the_op_naming_the_kernel():
    a, b = torch.randn(4, 5).to("tpu"), torch.randn(4, 3).to("tpu")  # K 5 against 4
    with pytest.raises(RuntimeError, match="gemm: the operands' and the result's shapes do not agree"):
        kernel_op(False, False)(a, b).cpu()
    with pytest.raises(RuntimeError, match="gemm: the operands must be both f32 or both bf16"):
        kernel_op(False, False)(a.half(), torch.randn(5, 3).half().to("tpu")).cpu()


def count_products(run_python, body, **env):
    """Runs `body` in a fresh interpreter with the programs printed: how many
    kernel calls and XLA dots they hold."""
    r = run_python("import torch, torch.nn.functional as F, torch_tpu\n" + body + "\nprint('ok')\n",
                   TORCH_TPU_DUMP_HLO="1", TORCH_TPU_CACHE_DIR=None, **env)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-4000:]
    return r.stderr.count('call_target_name = "torch_tpu_gemm"'), r.stderr.count('"stablehlo.dot_general"')


LINEAR = """
x, w, b = (t.to(torch.{dtype}) for t in (torch.randn(128, 256), torch.randn(512, 256), torch.randn(512)))
got = F.linear(x.to("tpu"), w.to("tpu"), b.to("tpu")).cpu()
torch.testing.assert_close(got, F.linear(x, w, b), rtol={tol}, atol={tol})
"""


def mkl_as_wide_as_xla():
    """Read from /proc/cpuinfo: the CPU has no AVX-512, or it is Intel's (MKL takes its
    AVX-512 code only there, while XLA compiles for the host's widest vectors)."""
    with open("/proc/cpuinfo") as f:
        info = f.read()
    flags = next(line for line in info.splitlines() if line.startswith("flags")).split()
    return "avx512f" not in flags or "GenuineIntel" in info


def test_the_lowering_emits_the_kernel_where_it_wins_and_xla_dot_elsewhere(run_python):
    assert count_products(run_python, LINEAR.format(dtype="float32", tol=1e-4), TORCH_TPU_KERNELS="all") == (1, 0)
    small = "a = torch.randn(4, 8).to('tpu'); print((a @ a.T).cpu())"
    assert count_products(run_python, small, TORCH_TPU_KERNELS="all") == (0, 1)
    # Half-precision products stay with XLA (gemm_kernel.cpp's table has f32 rows only).
    for half in ("float16", "bfloat16"):
        assert count_products(run_python, LINEAR.format(dtype=half, tol=0.1), TORCH_TPU_KERNELS="all") == (0, 1), half


def test_the_table_applies_where_mkl_is_as_wide_as_xla(run_python):
    want = (1, 0) if mkl_as_wide_as_xla() else (0, 1)
    assert count_products(run_python, LINEAR.format(dtype="float32", tol=1e-4)) == want


def test_bad_kernels_value_names_the_choices(run_python):
    r = run_python("import torch, torch_tpu\ntorch.ones(2, 2, device='tpu') @ torch.ones(2, 2, device='tpu')",
                   TORCH_TPU_KERNELS="mkl")
    assert r.returncode != 0 and "TORCH_TPU_KERNELS must be 'platform' (the default), 'composite' or 'all'" in r.stderr


def test_composite_forces_xla_dot(run_python):
    assert count_products(run_python, LINEAR.format(dtype="float32", tol=1e-4), TORCH_TPU_KERNELS="composite") == (0, 1)


def linear_step(x, w, b):
    y = F.linear(x, w, b)
    return F.gelu(y).sum(), y


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse", "compile"])
def test_linear_forward_and_backward(mode, dtype):
    x, w, b = make((96, 320), dtype, 0), make((384, 320), dtype, 1), make((384,), dtype, 2)
    tol = torch_tpu.tolerance(dtype, "aten::mm")
    if dtype == torch.bfloat16:
        tol = (2e-2, 2e-1)  # rounding of the bf16 result and of its gradients, sums of 96-384 terms

    def run(device, fn):
        ins = [t.to(device).detach().requires_grad_() for t in (x, w, b)]
        loss, y = fn(*ins)
        loss.backward()
        return [y.detach().cpu()] + [t.grad.cpu() for t in ins]

    want = run("cpu", linear_step)
    if mode == "compile":
        got = run("tpu", torch.compile(linear_step, backend="tpu"))
    else:
        with torch_tpu.eager_mode(mode):
            got = run("tpu", linear_step)
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e, rtol=tol[0], atol=tol[1])


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse", "compile"])
def test_attention_products(mode):
    q, k, v = (make((2, 4, 128, 64), torch.float32, s) for s in range(3))

    def attend(q, k, v):
        return (q @ k.transpose(-2, -1) / 8).softmax(-1) @ v

    want = attend(q, k, v)
    fn = torch.compile(attend, backend="tpu") if mode == "compile" else attend
    with torch_tpu.eager_mode("strict" if mode == "compile" else mode):
        got = fn(q.to("tpu"), k.to("tpu"), v.to("tpu")).cpu()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_the_kernel_lowering_in_every_mode_on_any_cpu(run_python):
    """The tests above, through the kernel on a CPU where the table gives way to XLA's dot."""
    if mkl_as_wide_as_xla():
        pytest.skip("on this CPU the tests above already run the kernel")
    code = (f"import sys, pytest\nsys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', {__file__!r}, "
            "'-k', 'test_linear_forward_and_backward or test_attention_products']))")
    r = run_python(code, timeout=900, TORCH_TPU_KERNELS="all")
    assert r.returncode == 0 and " passed" in r.stdout, r.stdout[-4000:]
