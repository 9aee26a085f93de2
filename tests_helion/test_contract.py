"""Each call that Helion's Pallas launcher makes into torch_tpu._internal,
read from the launcher's own source (Helion 1.5.1 as installed, and the
archived 2026-08 launcher, which predates `device_assignment` and meshes),
binds to our names and signatures: a change upstream fails here."""
import ast
import importlib
import importlib.util
import inspect
from pathlib import Path

import pytest

from torch_tpu._internal.pallas import pallas as tpu_pallas
from torch_tpu._internal.pallas import tpu_torch_pallas
from torch_tpu._internal.utils import hardware


def _released_launcher() -> Path:
    return Path(importlib.util.find_spec("helion.runtime.pallas.launcher").origin)


@pytest.fixture(params=["1.5.1", "archive"])
def launcher(request, helion_source):
    if request.param == "1.5.1":
        return _released_launcher()
    return helion_source / "helion" / "runtime" / "pallas" / "launcher.py"


def _tree(path):
    return ast.parse(path.read_text(), str(path))


def _imported(tree) -> dict:
    """{name: module} for every `from torch_tpu._internal... import name`."""
    return {a.name: node.module for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torch_tpu.")
            for a in node.names}


# What each name the launcher calls binds to; `callable_cls` is its
# JaxCallable subclass.
_TARGETS = {
    "_get_kernel_invocation_key": tpu_pallas._get_kernel_invocation_key,
    "call_custom_kernel": tpu_torch_pallas.call_custom_kernel.__wrapped__,
    "callable_cls": tpu_pallas.JaxCallable,
    "get_default_pallas_mesh": tpu_pallas.get_default_pallas_mesh,
    "get_tpu_device_name": hardware.get_tpu_device_name,
    "jax_placeholder": tpu_pallas.jax_placeholder,
}


def _calls(tree):
    """(called name, call node) for the calls of _TARGETS' names (as plain
    names or attributes, e.g. tpu_torch_pallas.call_custom_kernel)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name in _TARGETS:
                yield name, node


def test_every_imported_name_exists(launcher):
    imported = _imported(_tree(launcher))
    assert {"JaxCallable", "jax_placeholder", "_get_kernel_invocation_key",
            "tpu_torch_pallas"} <= set(imported), imported
    for name, module in imported.items():
        assert hasattr(importlib.import_module(module), name), f"{module}.{name}"


def test_every_call_binds_to_our_signature(launcher):
    calls = list(_calls(_tree(launcher)))
    assert {n for n, _ in calls} >= {"call_custom_kernel", "callable_cls",
                                     "_get_kernel_invocation_key", "jax_placeholder"}
    for name, node in calls:
        sig = inspect.signature(_TARGETS[name])
        assert not any(isinstance(a, ast.Starred) for a in node.args), ast.unparse(node)
        assert all(k.arg for k in node.keywords), ast.unparse(node)  # no **kwargs
        try:
            sig.bind(*node.args, **{k.arg: k.value for k in node.keywords})
        except TypeError as e:
            pytest.fail(f"{launcher}:{node.lineno}: {ast.unparse(node)} does not bind to "
                        f"{name}{sig}: {e}")


def test_the_subclass_reads_only_attributes_we_set(launcher):
    """Helion subclasses JaxCallable and reads its attributes directly."""
    tree = _tree(launcher)
    (cls,) = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)
              and any(ast.unparse(b) == "JaxCallable" for b in n.bases)]
    own = {s.value for n in ast.walk(cls) if isinstance(n, ast.Assign)
           and any(ast.unparse(t) == "__slots__" for t in n.targets) for s in n.value.elts}
    read = {n.attr for n in ast.walk(cls) if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name) and n.value.id == "self"} - own
    assert {"output_shapes", "kernel_key_to_mlir_fingerprint", "donate_argnums"} <= read, read
    ours = tpu_pallas.JaxCallable(name="k", jit_fn=lambda x: x, trace_key="k")
    missing = sorted(a for a in read if not hasattr(ours, a))
    assert not missing, f"{cls.name} reads {missing}, which our JaxCallable lacks"


def test_released_launcher_accepts_our_device_name():
    """Helion 1.5.1 hands get_tpu_device_name() to Pallas' chip table before
    it traces (an unknown name raises there)."""
    from helion.runtime.pallas import launcher

    launcher._ensure_torch_tpu_cpu_export_info()
    from jax._src.pallas.mosaic import tpu_info

    assert tpu_info.registry["cpu"]().chip_version is tpu_info.ChipVersion.TPU_7X
