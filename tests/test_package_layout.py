"""python/torch_tpu by concern: no import circle among its modules, and the
import paths users write still reach the modules that do the work."""
import ast
import os
import subprocess
import sys
import types

import torch
import torch_tpu

PACKAGE_ROOT = os.path.dirname(os.path.abspath(torch_tpu.__file__))


def _modules():
    """{dotted name: path} for every .py file of the package."""
    found = {}
    parent = os.path.dirname(PACKAGE_ROOT)
    for folder, _, files in os.walk(PACKAGE_ROOT):
        for f in files:
            if not f.endswith(".py"):
                continue
            path = os.path.join(folder, f)
            parts = os.path.relpath(path, parent)[:-3].split(os.sep)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _imports(name, path, modules):
    """The package's modules that `name` imports, at module level or inside
    functions (a lazy import closes a circle all the same)."""
    is_package = os.path.basename(path) == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(open(path).read(), path)):
        if isinstance(node, ast.Import):
            targets.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for a in node.names:
                # `from . import _C` names a module (here an extension), not the package.
                submodule = f"{source}.{a.name}"
                is_module = submodule in modules or isinstance(
                    getattr(sys.modules.get(source), a.name, None), types.ModuleType)
                targets.add(submodule if is_module else source)
    return {t for t in targets if t in modules and t != name}


def _cycle(graph):
    """One import circle as a list of modules, or None."""
    state = {}

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt, stack)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [])
            if found:
                return found
    return None


def test_no_import_circle_in_the_package():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    # The walk sees the package: the device API and its memory API among others.
    assert "torch_tpu.device.memory" in graph["torch_tpu.device"]
    cycle = _cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_cycle_finder_finds_a_circle():
    # The check above passes only if this one can fail.
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_public_import_paths():
    from torch_tpu.pallas import jax_op
    from torch_tpu.kernels.jax_op import jax_op as implementation

    assert jax_op is implementation
    assert torch_tpu.stablehlo_op.__module__ == "torch_tpu.kernels.custom_ops"
    # torch_tpu.dynamo is the backend's own module, so settings written there are read.
    assert torch_tpu.dynamo is sys.modules["torch_tpu.compile.dynamo"]
    assert sys.modules["torch_tpu.dynamo"] is torch_tpu.dynamo
    assert callable(torch_tpu.dynamo.compile_stats) and torch_tpu.dynamo.recompile_warn_limit > 0
    assert torch.tpu is torch_tpu.device
    assert torch.tpu.memory is sys.modules["torch_tpu.device.memory"]
    assert torch.tpu.amp is sys.modules["torch.tpu.amp"] is sys.modules["torch_tpu.device.amp"]
    assert torch_tpu.dynamic.padding is not None and torch_tpu.distributed.local_device is not None
    for name in ("set_eager_mode", "eager_mode", "platform", "tolerance", "env_table", "lowered_ops",
                 "dynamic_dims", "metrics"):
        assert callable(getattr(torch_tpu, name)), name


def test_import_paths_in_a_fresh_interpreter():
    # `import torch_tpu.dynamo` and `python -m torch_tpu.validate --help` as a user types them.
    code = "import torch_tpu.dynamo as d, torch_tpu.compile.dynamo as c; assert d is c"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    r = subprocess.run([sys.executable, "-m", "torch_tpu.validate", "--help"], capture_output=True,
                       text=True, timeout=180)
    assert r.returncode == 0 and "--modes" in r.stdout, r.stderr[-2000:]
