"""The persistent cache of traced jax_op modules: a later process runs a
cached kernel without JAX; the function's fingerprint misses on any change
that could change the traced module, and refuses what it cannot see."""
import functools
import json
import os

import numpy as np
import pytest
import torch

from torch_tpu.kernels.trace_cache import Unsafe, fingerprint

pytest.importorskip("jax", reason="JAX is the optional extra torch_tpu[jax] "
                    "(requirements.txt installs it for the test suite)")

EPS = 1e-6


# ---------------------------------------------------------------- fingerprint

def build(body_const=2.0, closure_value=3.0, default=4.0):
    """A kernel with a body constant, a closure value, a default and a
    global, made afresh so that each part can be changed alone."""
    scope = {"EPS": EPS}
    exec("def make(c):\n"
         "    def kernel(x, d=%r):\n"
         "        return x * %r + c + d + EPS\n"
         "    return kernel\n" % (default, body_const), scope)
    return scope["make"](closure_value)


def test_same_definition_same_fingerprint():
    assert fingerprint(build()) == fingerprint(build())
    # Where a function is defined (file, line) does not matter.
    f, g = build(), build()
    g.__code__ = g.__code__.replace(co_firstlineno=500, co_filename="elsewhere.py")
    assert fingerprint(f) == fingerprint(g)


@pytest.mark.parametrize("change", [dict(body_const=2.5), dict(closure_value=3.5),
                                    dict(default=4.5), dict(closure_value=3)])
def test_any_change_changes_the_fingerprint(change):
    assert fingerprint(build(**change)) != fingerprint(build())


def test_globals_and_called_functions_are_followed():
    scope = {"SCALE": 2.0}
    exec("def helper(x):\n    return x * SCALE\n"
         "def kernel(x):\n    return helper(x) + 1\n", scope)
    before = fingerprint(scope["kernel"])
    scope["SCALE"] = 2.5
    assert fingerprint(scope["kernel"]) != before
    scope["SCALE"] = 2.0
    assert fingerprint(scope["kernel"]) == before
    exec("def helper(x):\n    return x * SCALE * 1\n", scope)  # the callee's code changes
    assert fingerprint(scope["kernel"]) != before


def test_arrays_partials_and_recursion():
    table = np.arange(6, dtype=np.float32)
    f = functools.partial(lambda x, t: x + t, t=table)
    before = fingerprint(f)
    assert fingerprint(functools.partial(lambda x, t: x + t, t=table.copy())) == before
    changed = table.copy()
    changed[3] = 0
    assert fingerprint(functools.partial(lambda x, t: x + t, t=changed)) != before
    assert fingerprint(functools.partial(lambda x, t: x + t, t=table.astype(np.float64))) != before

    scope = {}
    exec("def f(x, n):\n    return x if n == 0 else f(x, n - 1)\n", scope)
    assert fingerprint(scope["f"])  # a recursive global ends


class Config:
    scale = 2.0


@pytest.mark.parametrize("fn,reason", [
    (lambda: (lambda x: x * len(STATE)), "mutable"),
    (lambda: functools.partial(lambda x, c: x * c.scale, c=Config()), "Config object"),
    (lambda: (lambda x: x * Config.scale), "class Config"),
    (lambda: (lambda x: os.path.join(x)), "module 'os'"),
])
def test_what_cannot_be_seen_is_unsafe(fn, reason):
    with pytest.raises(Unsafe, match=reason):
        fingerprint(fn())


STATE = []


def test_a_jitted_function_is_unsafe():
    import jax

    inner = jax.jit(lambda x: x * 2)
    with pytest.raises(Unsafe, match="PjitFunction|jit"):
        fingerprint(lambda x: inner(x))


def test_jax_and_numpy_are_named_not_walked():
    import jax.numpy as jnp

    def kernel(x):
        return jnp.tanh(x) * np.float32(2) + max(1, 2)

    assert fingerprint(kernel) == fingerprint(kernel)


# ---------------------------------------------------------------- across processes

KERNELS = """
    import json, os, sys
    if os.environ.get("NO_JAX"):
        sys.modules["jax"] = None  # as if JAX were not installed
    import torch, torch_tpu
    import torch.nn.functional as F
    from torch_tpu.pallas import jax_op

    BODY = '''
    def body_kernel(x, w):
        import jax
        import jax.numpy as jnp
        return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * w * VALUE
    '''

    def body_kernel(value):  # VALUE becomes a constant of the function's code
        scope = {}
        exec(BODY.replace("VALUE", repr(value)), scope)
        return scope["body_kernel"]

    def closure_kernel(c):
        def closure_kernel(x):
            import jax.numpy as jnp
            return jnp.tanh(x) * c
        return closure_kernel

    torch.manual_seed(0)
    x = torch.randn(4, 8, requires_grad=True)
    w = torch.randn(8, requires_grad=True)

    def run(name, kind, value):
        if kind in ("body", "compiled"):
            op = jax_op(f"cachetest::{name}", body_kernel(value))
            ref = F.rms_norm(x, (8,), w, 1e-6) * value
            gx, gw = torch.autograd.grad(ref.sum(), (x, w))
            xt = x.detach().to("tpu").requires_grad_()
            wt = w.detach().to("tpu").requires_grad_()
            if kind == "compiled":  # the fake implementation reads the cache too
                op = torch.compile(op, backend="tpu", fullgraph=True)
            try:
                y = op(xt, wt)
                y.sum().backward()  # the derived jax.vjp backward, cached too
            except ImportError as e:
                return print(name, "ImportError", e)
            torch.testing.assert_close(y.detach().cpu(), ref.detach())
            torch.testing.assert_close(xt.grad.cpu(), gx)
            torch.testing.assert_close(wt.grad.cpu(), gw)
        else:
            op = jax_op(f"cachetest::{name}", closure_kernel(value))
            try:
                y = op(x.detach().to("tpu"))
            except ImportError as e:
                return print(name, "ImportError", e)
            torch.testing.assert_close(y.cpu(), torch.tanh(x.detach()) * value)
        print(name, "matches")

    for step in json.loads(os.environ["STEPS"]):
        if step == "damage":  # flip one byte of every entry
            d = torch_tpu._C._cache_dir()
            for entry in os.listdir(d):
                if entry.endswith(".exe"):
                    with open(os.path.join(d, entry), "r+b") as f:
                        f.seek(40)
                        b = f.read(1)
                        f.seek(40)
                        f.write(bytes([b[0] ^ 1]))
        else:
            run(*step)
    print("jax imported:", sys.modules.get("jax") is not None)
"""


def test_a_cached_kernel_runs_without_jax(run_python, tmp_path):
    def proc(steps, **env):
        r = run_python(KERNELS, TORCH_TPU_CACHE_DIR=str(tmp_path), STEPS=json.dumps(steps), **env)
        assert r.returncode == 0, r.stderr
        return r.stdout

    first = proc([["body", "body", 2.0], ["closure", "closure", 3.0],
                  ["body_changed", "body", 2.0], ["closure_changed", "closure", 3.0],
                  ["compiled", "compiled", 0.5], ["damaged", "body", 1.0]])
    assert first.count("matches") == 6 and "jax imported: True" in first, first
    # Without JAX: the same kernels, forward and backward, eager and under
    # torch.compile, from the cache, against PyTorch. A changed body constant or closure value misses (and
    # without JAX cannot be traced); so does a damaged entry.
    second = proc([["body", "body", 2.0], ["closure", "closure", 3.0],
                   ["compiled", "compiled", 0.5], ["body_changed", "body", 2.5], ["closure_changed", "closure", 3.5],
                   "damage", ["damaged", "body", 1.0]], NO_JAX="1")
    lines = second.splitlines()
    assert {"body matches", "closure matches", "compiled matches"} <= set(lines), second
    assert "jax imported: False" in lines
    for name in ("body_changed", "closure_changed", "damaged"):
        assert any(line.startswith(f"{name} ImportError") and "holds no trace of it" in line
                   for line in lines), second
    assert "holds no trace of it for inputs (float32[4, 8], float32[8])" in second


# ---------------------------------------------------------------- what an entry is checked against

@pytest.fixture
def stored():
    """A key with an entry in the suite's cache folder, and its text."""
    import uuid

    from torch_tpu.kernels import trace_cache as _trace_cache

    k = f"test entry {uuid.uuid4().hex}"
    text = "module {\n}\n"
    _trace_cache.store(k, text)
    return k, text


def test_entry_of_another_jax_version_misses(stored, monkeypatch):
    from torch_tpu.kernels import trace_cache as _trace_cache

    k, text = stored
    assert _trace_cache.load(k) == text
    real = _trace_cache._version
    monkeypatch.setattr(_trace_cache, "_version", lambda d: "0.0.1" if d == "jaxlib" else real(d))
    assert _trace_cache.load(k) is None


def test_entry_traced_under_other_jax_options_misses(stored):
    import jax

    from torch_tpu.kernels import trace_cache as _trace_cache

    k, text = stored
    with jax.numpy_rank_promotion("raise"):
        assert _trace_cache.load(k) is None
    assert _trace_cache.load(k) == text


def test_signature_platform_and_pallas_choice_are_in_the_key():
    from torch_tpu.kernels import trace_cache as _trace_cache

    sig = [(torch.float32, (4, 8))]
    base = _trace_cache.key("a::b", sig, "cpu", "interpret", "f")
    assert base == _trace_cache.key("a::b", sig, "cpu", "interpret", "f")
    others = [_trace_cache.key("a::c", sig, "cpu", "interpret", "f"),
              _trace_cache.key("a::b", [(torch.float32, (4, 9))], "cpu", "interpret", "f"),
              _trace_cache.key("a::b", [(torch.bfloat16, (4, 8))], "cpu", "interpret", "f"),
              _trace_cache.key("a::b", sig, "tpu", "mosaic", "f"),
              _trace_cache.key("a::b", sig, "cpu", "mosaic", "f"),
              _trace_cache.key("a::b", sig, "cpu", "interpret", "g")]
    assert len({base, *others}) == 7
    assert "stablehlo_current_version" in base  # the plugin the text was checked against
