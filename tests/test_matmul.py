"""Matrix products on tpu against the CPU: mm, bmm, addmm, baddbmm, addbmm, dot, mv, addmv,
torch.matmul over 1-D/2-D/3-D/broadcast shapes, nn.Linear, gradients and errors."""
import pytest
import torch
import torch_tpu

DEV = "tpu"
FLOATS = [torch.float32, torch.bfloat16, torch.float16]


def make(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    return torch.randint(-4, 5, shape, generator=g).to(dtype)


def to_dev(x):
    return x.to(DEV) if isinstance(x, torch.Tensor) else x


def check(fn, *inputs, grad=False, **kw):
    """fn on CPU inputs and on their tpu copies gives the same results, and
    with grad=True the same input gradients for a random upstream gradient."""
    cpu = [x.detach().clone().requires_grad_(grad) for x in inputs]
    dev = [to_dev(x).detach().requires_grad_(grad) for x in inputs]
    out_c, out_d = fn(*cpu), fn(*dev)
    assert out_d.device.type == DEV
    torch.testing.assert_close(out_d.cpu(), out_c, **kw)
    if grad:
        g = make(out_c.shape, out_c.dtype, seed=9)
        out_c.backward(g)
        out_d.backward(to_dev(g))
        for c, d in zip(cpu, dev):
            torch.testing.assert_close(d.grad.cpu(), c.grad, **kw)


def raises_like(fn, *inputs):
    with pytest.raises(Exception) as cpu_err:
        fn(*inputs)
    with pytest.raises(type(cpu_err.value)) as dev_err:
        fn(*[to_dev(x) for x in inputs])
    assert str(cpu_err.value).splitlines()[0] in str(dev_err.value)


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.int32])
@pytest.mark.parametrize("n,k,m", [(2, 3, 4), (1, 1, 1), (5, 0, 3), (0, 4, 2), (17, 33, 9)])
def test_mm(dtype, n, k, m):
    check(torch.mm, make((n, k), dtype), make((k, m), dtype, 1))


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
@pytest.mark.parametrize("b,n,k,m", [(3, 2, 3, 4), (1, 1, 1, 1), (0, 2, 3, 4), (2, 5, 0, 3)])
def test_bmm(dtype, b, n, k, m):
    check(torch.bmm, make((b, n, k), dtype), make((b, k, m), dtype, 1))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("b", [1, 2])
@pytest.mark.parametrize("transposed", ["lhs", "rhs", "both"])
def test_bmm_of_transposed_views(dtype, b, transposed):
    # One batch, a transposed bfloat16 lhs: the CPU plugin's dot thunk once
    # refused it ("BF16 x BF16 = F32"); nn.Bilinear's backward makes one.
    def f(x, y):
        return torch.bmm(x.transpose(1, 2) if transposed != "rhs" else x,
                         y.transpose(1, 2) if transposed != "lhs" else y)

    x = make((b, 8, 3) if transposed != "rhs" else (b, 3, 8), dtype)
    y = make((b, 4, 8) if transposed != "lhs" else (b, 8, 4), dtype, 1)
    check(f, x, y, grad=True)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("bias_shape", [(4,), (2, 4), (1, 4), (2, 1), ()])
def test_addmm(dtype, bias_shape):
    x, y, b = make((2, 3), dtype), make((3, 4), dtype, 1), make(bias_shape, dtype, 2)
    check(torch.addmm, b, x, y)
    check(lambda b, x, y: torch.addmm(b, x, y, beta=0.5, alpha=-2), b, x, y)


def test_addmm_int():
    x, y, b = make((2, 3), torch.int64), make((3, 4), torch.int64, 1), make((4,), torch.int64, 2)
    check(lambda b, x, y: torch.addmm(b, x, y, beta=3, alpha=2), b, x, y)


def test_addmm_beta_zero_ignores_nan():
    b = torch.full((2, 4), float("nan"))
    check(lambda b, x, y: torch.addmm(b, x, y, beta=0), b, make((2, 3), torch.float32), make((3, 4), torch.float32, 1))


@pytest.mark.parametrize("dtype", FLOATS)
def test_baddbmm_addbmm(dtype):
    b, x, y = make((3, 2, 4), dtype, 2), make((3, 2, 5), dtype), make((3, 5, 4), dtype, 1)
    check(torch.baddbmm, b, x, y)
    check(lambda b, x, y: torch.baddbmm(b, x, y, beta=2, alpha=0.5), b, x, y)
    # The CPU's addbmm rounds each batch's product to half before summing the
    # batches; tpu sums in f32 and rounds once, so allow one half ulp.
    loose = dict(rtol=2e-3, atol=1e-3) if dtype == torch.float16 else {}
    check(lambda b, x, y: torch.addbmm(b[0], x, y, beta=0.25, alpha=3), b, x, y, **loose)


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
@pytest.mark.parametrize("n", [0, 1, 7])
def test_dot_mv(dtype, n):
    check(torch.dot, make((n,), dtype), make((n,), dtype, 1))
    check(torch.mv, make((3, n), dtype), make((n,), dtype, 1))


@pytest.mark.parametrize("dtype", FLOATS)
def test_addmv(dtype):
    check(lambda b, m, v: torch.addmv(b, m, v, beta=0.5, alpha=2), make((3,), dtype, 2), make((3, 4), dtype),
          make((4,), dtype, 1))


MATMUL_SHAPES = [
    ((3,), (3,)),
    ((2, 3), (3,)),
    ((3,), (3, 4)),
    ((2, 3), (3, 4)),
    ((5, 2, 3), (3, 4)),
    ((5, 2, 3), (5, 3, 4)),
    ((2, 1, 2, 3), (5, 3, 4)),
    ((3,), (5, 3, 4)),
    ((5, 2, 3), (3,)),
    ((2, 5, 2, 3), (1, 5, 3, 4)),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("a,b", MATMUL_SHAPES)
def test_matmul_forward_backward(dtype, a, b):
    check(torch.matmul, make(a, dtype), make(b, dtype, 1), grad=True)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(2, 4), (3, 2, 4), (4,)])
def test_linear(dtype, shape):
    w, b = make((3, 4), dtype, 1), make((3,), dtype, 2)
    check(torch.nn.functional.linear, make(shape, dtype), w, b, grad=True)
    check(torch.nn.functional.linear, make(shape, dtype), w, grad=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("rows,depth,cols", [(1, 64, 96), (32, 64, 256), (33, 64, 256),
                                             (200, 128, 384), (300, 128, 512), (40, 64, 8)])
def test_linear_on_both_sides_of_the_weight_first_rule(dtype, rows, depth, cols):
    # lowering/matmul.cpp emits x @ w.T with few rows as (w @ x.T).T; these
    # shapes fall on either side of its rule, in strict and in fused programs.
    x, w = make((rows, depth), dtype), make((cols, depth), dtype, 1)
    rtol, atol = torch_tpu.tolerance(dtype, "aten::mm")
    check(torch.nn.functional.linear, x, w, grad=True, rtol=rtol, atol=atol)
    with torch_tpu.eager_mode("defer_and_fuse"):
        got = torch.nn.functional.linear(x.to(DEV), w.to(DEV)).cpu()
    torch.testing.assert_close(got, torch.nn.functional.linear(x, w), rtol=rtol, atol=atol)


def test_linear_module_step():
    torch.manual_seed(0)
    cpu = torch.nn.Linear(4, 3)
    dev = torch.nn.Linear(4, 3)
    dev.load_state_dict(cpu.state_dict())
    dev.to(DEV)
    x = make((5, 4), torch.float32)
    g = make((5, 3), torch.float32, 3)
    cpu(x).backward(g)
    dev(to_dev(x)).backward(to_dev(g))
    torch.testing.assert_close(dev.weight.grad.cpu(), cpu.weight.grad)
    torch.testing.assert_close(dev.bias.grad.cpu(), cpu.bias.grad)


def test_errors():
    raises_like(torch.mm, make((2, 3), torch.float32), make((4, 5), torch.float32))
    raises_like(torch.mm, make((2, 3), torch.float32), make((3, 5), torch.float64))
    raises_like(torch.mm, make((3,), torch.float32), make((3, 5), torch.float32))
    raises_like(torch.mm, make((2, 3), torch.float32), make((3,), torch.float32))
    raises_like(torch.bmm, make((2, 3, 4), torch.float32), make((3, 4, 5), torch.float32))
    raises_like(torch.bmm, make((3, 4), torch.float32), make((2, 4, 5), torch.float32))
    raises_like(torch.dot, make((3,), torch.float32), make((4,), torch.float32))
    raises_like(torch.dot, make((3,), torch.float32), make((3,), torch.float64))
    raises_like(torch.dot, make((2, 3), torch.float32), make((2, 3), torch.float32))
    raises_like(torch.mv, make((2, 3), torch.float32), make((4,), torch.float32))
    raises_like(torch.addmm, make((3,), torch.float32), make((2, 3), torch.float32), make((3, 4), torch.float32))


def test_addbmm_adds_batches_in_order_like_the_cpu():
    g = torch.Generator().manual_seed(3)
    for shape in [(5, 5, 5, 10), (3, 4, 7, 2), (40, 3, 5, 4)]:
        n, m, k, p = shape
        b1 = torch.randn(n, m, k, generator=g)
        b2 = torch.randn(n, k, p, generator=g)
        s = torch.randn(m, p, generator=g)
        for kw in [{}, dict(beta=0.5, alpha=2.0), dict(beta=0)]:
            got = torch.addbmm(s.to("tpu"), b1.to("tpu"), b2.to("tpu"), **kw).cpu()
            torch.testing.assert_close(got, torch.addbmm(s, b1, b2, **kw), rtol=1.3e-6, atol=1e-5)
    b1h, b2h, sh = (t.half() for t in (b1, b2, s))
    got = torch.addbmm(sh.to("tpu"), b1h.to("tpu"), b2h.to("tpu")).cpu()
    torch.testing.assert_close(got, torch.addbmm(sh.float(), b1h.float(), b2h.float()).half(), rtol=2e-3, atol=1e-2)


def test_complex_mm_backward():
    # The backward multiplies by lazily conjugated views: resolved before lowering.
    g = torch.Generator().manual_seed(4)
    a = torch.randn(3, 4, dtype=torch.complex64, generator=g)
    b = torch.randn(4, 2, dtype=torch.complex64, generator=g)
    up = torch.randn(3, 2, dtype=torch.complex64, generator=g)
    ca, cb = a.clone().requires_grad_(), b.clone().requires_grad_()
    (ca @ cb).backward(up)
    ta, tb = a.to("tpu").requires_grad_(), b.to("tpu").requires_grad_()
    (ta @ tb).backward(up.to("tpu"))
    torch.testing.assert_close(ta.grad.cpu(), ca.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(tb.grad.cpu(), cb.grad, rtol=1e-5, atol=1e-5)


# torch._grouped_mm, as mixture-of-experts layers call it (transformers'
# grouped_mm experts): the ragged operand's groups end at `offs`. Each layout
# covers its ragged dimension to the end (the CPU leaves rows past the last
# offset unwritten) and has an empty group; rows are 16-byte multiples, as
# the CPU kernel requires.
GROUPED = [
    ((10, 8), (3, 8, 8), [3, 3, 10]),     # rows of a by group (the experts' forward)
    ((3, 5, 8), (8, 24), [8, 8, 24]),     # columns of b by group
    ((8, 32), (32, 8), [0, 16, 32]),      # the contraction by group (the experts' weight gradient)
    ((3, 5, 8), (3, 8, 8), None),         # a plain batch
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("a,b,offs", GROUPED)
def test_grouped_mm(dtype, a, b, offs):
    a, b = make(a, dtype), make(b, dtype, seed=1)
    offs = None if offs is None else torch.tensor(offs, dtype=torch.int32)
    tol = {} if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    ca, cb = a.clone().requires_grad_(), b.clone().requires_grad_()
    ta, tb = to_dev(a).requires_grad_(), to_dev(b).requires_grad_()
    out_c, out_t = torch._grouped_mm(ca, cb, offs), torch._grouped_mm(ta, tb, to_dev(offs))
    torch.testing.assert_close(out_t.cpu(), out_c, **tol)
    up = make(out_c.shape, out_c.dtype, seed=9)
    out_c.backward(up)
    out_t.backward(to_dev(up))
    torch.testing.assert_close(ta.grad.cpu(), ca.grad, **tol)
    torch.testing.assert_close(tb.grad.cpu(), cb.grad, **tol)


def test_grouped_mm_is_one_program_whatever_the_offsets():
    # ATen's composite ran one mm per group, on slices whose shapes and
    # offsets differ by group: a mixture-of-experts layer compiled a program
    # per expert and per token count (Mistral4's first step, 128 experts,
    # compiled over 2,000). On tpu the offsets stay on the device.
    a, b = make((12, 8), torch.float32), make((4, 8, 8), torch.float32, seed=1)
    ta, tb = to_dev(a), to_dev(b)
    for offs in ([3, 5, 9, 12], [0, 6, 7, 12]):  # the first call compiles
        o = torch.tensor(offs, dtype=torch.int32)
        torch.testing.assert_close(torch._grouped_mm(ta, tb, to_dev(o)).cpu(), torch._grouped_mm(a, b, o))
    before = torch_tpu.metrics()["graphs_compiled"]
    for offs in ([1, 2, 11, 12], [12, 12, 12, 12], [0, 0, 0, 12]):
        o = torch.tensor(offs, dtype=torch.int32)
        torch.testing.assert_close(torch._grouped_mm(ta, tb, to_dev(o)).cpu(), torch._grouped_mm(a, b, o))
    assert torch_tpu.metrics()["graphs_compiled"] == before


@pytest.mark.parametrize("a,b,offs", [
    ((10, 8), (3, 8, 4), torch.tensor([3, 3, 10])),                        # int64 offsets
    ((10, 8), (3, 8, 4), None),                                            # no offsets for a 2D operand
    ((10, 8), (3, 6, 4), torch.tensor([3, 3, 10], dtype=torch.int32)),     # contraction sizes differ
    ((3, 5, 8), (3, 8, 4), torch.tensor([1, 2, 3], dtype=torch.int32)),    # offsets for two 3D operands
])
def test_grouped_mm_errors(a, b, offs):
    args = (make(a, torch.float32), make(b, torch.float32)) + (() if offs is None else (offs,))
    raises_like(torch._grouped_mm, *args)
    raises_like(torch._grouped_mm, make(a, torch.float32), make(b, torch.float64),
                *(() if offs is None else (offs,)))
