"""User kernels: torch_tpu.pallas.jax_op (JAX and Pallas) and torch_tpu.stablehlo_op,
in strict, debug, defer_and_fuse and torch.compile, forward and backward,
against PyTorch on the CPU."""
import itertools
import uuid
import warnings

import pytest
import torch
import torch.nn.functional as F

import torch_tpu

jax = pytest.importorskip("jax", reason="JAX is the optional extra torch_tpu[jax] "
                          "(requirements.txt installs it for the test suite)")
jnp = pytest.importorskip("jax.numpy")
pl = pytest.importorskip("jax.experimental.pallas")

from torch_tpu.pallas import jax_op  # noqa: E402

MODES = ("strict", "debug", "defer_and_fuse")
_ids = itertools.count()


def fresh(name):
    """Operator names are global to the process: one per test use."""
    return f"kt{next(_ids)}::{name}"


def untraced(name):
    """A name no earlier run can have stored in the suite's persistent cache,
    for tests that need the kernel to be traced in this process."""
    return f"kt_{uuid.uuid4().hex}::{name}"


def close(tpu_value, cpu_value, **kw):
    torch.testing.assert_close(tpu_value.cpu(), cpu_value, **kw)


# ---------------------------------------------------------------- kernels

def jax_rms(x, w):
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w


def jax_rms_and_argmax(x, w):
    return jax_rms(x, w), jnp.argmax(x, axis=-1).astype(jnp.int32)


def add_mul_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = (x_ref[...] + y_ref[...]) * x_ref[...]


def pallas_add_mul(x, y):
    return pl.pallas_call(add_mul_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)


def matmul_kernel(x_ref, y_ref, o_ref):
    @pl.when(pl.program_id(2) == 0)
    def _():
        o_ref[...] = jnp.zeros_like(o_ref)

    o_ref[...] += jnp.dot(x_ref[...], y_ref[...])


def pallas_matmul(x, y, bm=8, bn=16, bk=8):
    m, k = x.shape
    n = y.shape[1]
    return pl.pallas_call(
        matmul_kernel,
        out_shape=jax.ShapeDtypeStruct((m, n), x.dtype),
        grid=(m // bm, n // bn, k // bk),
        in_specs=[pl.BlockSpec((bm, bk), lambda i, j, kk: (i, kk)),
                  pl.BlockSpec((bk, bn), lambda i, j, kk: (kk, j))],
        out_specs=pl.BlockSpec((bm, bn), lambda i, j, kk: (i, j)),
    )(x, y)


def softmax_kernel(x_ref, o_ref):
    x = x_ref[...]
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    o_ref[...] = e / jnp.sum(e, axis=-1, keepdims=True)


def pallas_softmax(x, rows=4):
    return pl.pallas_call(
        softmax_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(x.shape[0] // rows,),
        in_specs=[pl.BlockSpec((rows, x.shape[1]), lambda i: (i, 0))],
        out_specs=pl.BlockSpec((rows, x.shape[1]), lambda i: (i, 0)),
    )(x)


def softmax_backward(x, g):
    y = jax.nn.softmax(x, axis=-1)
    return (y * (g - jnp.sum(g * y, axis=-1, keepdims=True)),)


TWO_ADDS_MODULE = """
module @two {
  func.func public @main(%a: tensor<4x3xf32>, %b: tensor<3xf32>) -> (tensor<4x3xf32>, tensor<4xf32>) {
    %0 = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<3xf32>) -> tensor<4x3xf32>
    %1 = stablehlo.multiply %a, %0 : tensor<4x3xf32>
    %2 = call @squash(%1) : (tensor<4x3xf32>) -> tensor<4x3xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %3 = stablehlo.reduce(%2 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<4x3xf32>, tensor<f32>) -> tensor<4xf32>
    return %2, %3 : tensor<4x3xf32>, tensor<4xf32>
  }
  func.func private @squash(%x: tensor<4x3xf32>) -> tensor<4x3xf32> {
    %0 = stablehlo.tanh %x : tensor<4x3xf32>
    return %0 : tensor<4x3xf32>
  }
}
"""


def torch_two(a, b):
    y = torch.tanh(a * b)
    return y, y.sum(-1)


@pytest.fixture(scope="module")
def rms_op():
    return jax_op(fresh("rms"), jax_rms)


# ---------------------------------------------------------------- jax_op forward and backward

@pytest.mark.parametrize("mode", MODES)
def test_jax_op_forward_several_results(mode, tpu):
    op = jax_op(fresh("rms_argmax"), jax_rms_and_argmax)
    x, w = torch.randn(6, 16), torch.randn(16)
    with torch_tpu.eager_mode(mode):
        y, idx = op(x.to(tpu), w.to(tpu))
        close(y, F.rms_norm(x, (16,), w, 1e-6))
        assert idx.dtype == torch.int32
        close(idx, x.argmax(-1).int())


@pytest.mark.parametrize("mode", MODES)
def test_jax_op_automatic_backward(mode, tpu, rms_op):
    x, w = torch.randn(5, 8, requires_grad=True), torch.randn(8, requires_grad=True)
    ref = F.rms_norm(x, (8,), w, 1e-6)
    (ref * ref.detach().sign()).sum().backward()
    with torch_tpu.eager_mode(mode):
        xt = x.detach().to(tpu).requires_grad_()
        wt = w.detach().to(tpu).requires_grad_()
        y = rms_op(xt, wt)
        (y * y.detach().sign()).sum().backward()
        close(y.detach(), ref.detach())
        close(xt.grad, x.grad)
        close(wt.grad, w.grad)


def test_jax_op_traces_once_per_signature(tpu):
    traced = []

    def fn(x):
        traced.append(x.shape)
        return jnp.cos(x)

    op = jax_op(fresh("cos"), fn)
    x = torch.randn(5)
    close(op(x.to(tpu)), torch.cos(x))
    n = len(traced)  # eval_shape for the fake and the lowering may each trace
    torch_tpu.reset_metrics()
    for _ in range(3):
        close(op(x.to(tpu)), torch.cos(x))
    assert len(traced) == n
    assert torch_tpu.metrics()["graphs_compiled"] == 0  # the executable is reused too


def test_jax_op_new_signature_traces_again(tpu, rms_op):
    for shape in ((3, 4), (2, 5, 4)):
        x, w = torch.randn(shape), torch.randn(shape[-1])
        close(rms_op(x.to(tpu), w.to(tpu)), F.rms_norm(x, (shape[-1],), w, 1e-6))
    xb = torch.randn(3, 4, dtype=torch.bfloat16)
    wb = torch.randn(4, dtype=torch.bfloat16)
    close(rms_op(xb.to(tpu), wb.to(tpu)), F.rms_norm(xb.float(), (4,), wb.float(), 1e-6).bfloat16(),
          atol=2e-2, rtol=2e-2)


def test_jax_op_calling_jitted_functions(tpu):
    # Nested jits become private functions of the module, one with a quoted
    # name (@"<lambda>").
    inner = jax.jit(lambda x: jnp.tanh(x) * 2)

    @jax.jit
    def total(x):
        return x.sum()

    op = jax_op(fresh("nested"), lambda x, w: inner(x) @ w + total(x))
    x, w = torch.randn(3, 4), torch.randn(4, 5)
    close(op(x.to(tpu), w.to(tpu)), (torch.tanh(x) * 2) @ w + x.sum())


def test_jax_op_int64_inputs_keep_their_dtype(tpu):
    op = jax_op(fresh("take"), lambda x, i: x[i] * 2)
    x, i = torch.randn(10), torch.tensor([3, 0, 9, 3])
    close(op(x.to(tpu), i.to(tpu)), x[i] * 2)  # traced with int64 (without x64, JAX makes it int32)


def test_jax_op_backward_skips_integer_inputs(tpu):
    op = jax_op(fresh("gather"), lambda x, i: x[i] ** 2)
    x = torch.randn(6, requires_grad=True)
    i = torch.tensor([1, 1, 4])
    (x[i] ** 2).sum().backward()
    xt = x.detach().to(tpu).requires_grad_()
    op(xt, i.to(tpu)).sum().backward()
    close(xt.grad, x.grad)


@pytest.mark.parametrize("mode", MODES)
def test_jax_op_given_backward(mode, tpu):
    calls = []  # a list in the closure: kept out of the disk cache, so traced here

    def backward(x, g):
        calls.append(x.shape)
        return softmax_backward(x, g)

    op = jax_op(fresh("softmax"), pallas_softmax, backward=backward)
    x = torch.randn(8, 32, requires_grad=True)
    g = torch.randn(8, 32)
    y = torch.softmax(x, -1)
    (y * g).sum().backward()
    with torch_tpu.eager_mode(mode):
        xt = x.detach().to(tpu).requires_grad_()
        yt = op(xt)
        (yt * g.to(tpu)).sum().backward()
        close(yt.detach(), y.detach())
        close(xt.grad, x.grad)
    assert calls  # the given backward was traced, not jax.vjp of the kernel


@pytest.mark.parametrize("mode", MODES)
def test_register_autograd_replaces_the_derived_backward(mode, tpu):
    op = jax_op(fresh("double"), lambda x: x * 2.0)

    def backward(ctx, grads):
        return grads[0] * 3.0  # not the true gradient: proves this one runs

    op.register_autograd(backward)
    with torch_tpu.eager_mode(mode):
        x = torch.ones(4, device=tpu, requires_grad=True)
        op(x).sum().backward()
        close(x.grad, torch.full((4,), 3.0))


# ---------------------------------------------------------------- Pallas (interpret mode here)

@pytest.mark.parametrize("mode", MODES)
def test_pallas_elementwise(mode, tpu):
    op = jax_op(fresh("add_mul"), pallas_add_mul)
    x, y = torch.randn(8, 128), torch.randn(8, 128)
    with torch_tpu.eager_mode(mode):
        close(op(x.to(tpu), y.to(tpu)), (x + y) * x)


@pytest.mark.parametrize("mode", ("strict", "defer_and_fuse"))
def test_pallas_tiled_matmul_grid_blockspecs(mode, tpu):
    op = jax_op(fresh("matmul"), pallas_matmul)
    a, b = torch.randn(16, 24), torch.randn(24, 32)
    with torch_tpu.eager_mode(mode):
        close(op(a.to(tpu), b.to(tpu)), a @ b, atol=1e-4, rtol=1e-4)


def test_pallas_softmax(tpu):
    op = jax_op(fresh("softmax"), pallas_softmax, backward=softmax_backward)
    x = torch.randn(12, 40) * 4
    close(op(x.to(tpu)), torch.softmax(x, -1))


# ---------------------------------------------------------------- graphs: fusion, compile, no JAX client

def test_jax_op_fuses_into_one_deferred_graph(tpu, rms_op):
    x, w = torch.randn(4, 8), torch.randn(8)
    xt, wt = x.to(tpu), w.to(tpu)
    torch.tpu.synchronize()
    rms_op(xt, wt)  # traced and compiled before counting
    with torch_tpu.eager_mode("defer_and_fuse"):
        torch_tpu.flush()
        torch_tpu.reset_metrics()
        h = (xt * 2).relu()
        y = rms_op(h, wt) + 1
        out = (y @ y.T).sum(-1).cpu()
        launched = torch_tpu.metrics()["graphs_launched"]
    h_ref = (x * 2).relu()
    y_ref = F.rms_norm(h_ref, (8,), w, 1e-6) + 1
    torch.testing.assert_close(out, (y_ref @ y_ref.T).sum(-1))
    assert launched == 1


def test_jax_op_inside_torch_compile_trains(tpu):
    op = jax_op(fresh("rms"), jax_rms)

    class Block(torch.nn.Module):
        def __init__(self, use_jax):
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)
            self.w = torch.nn.Parameter(torch.rand(8) + 0.5)
            self.use_jax = use_jax

        def forward(self, x):
            h = self.lin(x)
            h = op(h, self.w) if self.use_jax else F.rms_norm(h, (8,), self.w, 1e-6)
            return (h * h).mean()

    torch.manual_seed(0)
    ref = Block(False)
    dev = Block(True)
    dev.load_state_dict(ref.state_dict())
    dev.to(tpu)
    x = torch.randn(4, 8)
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    eager_before = torch_tpu.dynamo.compile_stats()["eager_graphs"]
    step = torch.compile(dev, backend="tpu")
    for _ in range(2):
        loss = step(x.to(tpu))
        loss.backward()
    ref_loss = ref(x)
    ref_loss.backward()
    ref_loss2 = ref(x)
    ref_loss2.backward()
    close(loss.detach(), ref_loss2.detach())
    for (n, p), (_, q) in zip(ref.named_parameters(), dev.named_parameters()):
        close(q.grad, p.grad, atol=1e-5, rtol=1e-4)
    assert not torch._dynamo.utils.counters["graph_break"]
    assert torch_tpu.dynamo.compile_stats()["eager_graphs"] == eager_before  # all captured


def test_pallas_softmax_inside_torch_compile_with_backward(tpu):
    op = jax_op(fresh("softmax"), pallas_softmax, backward=softmax_backward)
    x = torch.randn(8, 16, requires_grad=True)
    g = torch.randn(8, 16)
    (torch.softmax(x * 2, -1) * g).sum().backward()
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    f = torch.compile(lambda x, g: (op(x * 2) * g).sum(), backend="tpu")
    xt = x.detach().to(tpu).requires_grad_()
    loss = f(xt, g.to(tpu))
    loss.backward()
    close(loss.detach(), (torch.softmax(x * 2, -1) * g).sum().detach())
    close(xt.grad, x.grad)
    assert not torch._dynamo.utils.counters["graph_break"]


def test_stablehlo_op_inside_torch_compile(tpu):
    op = torch_tpu.stablehlo_op(fresh("two"), TWO_ADDS_MODULE)
    a, b = torch.randn(4, 3), torch.randn(3)
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    f = torch.compile(lambda a, b: op(a + 1, b)[1] * 2, backend="tpu")
    close(f(a.to(tpu), b.to(tpu)), torch_two(a + 1, b)[1] * 2)
    assert not torch._dynamo.utils.counters["graph_break"]


def test_no_jax_client_is_created(tpu):
    from jax._src import xla_bridge

    # Names no earlier run cached: traced here, forward and backward.
    x = torch.randn(4, 8, device=tpu, requires_grad=True)
    jax_op(untraced("rms"), jax_rms)(x, torch.ones(8, device=tpu)).sum().backward()
    jax_op(untraced("add_mul"), pallas_add_mul)(torch.ones(8, 128, device=tpu),
                                                torch.ones(8, 128, device=tpu)).cpu()
    assert x.grad is not None
    assert xla_bridge._backends == {}


# ---------------------------------------------------------------- stablehlo_op

@pytest.mark.parametrize("mode", MODES)
def test_stablehlo_op(mode, tpu):
    op = torch_tpu.stablehlo_op(fresh("two"), TWO_ADDS_MODULE)
    a, b = torch.randn(4, 3), torch.randn(3)
    with torch_tpu.eager_mode(mode):
        y, s = op(a.to(tpu), b.to(tpu))
        ry, rs = torch_two(a, b)
        close(y, ry)
        close(s, rs)


def two_with_gradient(name):
    """TWO_ADDS_MODULE with a backward written in PyTorch (tpu ops)."""
    op = torch_tpu.stablehlo_op(name, TWO_ADDS_MODULE)

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0], inputs[1], output[0])

    def backward(ctx, grads):
        a, b, y = ctx.saved_tensors
        gy, gs = grads
        gy = (gy if gy is not None else torch.zeros_like(y))
        if gs is not None:
            gy = gy + gs[:, None]
        gz = gy * (1 - y * y)
        return gz * b, (gz * a).sum(0)

    return op.register_autograd(backward, setup_context=setup_context)


@pytest.mark.parametrize("mode", MODES)
def test_stablehlo_op_registered_backward(mode, tpu):
    op = two_with_gradient(fresh("two"))
    a = torch.randn(4, 3, requires_grad=True)
    b = torch.randn(3, requires_grad=True)
    ry, rs = torch_two(a, b)
    (ry.sum() * 2 + (rs * rs).sum()).backward()
    with torch_tpu.eager_mode(mode):
        at = a.detach().to(tpu).requires_grad_()
        bt = b.detach().to(tpu).requires_grad_()
        y, s = op(at, bt)
        (y.sum() * 2 + (s * s).sum()).backward()
        close(at.grad, a.grad)
        close(bt.grad, b.grad)


def test_stablehlo_op_registered_backward_inside_torch_compile(tpu):
    op = two_with_gradient(fresh("two"))
    a = torch.randn(4, 3, requires_grad=True)
    b = torch.randn(3, requires_grad=True)
    torch_two(a * 2, b)[1].sum().backward()
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    f = torch.compile(lambda a, b: op(a * 2, b)[1].sum(), backend="tpu")
    at = a.detach().to(tpu).requires_grad_()
    bt = b.detach().to(tpu).requires_grad_()
    f(at, bt).backward()
    close(at.grad, a.grad)
    close(bt.grad, b.grad)
    assert not torch._dynamo.utils.counters["graph_break"]


def test_stablehlo_op_without_gradient_says_so(tpu):
    op = torch_tpu.stablehlo_op(fresh("two"), TWO_ADDS_MODULE)
    a = torch.randn(4, 3, device=tpu, requires_grad=True)
    with pytest.raises(RuntimeError, match="(?i)autograd"):
        op(a, torch.randn(3, device=tpu))[1].sum().backward()


def test_stablehlo_op_parse_error_names_line(tpu):
    bad = TWO_ADDS_MODULE.replace("stablehlo.tanh", "stablehlo.tanhh")
    line = next(n for n, text in enumerate(bad.split("\n"), 1) if "tanhh" in text)
    with pytest.raises(ValueError, match=rf"bad::two.*:{line}:\d+: error: .*stablehlo.tanhh"):
        torch_tpu.stablehlo_op("bad::two", bad)


@pytest.mark.parametrize("mode", MODES)
def test_stablehlo_op_signature_checks(mode, tpu):
    # Raised at the call in every mode: nothing is left pending to fail later.
    op = torch_tpu.stablehlo_op(fresh("two"), TWO_ADDS_MODULE)
    with torch_tpu.eager_mode(mode):
        with pytest.raises(TypeError, match="takes .float32\\[4, 3\\], float32\\[3\\]"):
            op(torch.randn(4, 3, device=tpu, dtype=torch.float64), torch.randn(3, device=tpu))
        with pytest.raises(TypeError, match="takes .float32\\[4, 3\\]"):
            op(torch.randn(5, 3, device=tpu), torch.randn(3, device=tpu))
        with pytest.raises(TypeError, match="expected 2 tensor arguments"):
            op(torch.randn(4, 3, device=tpu))
        with pytest.raises(RuntimeError, match="runs on tpu; got tensors on cpu"):
            op(torch.randn(4, 3), torch.randn(3))


@pytest.mark.parametrize("text,message", [
    ("module {\n}\n", "no 'func.func @main'"),
    ("func.func @main(%a: tensor<?xf32>) -> tensor<?xf32> {\n  return %a : tensor<?xf32>\n}\n",
     "dynamic dimensions"),
    ("func.func @main(%a: tensor<4xf8E4M3FNUZ>) -> tensor<4xf8E4M3FNUZ> {\n  return %a : tensor<4xf8E4M3FNUZ>\n}\n",
     "element type 'f8E4M3FNUZ'"),
    ("module { func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {", "unbalanced"),
])
def test_stablehlo_op_unreadable_modules(text, message, tpu):
    with pytest.raises(ValueError, match=message):
        torch_tpu.stablehlo_op(fresh("bad"), text)


def test_stablehlo_op_bad_name():
    with pytest.raises(ValueError, match="namespace::name"):
        torch_tpu.stablehlo_op("no_namespace", TWO_ADDS_MODULE)


# ---------------------------------------------------------------- jax_op bad input

def test_failed_kernel_launch_names_the_op_and_line(tpu, rms_op):
    x, w = torch.ones(2, 8, device=tpu), torch.ones(8, device=tpu)
    rms_op(x, w).cpu()  # traced and compiled
    torch_tpu._C._fail_next_launch("boom")
    y = rms_op(x, w)  # this line is named in the error
    with pytest.raises(RuntimeError, match=rf"'{rms_op.name}' \(at .*test_custom_kernels.py:\d+\).*boom"):
        y.cpu()


def test_jax_op_fn_returning_non_array(tpu):
    op = jax_op(fresh("text"), lambda x: "not an array")
    with pytest.raises(TypeError, match="must return JAX arrays.*str"):
        op(torch.ones(3, device=tpu))


def test_jax_op_error_while_tracing_names_the_op(tpu):
    name = fresh("mm")
    op = jax_op(name, lambda a, b: a @ b)
    with pytest.raises(TypeError, match=rf"{name}.*float32\[2, 3\], float32\[4, 5\].*dot_general"):
        op(torch.ones(2, 3, device=tpu), torch.ones(4, 5, device=tpu))


def test_jax_op_result_dtype_the_device_cannot_hold(tpu):
    op = jax_op(fresh("fp8"), lambda x: x.astype(jnp.float8_e4m3b11fnuz))
    with pytest.raises(TypeError, match="float8_e4m3b11fnuz.*cannot hold"):
        op(torch.ones(3, device=tpu))


def test_jax_op_wrong_device_and_arity(tpu, rms_op):
    with pytest.raises(RuntimeError, match="runs on tpu; got tensors on cpu"):
        rms_op(torch.ones(2, 8), torch.ones(8))
    with pytest.raises(TypeError, match="expected 2 tensor arguments, got 1"):
        rms_op(torch.ones(2, 8, device=tpu))
    with pytest.raises(TypeError, match="takes \\*args"):
        jax_op(fresh("varargs"), lambda *xs: xs[0])


def test_jax_op_without_jax_installed(run_python, tmp_path):
    # A kernel the cache could hold is defined, and fails at its first call
    # (nothing cached); one it could not hold fails at once.
    r = run_python("""
        import sys
        sys.modules["jax"] = None   # as if JAX were not installed
        import torch, torch_tpu
        op = torch_tpu.pallas.jax_op("nojax::f", lambda x: x)
        try:
            op(torch.ones(3, device="tpu"))
        except ImportError as e:
            print("ImportError:", e)
        state = []
        try:
            torch_tpu.pallas.jax_op("nojax::g", lambda x: x + len(state))
        except ImportError as e:
            print("ImportError:", e)
    """, TORCH_TPU_CACHE_DIR=str(tmp_path))
    assert r.returncode == 0, r.stderr
    first, second = [line for line in r.stdout.splitlines() if line.startswith("ImportError")]
    assert "jax_op('nojax::f'): JAX is not installed" in first
    assert "holds no trace of it for inputs (float32[3])" in first
    assert "torch_tpu[jax]" in first
    assert "jax_op('nojax::g'): JAX is not installed" in second
    assert "kept out of the persistent cache" in second and "'state'" in second


def test_jax_op_input_dtype_jax_cannot_take():
    # Every dtype a tpu tensor holds has a JAX dtype, so this is reached only
    # by a signature given directly; it still names the op.
    from torch_tpu.kernels import jax_lower as _jax_lower

    with pytest.raises(TypeError, match=r"jax_op\('x::y'\): tensors of dtype float8_e5m2fnuz cannot"):
        _jax_lower.abstract_values([(torch.float8_e5m2fnuz, (4,))], "jax_op('x::y')")


# ---------------------------------------------------------------- the plugin's StableHLO window

def test_plugin_reports_its_stablehlo_window():
    from torch_tpu.kernels import jax_lower as _jax_lower

    window = _jax_lower.plugin_window()
    attrs = torch_tpu.platform()["plugin_attributes"]
    if window is None:
        assert "stablehlo_current_version" not in attrs
        pytest.skip("this plugin reports no StableHLO window (the compile check is used)")
    assert window == (attrs["stablehlo_minimum_version"], attrs["stablehlo_current_version"])
    assert all(len(v.split(".")) == 3 and v.replace(".", "").isdigit() for v in window)


def test_window_error_names_both_versions():
    from torch_tpu.kernels.jax_lower import window_error

    assert window_error(("0.9.0", "1.17.0"), ("0.9.0", "1.13.3")) is None
    assert window_error(("0.9.0", "1.17.0"), ("1.17.0", "1.20.0")) is None
    newer = window_error(("0.9.0", "1.17.0"), ("1.18.0", "1.20.0"))
    assert "1.17.0" in newer and "1.18.0" in newer
    older = window_error(("0.9.0", "1.17.0"), ("0.4.0", "0.8.9"))
    assert "0.8.9" in older and "0.9.0" in older
    assert window_error(("0.9.0", "1.17.0"), ("0.4.0", "0.10.0")) is None  # numeric, not text order


def test_kernel_outside_the_plugin_window_is_refused(tpu, monkeypatch):
    from jax._src.lib.mlir.dialects import hlo

    from torch_tpu.kernels import jax_lower as _jax_lower

    jax_current = hlo.get_current_version()
    monkeypatch.setattr(_jax_lower, "plugin_window", lambda: ("99.0.0", "99.1.0"))
    op = jax_op(untraced("cos"), jnp.cos)
    with pytest.raises(RuntimeError,
                       match=rf"cannot read the StableHLO that JAX .*writes StableHLO "
                             rf".*{jax_current}.*99\.0\.0"):
        op(torch.ones(3, device=tpu))
    # stablehlo.tan is newer than StableHLO 1.0.0: a plugin reading up to
    # 1.0.0 cannot take this module although the windows overlap.
    monkeypatch.setattr(_jax_lower, "plugin_window", lambda: ("0.9.0", "1.0.0"))
    op = jax_op(untraced("tan"), jnp.tan)
    with pytest.raises(RuntimeError, match=rf"newer than 1\.0\.0.*JAX writes {jax_current}"):
        op(torch.ones(3, device=tpu))
    op = jax_op(untraced("cos"), jnp.cos)  # a module that 1.0.0 can express passes
    close(op(torch.ones(3, device=tpu)), torch.cos(torch.ones(3)))


def test_kernel_inside_the_real_plugin_window(tpu):
    op = jax_op(untraced("tan"), jnp.tan)
    x = torch.rand(5)
    close(op(x.to(tpu)), torch.tan(x))


def test_plugin_without_a_window_is_checked_by_compiling(tpu, monkeypatch):
    from torch_tpu.kernels import jax_lower as _jax_lower

    probes = []
    monkeypatch.setattr(_jax_lower, "plugin_window", lambda: None)
    monkeypatch.setattr(_jax_lower, "_compiled_probe", False)
    real = _jax_lower.check_by_compiling
    monkeypatch.setattr(_jax_lower, "check_by_compiling",
                        lambda who: probes.append(who) or real(who))
    op = jax_op(untraced("sin"), jnp.sin)
    x = torch.rand(3)
    close(op(x.to(tpu)), torch.sin(x))
    assert probes and _jax_lower._compiled_probe


# ---------------------------------------------------------------- Pallas: Mosaic or interpret

@pytest.mark.parametrize("platform_name,lowering", [("cpu", "interpret"), ("cuda", "interpret"),
                                                    ("TPU", "mosaic"), ("tpu", "mosaic")])
def test_pallas_lowering_follows_the_platform(platform_name, lowering, monkeypatch):
    from jax._src import xla_bridge

    from torch_tpu.kernels import jax_lower as _jax_lower

    real = torch_tpu.platform()
    monkeypatch.setattr(torch_tpu.info, "platform", lambda: dict(real, platform_name=platform_name))
    monkeypatch.setattr(_jax_lower, "_interpret_noted", False)
    platform = _jax_lower.lowering_platform()
    assert _jax_lower.pallas_lowering(platform) == lowering
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        text = _jax_lower.lower(pallas_add_mul, [(torch.float32, (8, 128))] * 2, "test")
    noted = [w for w in caught if "interpret mode" in str(w.message)]
    if lowering == "mosaic":
        assert "tpu_custom_call" in text and not noted  # lowered only: running it needs a TPU
    else:
        assert "tpu_custom_call" not in text and len(noted) == 1
    assert xla_bridge._backends == {}  # Mosaic's lowering did not make JAX create a TPU client


def test_jax_op_on_another_device_and_mixed_devices(rms_op):
    if torch.tpu.device_count() < 2:
        pytest.skip("needs two tpu devices (the CPU plugin gives several)")
    x, w = torch.randn(3, 8), torch.randn(8)
    y = rms_op(x.to("tpu:1"), w.to("tpu:1"))
    assert y.device == torch.device("tpu:1")
    close(y, F.rms_norm(x, (8,), w, 1e-6))
    with pytest.raises(RuntimeError, match=rf"{rms_op.name}: expected all tensors on one device"):
        rms_op(x.to("tpu:0"), w.to("tpu:1"))
