"""Shared fixtures for the torch_tpu test suite."""
import os
import subprocess
import sys
import textwrap

# The suite keeps its own persistent executable cache, apart from the user's.
# Entries are keyed by the full program text and the plugin, so one left by
# an earlier run (or an older version) can only be the same executable; tests
# that count compilations use fresh folders of their own.
os.environ.setdefault("TORCH_TPU_CACHE_DIR",
                      os.path.join(os.path.expanduser("~"), ".cache", "torch_tpu_tests"))

# The CPU plugin gets 1 device unless asked for more (TORCH_TPU_CPU_DEVICES);
# the suite asks for 4, in this process and in every subprocess it starts (they
# inherit the environment), so that the tests of tpu:1..3 (test_multi_device,
# device guards, cross-device errors, copies between devices) run rather than
# skip. Set here, before torch (which autoloads torch_tpu) creates the client,
# and over a value from the shell, which would skip them. Tests of the default
# and of other counts start their own interpreters (test_device.py).
os.environ["TORCH_TPU_CPU_DEVICES"] = "4"

import pytest
import torch
import torch_tpu


@pytest.fixture
def tpu():
    """The default tpu device."""
    return torch.device("tpu:0")


@pytest.fixture
def fresh_dynamo():
    """Dynamo's and the tpu backend's caches emptied around a test, so that
    each one compiles (and counts its captures) afresh."""
    from torch_tpu import dynamo as tpu_dynamo

    torch._dynamo.reset()
    tpu_dynamo.reset()
    yield
    torch._dynamo.reset()


@pytest.fixture
def require_ops():
    """require_ops("aten::fill.Scalar", ...) skips the test while a lowering
    it depends on (being written by someone else) is not registered yet."""

    def check(*names):
        have = set(torch_tpu.lowered_ops())
        missing = [n for n in names if n not in have]
        if missing:
            pytest.skip(f"lowering not registered yet: {', '.join(missing)}")

    return check


@pytest.fixture
def run_python():
    """run_python(code, **env) runs `code` in a fresh interpreter (so that
    environment variables read once at start-up take effect) and returns the
    CompletedProcess; env values of None remove the variable."""

    def run(code, timeout=180, **env_overrides):
        env = dict(os.environ)
        for k, v in env_overrides.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        return subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            capture_output=True, text=True, timeout=timeout, env=env, cwd="/tmp",
        )

    return run


_FIRST_USES = """
import torch, torch_tpu
print("imported")
for f in (lambda: torch.tensor([1.0]).to("tpu"), lambda: torch.empty(2, device="tpu"),
          lambda: torch_tpu.platform()):
    try:
        f()
        print("NO ERROR")
    except RuntimeError as e:
        print("RuntimeError:", e)
print("available", torch.tpu.is_available(), torch.tpu.device_count())
"""


@pytest.fixture
def start_failure(run_python):
    """start_failure(**env): in a fresh interpreter with `env`, the runtime
    cannot start: importing still works, each of three first uses of `tpu`
    raises RuntimeError, and is_available() is False. Returns the three
    errors' lines."""

    def run(**env):
        r = run_python(_FIRST_USES, **env)
        assert r.returncode == 0, r.stderr[-3000:]
        lines = r.stdout.strip().splitlines()
        assert lines[0] == "imported"
        errors = [l for l in lines if l.startswith("RuntimeError:")]
        assert len(errors) == 3, r.stdout
        assert lines[-1] == "available False 0"
        return errors

    return run


# The op and module suites run in every eager mode: each of their tests is
# parametrized with the mode it runs under (strict, debug, defer_and_fuse).
EAGER_MODES = ("strict", "debug", "defer_and_fuse")
MODE_PARAMETRIZED_MODULES = {
    "test_attention", "test_bad_inputs", "test_batch_group_norm", "test_beyond_core_ops", "test_convolution",
    "test_ctc_loss", "test_elementwise", "test_float8", "test_foreach", "test_histogram", "test_igamma", "test_indexing_shape",
    "test_linalg", "test_matmul", "test_misc_ops", "test_model_ops", "test_normalization_loss", "test_pooling",
    "test_reduction", "test_sampling", "test_scalar_fit", "test_sort", "test_special", "test_special_bessel", "test_special_polynomials",
    "test_training", "test_transformer_fast_path", "test_upsample_padding", "test_view_copy", "test_views_storage",
}


def pytest_generate_tests(metafunc):
    module = metafunc.module.__name__.rsplit(".", 1)[-1]
    if module in MODE_PARAMETRIZED_MODULES:
        # A test may name `eager` to read the mode it runs under.
        if "eager" not in metafunc.fixturenames:
            metafunc.fixturenames.append("eager")
        metafunc.parametrize("eager", EAGER_MODES, indirect=True)


@pytest.fixture
def eager(request):
    """Runs the test under the eager mode it is parametrized with."""
    with torch_tpu.eager_mode(request.param):
        yield request.param
