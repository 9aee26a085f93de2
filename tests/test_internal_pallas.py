"""torch_tpu._internal (the names Helion and Inductor's Pallas backend call in
Google's TorchTPU), over our one kernel registry: JaxCallable against
PyTorch on the CPU, pl.kernel lowered, the registry's checks, and Inductor's
own generated code reaching it. Helion's side: tests_helion/."""
import ast
import re

import pytest
import torch

import torch_tpu

jax = pytest.importorskip("jax", reason="JAX is the optional extra torch_tpu[jax] "
                          "(requirements.txt installs it for the test suite)")
jnp = pytest.importorskip("jax.numpy")
pl = pytest.importorskip("jax.experimental.pallas")
pltpu = pytest.importorskip("jax.experimental.pallas.tpu")

from torch_tpu._internal.pallas import pallas as tpu_pallas  # noqa: E402
from torch_tpu._internal.pallas import tpu_torch_pallas  # noqa: E402
from torch_tpu._internal.utils import hardware  # noqa: E402
from torch_tpu.kernels import jax_lower, kernel_registry  # noqa: E402

# Pallas kernels run in interpret form on the CPU plugin: jax_lower notes it once.
pytestmark = pytest.mark.filterwarnings("ignore:torch_tpu. Pallas kernels run in Pallas")


def add_kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] + y_ref[...]


def pallas_add(x, y):
    spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
    return pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid=(x.shape[0] // 8,), in_specs=[spec, spec], out_specs=spec)(x, y)


def mul_by_pl_kernel(x, y):
    """pl.kernel binds mpmd_map (not pallas_call), here on a TensorCore mesh
    as Helion builds it."""
    def body(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] * y_ref[...]

    mesh = pltpu.create_tensorcore_mesh("core", num_cores=1)
    return pl.kernel(body, jax.ShapeDtypeStruct(x.shape, x.dtype), mesh=mesh)(x, y)


def _module_text(fn, *shapes):
    return jax_lower.lower(fn, [(torch.float32, s) for s in shapes], "test")


def _registered(name, fn, *shapes):
    text = _module_text(fn, *shapes)
    key = f"{name}-key"
    tpu_torch_pallas.register_custom_kernel(name, key, serialized_mlir_module=text)
    return key


# ---------------------------------------------------------------- JaxCallable

def test_jax_callable_runs_a_pallas_kernel_on_tpu():
    call = tpu_pallas.JaxCallable(name="t_add", jit_fn=jax.jit(pallas_add), trace_key="t_add_1")
    x, y = torch.randn(24, 128), torch.randn(24, 128)  # a grid of 3
    out = call(x.to("tpu"), y.to("tpu"))
    assert out.device.type == "tpu"
    torch.testing.assert_close(out.cpu(), x + y, rtol=0, atol=0)
    # What Helion reads to call the registry directly afterwards.
    key = tpu_pallas._get_kernel_invocation_key("t_add_1", (x, y), {}, ())
    placeholders, tree = call.output_shapes[key]
    assert [(p.dtype, tuple(p.shape)) for p in placeholders] == [(torch.float32, (24, 128))]
    fingerprint = call.kernel_key_to_mlir_fingerprint[key]
    assert tpu_torch_pallas.lookup_custom_kernel("t_add", fingerprint)
    again = tpu_torch_pallas.call_custom_kernel("t_add", fingerprint, inputs=[y.to("tpu"), x.to("tpu")],
                                                output_shapes=placeholders, donate_argnums=[])
    torch.testing.assert_close(tree.unflatten(again).cpu(), y + x, rtol=0, atol=0)


def test_jax_callable_writes_aliased_results_into_their_inputs():
    def add_into_x(x, y):
        return pl.pallas_call(add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                              input_output_aliases={0: 0})(x, y)

    call = tpu_pallas.JaxCallable(name="t_inplace", jit_fn=jax.jit(add_into_x), trace_key="t_inplace",
                                  input_output_aliases={0: 0})
    assert call.donate_argnums == [0]
    x, y = torch.randn(8, 128), torch.randn(8, 128)
    xt = x.to("tpu")
    out = call(xt, y.to("tpu"))
    torch.testing.assert_close(xt.cpu(), x + y, rtol=0, atol=0)
    torch.testing.assert_close(out.cpu(), x + y, rtol=0, atol=0)


def test_jax_callable_static_arguments_none_and_pytree_results():
    def scaled(x, scale, bias):
        return {"y": x * scale, "x": (x, x + 1 if bias is None else x)}

    call = tpu_pallas.JaxCallable(name="t_static", jit_fn=scaled, trace_key="t_static",
                                  static_argnums=(1,))
    x = torch.randn(4, 8)
    out = call(x.to("tpu"), 3.0, None)
    torch.testing.assert_close(out["y"].cpu(), x * 3.0)
    torch.testing.assert_close(out["x"][0].cpu(), x)
    torch.testing.assert_close(out["x"][1].cpu(), x + 1)
    out = call(x.to("tpu"), 2.0, None)  # another static value: another specialization
    torch.testing.assert_close(out["y"].cpu(), x * 2.0)
    assert len(call.output_shapes) == 2
    with pytest.raises(TypeError, match=r"JaxCallable\('t_static'\): argument 1 is float"):
        tpu_pallas.JaxCallable(name="t_static", jit_fn=scaled, trace_key="t")(x.to("tpu"), 3.0, None)
    with pytest.raises(ValueError, match=r"argument 1 is in static_argnums but is a tensor"):
        call(x.to("tpu"), x.to("tpu"), None)


def test_jax_callable_without_tensor_inputs():
    def iota_kernel(o_ref):
        o_ref[...] = jax.lax.broadcasted_iota(jnp.float32, o_ref.shape, 1)

    def iota():
        return pl.pallas_call(iota_kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32))()

    out = tpu_pallas.JaxCallable(name="t_noinput", jit_fn=jax.jit(iota), trace_key="t_noinput")()
    assert out.device.type == "tpu"
    torch.testing.assert_close(out.cpu(), torch.arange(128.0).expand(8, 128), rtol=0, atol=0)


def test_jax_placeholder_is_the_tensors_shape_and_dtype():
    t = torch.empty(3, 5, dtype=torch.bfloat16, device="meta")
    p = tpu_pallas.jax_placeholder(t)
    assert (p.shape, p.dtype) == ((3, 5), jnp.bfloat16)
    assert tpu_pallas.jax_placeholder(7) == 7
    with pytest.raises(TypeError, match="jax_placeholder: tensors of dtype float8_e5m2fnuz"):
        tpu_pallas.jax_placeholder(torch.empty(2, dtype=torch.float8_e5m2fnuz))


def test_distributed_meshes_are_refused_naming_the_call():
    with pytest.raises(NotImplementedError, match="get_default_pallas_mesh: distributed Pallas"):
        tpu_pallas.get_default_pallas_mesh()

    class TwoDevices:
        class devices:
            size = 2

    with pytest.raises(NotImplementedError, match=r"JaxCallable\('t_mesh'\): a mesh of 2 devices"):
        tpu_pallas.JaxCallable(name="t_mesh", jit_fn=pallas_add, trace_key="k", mesh=TwoDevices())


# ---------------------------------------------------------------- pl.kernel (mpmd_map)

def test_pl_kernel_runs_in_interpret_form():
    call = tpu_pallas.JaxCallable(name="t_plk", jit_fn=jax.jit(mul_by_pl_kernel), trace_key="t_plk")
    x, y = torch.randn(8, 128), torch.randn(8, 128)
    torch.testing.assert_close(call(x.to("tpu"), y.to("tpu")).cpu(), x * y, rtol=0, atol=0)


def test_pl_kernel_needs_the_mpmd_map_rule(monkeypatch):
    """Without our rule for mpmd_map, JAX's own refuses pl.kernel off TPU."""
    from torch_tpu.kernels import pallas_interpret

    real = pallas_interpret.rules
    monkeypatch.setattr(pallas_interpret, "rules", lambda lost: real(lost)[:1])
    with pytest.raises(ValueError, match="Only interpret mode is supported on CPU backend"):
        _module_text(mul_by_pl_kernel, (8, 128), (8, 128))


def test_emit_pipeline_is_traced_for_the_chip_without_a_jax_client():
    """Pallas' TPU pipeline asks JAX for the device kind while it traces; our
    lowering answers with the chip it traces for (TPU7x off TPU) before JAX
    would create a client of its own to answer."""
    from jax._src import xla_bridge

    def pipelined_add(x, y):
        def body(x_hbm, y_hbm, o_hbm):
            spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
            pltpu.emit_pipeline(add_kernel, grid=(x.shape[0] // 8,), in_specs=[spec, spec],
                                out_specs=[spec])(x_hbm, y_hbm, o_hbm)

        mesh = pltpu.create_tensorcore_mesh("core", num_cores=1)
        return pl.kernel(body, jax.ShapeDtypeStruct(x.shape, x.dtype), mesh=mesh)(x, y)

    call = tpu_pallas.JaxCallable(name="t_pipe", jit_fn=jax.jit(pipelined_add), trace_key="t_pipe")
    x, y = torch.randn(32, 128), torch.randn(32, 128)
    torch.testing.assert_close(call(x.to("tpu"), y.to("tpu")).cpu(), x + y, rtol=0, atol=0)
    assert xla_bridge._backends == {}


def test_refs_a_kernel_writes_through_keep_its_writes():
    """Helion's TPU pipelines alias HBM through refs made with jax.new_ref;
    a kernel's writes through them (and its reads of what it wrote) land,
    as on a TPU, though JAX's own interpret mode loses them."""
    def add_into_ref(x, y):
        r = jax.new_ref(y)

        def body(x_ref, o_ref):
            r[...] = r[...] + x_ref[...]
            o_ref[...] = r[...] * 2

        mesh = pltpu.create_tensorcore_mesh("core", num_cores=1)
        out = pl.kernel(body, jax.ShapeDtypeStruct(x.shape, x.dtype), mesh=mesh)(x)
        return out, r[...]

    call = tpu_pallas.JaxCallable(name="t_ref", jit_fn=jax.jit(add_into_ref), trace_key="t_ref")
    x, y = torch.randn(8, 128), torch.randn(8, 128)
    out, written = call(x.to("tpu"), y.to("tpu"))
    torch.testing.assert_close(written.cpu(), x + y, rtol=0, atol=0)
    torch.testing.assert_close(out.cpu(), (x + y) * 2, rtol=0, atol=0)

    def doubled(x):  # refs outside any kernel are discharged, as jit does
        r = jax.new_ref(x)
        r[...] = r[...] * 2
        return r[...]

    call = tpu_pallas.JaxCallable(name="t_ref2", jit_fn=jax.jit(doubled), trace_key="t_ref2")
    torch.testing.assert_close(call(x.to("tpu")).cpu(), x * 2)


def test_refs_a_pallas_call_closes_over_keep_its_writes():
    """A ref a pallas_call closes over is a whole array in HBM, written on
    every grid step; each step sees the previous steps' writes."""
    def count_steps(x, y):
        r = jax.new_ref(y)

        def body(x_ref, o_ref):
            r[...] += 1
            o_ref[...] = x_ref[...] + r[0:8, :]

        spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
        out = pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(4,),
                             in_specs=[spec], out_specs=spec)(x)
        return out, r[...]

    call = tpu_pallas.JaxCallable(name="t_ref3", jit_fn=jax.jit(count_steps), trace_key="t_ref3")
    x, y = torch.randn(32, 128), torch.randn(32, 128)
    out, written = call(x.to("tpu"), y.to("tpu"))
    torch.testing.assert_close(written.cpu(), y + 4)
    torch.testing.assert_close(out.cpu(), x + torch.cat([y[:8] + step for step in (1, 2, 3, 4)]))


def test_refs_beside_a_blocked_alias_are_refused_off_tpu():
    """Interpret form keeps a kernel's writes through an aliased input only
    where the input is a whole array in HBM; a function that creates refs
    and also aliases a blocked input is refused rather than risk losing
    writes."""
    def blocked(x, y):
        r = jax.new_ref(y)

        def body(x_ref, o_ref):
            o_ref[...] = x_ref[...] + 1
            r[...] += 1

        spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
        out = pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(4,),
                             in_specs=[spec], out_specs=spec, input_output_aliases={0: 0})(x)
        return out, r[...]

    call = tpu_pallas.JaxCallable(name="t_ref4", jit_fn=jax.jit(blocked), trace_key="t_ref4")
    x = torch.randn(32, 128, device="tpu")
    with pytest.raises(NotImplementedError, match=r"JaxCallable\('t_ref4'\): the function creates "
                       r"refs \(jax.new_ref\).*aliases an input that is not a whole array in HBM"):
        call(x, x)


# ---------------------------------------------------------------- tpu_torch_pallas

def test_serialized_module_registers_and_runs():
    """The bytes jax.export writes (a StableHLO portable artifact), as
    Inductor's Pallas backend registers them."""
    from jax._src.interpreters import mlir
    from jax._src.lib import _jax
    from jax._src.lib.mlir import ir

    text = _module_text(pallas_add, (8, 128), (8, 128))
    with mlir.make_ir_context():
        blob = _jax.mlir.serialize_portable_artifact(ir.Module.parse(text), "1.0.0")
    assert isinstance(blob, bytes)
    name, key = "t_bytes", "t_bytes_out_8_128_in_8_128x8_128"
    assert not tpu_torch_pallas.lookup_custom_kernel(name, key)
    tpu_torch_pallas.register_custom_kernel(name, key, serialized_mlir_module=blob)
    assert tpu_torch_pallas.lookup_custom_kernel(name, key)
    x, y = torch.randn(8, 128), torch.randn(8, 128)
    inputs = [x.to("tpu"), y.to("tpu")]
    outs = [torch.empty(8, 128, device="tpu")]
    (r,) = tpu_torch_pallas.call_custom_kernel(name, key, inputs=inputs, output_shapes=outs,
                                               donate_argnums=[])
    torch.testing.assert_close(r.cpu(), x + y, rtol=0, atol=0)
    # The older spelling, which Inductor retries on TypeError.
    (r,) = tpu_torch_pallas.call_custom_kernel(name, key, inputs=inputs, output_shapes=outs,
                                               input_output_aliases={})
    torch.testing.assert_close(r.cpu(), x + y, rtol=0, atol=0)


def test_mosaic_module_is_refused_at_registration_naming_the_plugin(monkeypatch):
    real = torch_tpu.platform()
    monkeypatch.setattr(torch_tpu.info, "platform", lambda: dict(real, platform_name="tpu"))
    mosaic = jax_lower.lower(pallas_add, [(torch.float32, (8, 128))] * 2, "test", check=False)
    monkeypatch.undo()
    assert "tpu_custom_call" in mosaic
    with pytest.raises(RuntimeError, match=r"kernel 't_mosaic' \(key 'k'\): the module calls Mosaic "
                       r".* the loaded PJRT plugin is 'cpu'"):
        tpu_torch_pallas.register_custom_kernel("t_mosaic", "k", serialized_mlir_module=mosaic)
    assert not tpu_torch_pallas.lookup_custom_kernel("t_mosaic", "k")


def test_calls_with_an_unknown_signature_name_the_call_and_its_signature():
    with pytest.raises(TypeError, match=re.escape(
            "tpu_torch_pallas.call_custom_kernel: got an unexpected keyword argument 'stream'; its "
            "signature is call_custom_kernel(name, kernel_key, *, inputs, output_shapes, "
            "donate_argnums=(), device_assignment=None, input_output_aliases=None)")):
        tpu_torch_pallas.call_custom_kernel("n", "k", inputs=[], output_shapes=[], stream=0)
    with pytest.raises(TypeError, match=re.escape(
            "tpu_torch_pallas.register_custom_kernel: missing a required argument: "
            "'serialized_mlir_module'; its signature is register_custom_kernel(name, kernel_key, "
            "serialized_mlir_module)")):
        tpu_torch_pallas.register_custom_kernel("n", "k")


def test_call_custom_kernel_checks_its_arguments():
    key = _registered("t_checks", pallas_add, (8, 128), (8, 128))
    x = torch.randn(8, 128, device="tpu")
    out = [torch.empty(8, 128, device="meta")]
    call = tpu_torch_pallas.call_custom_kernel
    with pytest.raises(RuntimeError, match=r"kernel 't_checks' \(key 'nope'\) is not registered"):
        call("t_checks", "nope", inputs=[x, x], output_shapes=out)
    with pytest.raises(TypeError, match=re.escape("the module takes (float32[8, 128], float32[8, 128]); "
                                                  "called with (float32[8, 128])")):
        call("t_checks", key, inputs=[x], output_shapes=out)
    with pytest.raises(ValueError, match=re.escape("the module returns (float32[8, 128]); output_shapes "
                                                   "say (bfloat16[8, 128])")):
        call("t_checks", key, inputs=[x, x], output_shapes=[out[0].bfloat16()])
    with pytest.raises(ValueError, match="donate_argnums holds 2, not the index of one of the 2 inputs"):
        call("t_checks", key, inputs=[x, x], output_shapes=out, donate_argnums=[2])
    with pytest.raises(ValueError, match="differ from the inputs of input_output_aliases"):
        call("t_checks", key, inputs=[x, x], output_shapes=out, donate_argnums=[1],
             input_output_aliases={0: 0})
    with pytest.raises(NotImplementedError, match=r"device_assignment \[0, 1\] spans 2 devices"):
        call("t_checks", key, inputs=[x, x], output_shapes=out, device_assignment=[0, 1])
    with pytest.raises(RuntimeError, match="the kernel runs on one tpu device; got tensors on cpu"):
        call("t_checks", key, inputs=[x.cpu(), x.cpu()], output_shapes=out)
    (r,) = call("t_checks", key, inputs=[x, x], output_shapes=out, donate_argnums=[0],
                device_assignment=[0])
    torch.testing.assert_close(r.cpu(), (x + x).cpu(), rtol=0, atol=0)
    torch.testing.assert_close(x.cpu(), x.cpu())  # a "donated" input stays valid


def test_registered_kernels_fuse_and_compile_as_one_node():
    key = _registered("t_graph", pallas_add, (8, 128), (8, 128))

    def f(x):
        (r,) = tpu_torch_pallas.call_custom_kernel(
            "t_graph", key, inputs=[x * 2, x], output_shapes=[torch.empty(8, 128, device="meta")])
        return r.relu()

    x = torch.randn(8, 128)
    expected = (x * 2 + x).relu()
    with torch_tpu.eager_mode("defer_and_fuse"):
        torch.testing.assert_close(f(x.to("tpu")).cpu(), expected)
    torch.testing.assert_close(torch.compile(f, backend="tpu", fullgraph=True)(x.to("tpu")).cpu(),
                               expected)


# ---------------------------------------------------------------- hardware

def test_tpu_device_name(monkeypatch):
    # Off TPU: the chip Pallas' interpret form models, which JAX's table knows.
    from jax._src.pallas.mosaic import tpu_info

    assert hardware.get_tpu_device_name() == "TPU7x"
    real = torch_tpu.platform()
    monkeypatch.setattr(torch_tpu.info, "platform", lambda: dict(real, platform_name="tpu"))
    kind = torch.tpu.get_device_properties().kind
    assert hardware.get_tpu_device_name() == kind
    assert tpu_info.chip_version_from_device_kind("TPU7x") is tpu_info.ChipVersion.TPU_7X


def test_tpu_info_outside_a_trace_is_the_traced_chips():
    """Helion asks Pallas for the TPU's VMEM size before it traces, which
    reads JAX's default device: JAX's CPU device next to torch_tpu. Importing
    torch_tpu._internal.pallas answers it with the chip kernels are traced
    for (TPU7x off TPU), where JAX alone refuses the kind "cpu"."""
    from jax._src import mesh as mesh_lib
    from jax._src.pallas.mosaic import tpu_info

    cpu = mesh_lib.AbstractDevice(device_kind="cpu", num_cores=1, platform="cpu")
    with mesh_lib.use_abstract_mesh(mesh_lib.AbstractMesh((), (), abstract_device=cpu)):
        info = pltpu.get_tpu_info()
    expected = tpu_info.get_tpu_info_for_chip(tpu_info.ChipVersion.TPU_7X, 1)
    assert info.vmem_capacity_bytes == expected.vmem_capacity_bytes == 64 * 2**20
    assert info.chip_version is tpu_info.ChipVersion.TPU_7X


# ---------------------------------------------------------------- Inductor's Pallas backend

def test_compile_with_inductor_routes_tpu_graphs_to_the_tpu_compiler(monkeypatch):
    """torch.compile(backend="inductor") hands tpu graphs to our compiler
    (compile/default_backend.py): Inductor's code generation never runs."""
    import torch._inductor.compile_fx as compile_fx

    def refuse(*a, **k):
        raise AssertionError("Inductor compiled a tpu graph")

    monkeypatch.setattr(compile_fx, "compile_fx", refuse)
    torch._dynamo.reset()
    x = torch.randn(8, 16)
    out = torch.compile(lambda t: (t * 2).sin(), backend="inductor")(x.to("tpu"))
    assert out.device.type == "tpu"
    torch.testing.assert_close(out.cpu(), (x * 2).sin())


def test_inductor_pallas_code_reaches_the_registry(run_python):
    """Inductor's own Pallas code (its compile_fx called directly, bypassing
    the routing above) registers its Mosaic module through
    tpu_torch_pallas.register_custom_kernel, which refuses it on this plugin
    naming the plugin. In a subprocess: Inductor's code creates a JAX client."""
    r = run_python("""
        import torch, torch_tpu
        import torch._inductor.compile_fx as cfx
        f = torch.compile(lambda x, y: (x * 2 + y).sin(), backend=lambda gm, ins: cfx.compile_fx(gm, ins))
        try:
            f(torch.randn(8, 128, device="tpu"), torch.randn(8, 128, device="tpu"))
        except RuntimeError as e:
            print("REFUSED", e)
    """, timeout=600)
    assert "REFUSED kernel 'pallas_" in r.stdout, r.stdout + r.stderr
    assert "the module calls Mosaic" in r.stdout and "the loaded PJRT plugin is 'cpu'" in r.stdout


def _templates(tree):
    """The text of each string literal, f-strings with "X" for their fields."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value
        elif isinstance(node, ast.JoinedStr):
            yield "".join(v.value if isinstance(v, ast.Constant) else "X" for v in node.values)


def _generated_calls(source):
    """(function, positional count, keywords) of each tpu_torch_pallas call
    in the code a generator writes as string literals."""
    found = set()
    for text in _templates(ast.parse(source)):
        for m in re.finditer(r"tpu_torch_pallas\.(\w+)\(", text):
            depth, end = 0, None
            for j in range(m.end() - 1, len(text)):
                depth += {"(": 1, ")": -1}.get(text[j], 0)
                if depth == 0:
                    end = j + 1
                    break
            if end is None:
                continue  # a fragment of a literal that a longer one holds whole
            call = ast.parse(text[m.start():end], mode="eval").body
            found.add((m.group(1), len(call.args), tuple(k.arg for k in call.keywords)))
    return found


def test_inductor_pallas_calls_fit_our_signatures():
    """Every tpu_torch_pallas call that Inductor's Pallas code generator
    writes (torch/_inductor/codegen/pallas.py, read as installed), and the
    module it imports, bind to ours."""
    import importlib
    import inspect

    import torch._inductor.codegen.pallas as inductor_pallas

    source = inspect.getsource(inductor_pallas)
    imports = set(re.findall(r"from (torch_tpu\._internal[\w.]*) import (\w+)", source))
    assert imports == {("torch_tpu._internal.pallas", "tpu_torch_pallas")}, imports
    for module, name in imports:
        assert hasattr(importlib.import_module(module), name)
    calls = _generated_calls(source)
    assert {c[0] for c in calls} == {"call_custom_kernel", "lookup_custom_kernel",
                                     "register_custom_kernel"}, calls
    for name, positional, keywords in calls:
        sig = inspect.signature(getattr(tpu_torch_pallas, name).__wrapped__)
        sig.bind(*range(positional), **{k: None for k in keywords})
    keywords = {k for name, _, kws in calls if name == "call_custom_kernel" for k in kws}
    assert keywords == {"inputs", "output_shapes", "donate_argnums", "input_output_aliases"}
