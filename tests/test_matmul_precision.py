"""float32 matmul precision: every float32 dot_general and convolution the
lowerings emit carries the precision_config PyTorch's setting asks for
(HIGHEST / HIGH / DEFAULT for "highest" / "high" / "medium"), half-precision
ones carry none, and the value is part of the program key.

The programs are read from TORCH_TPU_DUMP_HLO's output in a fresh
interpreter: each case writes a marker to stderr first, so the products
printed after it are that case's. XLA's CPU plugin ignores the attribute,
so every result is also compared with the CPU's."""
import re

import pytest
import torch
import torch_tpu

PRECISION = re.compile(r"precision_config = \[#stablehlo<precision (\w+)>, #stablehlo<precision (\w+)>\]")
PRODUCT = re.compile(r'"stablehlo\.(dot_general|convolution)"\(.* : \(tensor<(?:\d+x)*(\w+)>, ')

PRELUDE = """
import os, torch, torch.nn.functional as F, torch_tpu
torch_tpu.set_eager_mode("{mode}")
g = torch.Generator().manual_seed(0)
a, b = torch.randn(8, 16, generator=g), torch.randn(16, 4, generator=g)
x, w = torch.randn(2, 3, 6, 6, generator=g), torch.randn(5, 3, 3, 3, generator=g)

def case(name):
    os.write(2, ("@@case " + name + "\\n").encode())

def check(cpu_fn, *args, tol=1e-5):
    # the reference under "highest", whatever the case set
    with torch.backends.mkldnn.flags(enabled=False):
        want = cpu_fn(*args)
    got = cpu_fn(*[t.to("tpu") for t in args]).cpu()
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)
"""


def products_by_case(stderr: str) -> dict:
    """{case: [(op, element type, precision or None)]} from the dump."""
    cases, current = {}, None
    for line in stderr.splitlines():
        if line.startswith("@@case "):
            current = cases.setdefault(line[7:].strip(), [])
            continue
        m = PRODUCT.search(line)
        if m and current is not None:
            p = PRECISION.search(line)
            if p:
                assert p.group(1) == p.group(2), line
            current.append((m.group(1), m.group(2), p.group(1) if p else None))
    return cases


def run_cases(run_python, body: str, mode: str = "strict") -> dict:
    r = run_python(PRELUDE.format(mode=mode) + body + "\nprint('ok')\n",
                   TORCH_TPU_DUMP_HLO="1", TORCH_TPU_CACHE_DIR=None)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-4000:]
    return products_by_case(r.stderr)


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_set_float32_matmul_precision_reaches_every_float32_product(run_python, mode):
    cases = run_cases(run_python, """
for p in ("highest", "high", "medium"):
    torch.set_float32_matmul_precision(p)
    case(p)
    check(torch.mm, a, b)
    check(F.conv2d, x, w)
    check(lambda x, w: F.conv2d(x, w, stride=2).sum(), x, w)
torch.set_float32_matmul_precision("medium")
case("bf16")
check(torch.mm, a.bfloat16(), b.bfloat16(), tol=2e-2)
check(F.conv2d, x.bfloat16(), w.bfloat16(), tol=5e-2)
""", mode)
    for p, want in (("highest", "HIGHEST"), ("high", "HIGH"), ("medium", "DEFAULT")):
        ops = cases[p]
        # Each precision compiles its own programs: equal shapes under another
        # precision do not hit the earlier program.
        assert {op for op, _, _ in ops} == {"dot_general", "convolution"}, (p, ops)
        assert all(t == "f32" and prec == want for _, t, prec in ops), (p, ops)
    half = cases["bf16"]
    assert half and all(t == "bf16" and prec is None for _, t, prec in half), half


def test_default_is_highest_and_switches_pytorch_has(run_python):
    cases = run_cases(run_python, """
case("default")
assert torch.get_float32_matmul_precision() == "highest"
check(torch.mm, a, b)
torch.backends.cuda.matmul.allow_tf32 = True
case("allow_tf32")
check(torch.mm, a, b)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cuda.matmul.fp32_precision = "tf32"
case("fp32_precision tf32")
check(torch.mm, a, b)
# set "high", then the new API says "ieee": PyTorch's own getter raises on
# this mix; the cuda matmul setting, which says full float32, wins.
torch.set_float32_matmul_precision("high")
torch.backends.cuda.matmul.fp32_precision = "ieee"
case("mixed ieee")
check(torch.mm, a, b)
# cudnn.allow_tf32 (True by default) does not lower convolutions.
torch.backends.cudnn.allow_tf32 = True
case("cudnn")
check(F.conv2d, x, w)
""")
    assert cases["default"] == [("dot_general", "f32", "HIGHEST")]
    assert cases["allow_tf32"] == [("dot_general", "f32", "HIGH")]
    assert cases["fp32_precision tf32"] == []  # the program of allow_tf32's case: same key
    assert cases["mixed ieee"] == []           # the default case's program
    assert cases["cudnn"] == [("convolution", "f32", "HIGHEST")]


def test_tpu_precision_block(run_python):
    cases = run_cases(run_python, """
case("block")
with torch.tpu.precision("medium") as p:
    assert torch.tpu.get_precision() == "medium"
    assert torch.get_float32_matmul_precision() == "highest"  # torch's own setting is left alone
    check(torch.mm, a, b)
    with torch.tpu.precision("high"):
        check(F.conv2d, x, w)
    assert torch.tpu.get_precision() == "medium"
    # the backward runs on autograd's device thread: it sees the block too
    wg = w.to("tpu").requires_grad_()
    F.conv2d(x.to("tpu"), wg).sum().backward()
    torch.testing.assert_close(wg.grad.cpu(), torch.func.grad(lambda w_: F.conv2d(x, w_).sum())(w),
                               rtol=1e-5, atol=1e-5)
case("after")
assert torch.tpu.get_precision() == "highest"
check(torch.mm, a[:4], b)
try:
    torch.tpu.precision("fast").__enter__()
except ValueError as e:
    assert "'highest', 'high' or 'medium'" in str(e), e
else:
    raise AssertionError("no error")
assert torch.tpu.get_precision() == "highest"
""")
    assert cases["block"][:2] == [("dot_general", "f32", "DEFAULT"), ("convolution", "f32", "HIGH")]
    backward = cases["block"][2:]
    assert backward and all(p == "DEFAULT" for _, _, p in backward), backward
    assert cases["after"] == [("dot_general", "f32", "HIGHEST")]


def test_an_average_stays_exact_under_medium(run_python):
    # adaptive_avg_pool is a product with a weight matrix: a reduction, not
    # a matmul the user's precision governs.
    cases = run_cases(run_python, """
torch.set_float32_matmul_precision("medium")
case("pool")
check(lambda t: F.adaptive_avg_pool2d(t, (4, 5)), x)
""")
    assert cases["pool"] and all(p == "HIGHEST" for _, _, p in cases["pool"]), cases["pool"]


def test_compiled_programs_follow_the_precision(run_python):
    cases = run_cases(run_python, """
from torch_tpu.compile.dynamo import compile_stats
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(), torch.nn.Linear(64, 2))
inp = torch.randn(2, 3, 6, 6)
with torch.backends.mkldnn.flags(enabled=False):
    want = model(inp)
m = torch.compile(model.to("tpu"), backend="tpu")
for p in ("highest", "medium", "high"):
    torch.set_float32_matmul_precision(p)
    case("compiled " + p)
    n = compile_stats()["captures"]
    torch.testing.assert_close(m(inp.to("tpu")).cpu(), want, rtol=1e-5, atol=1e-5)
    assert compile_stats()["captures"] == n + 1, p
case("again high")
n = compile_stats()["captures"]
m(inp.to("tpu")).cpu()
assert compile_stats()["captures"] == n
""")
    for p, want in (("highest", "HIGHEST"), ("medium", "DEFAULT"), ("high", "HIGH")):
        ops = cases["compiled " + p]
        assert {op for op, _, _ in ops} == {"dot_general", "convolution"}, (p, ops)
        assert all(prec == want for _, _, prec in ops), (p, ops)
    assert cases["again high"] == []


def test_precision_in_process_matches_cpu(tpu):
    # In this interpreter (programs possibly cached): each setting's result
    # matches the CPU's full float32 one on XLA's CPU plugin.
    g = torch.Generator().manual_seed(1)
    a, b = torch.randn(32, 64, generator=g), torch.randn(64, 16, generator=g)
    want = a @ b
    saved = torch.get_float32_matmul_precision()
    try:
        for p in ("highest", "high", "medium"):
            torch.set_float32_matmul_precision(p)
            assert torch_tpu._C._matmul_precision() == p
            torch.testing.assert_close((a.to(tpu) @ b.to(tpu)).cpu(), want)
    finally:
        torch.set_float32_matmul_precision(saved)
