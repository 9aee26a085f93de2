"""Helion's examples (add, matmul, softmax, layer norm, attention, cross
entropy) as Helion 1.5.1 runs them on tpu (HELION_BACKEND=pallas, no
interpret flag: its launcher calls torch_tpu._internal), against PyTorch
on the CPU."""
import importlib.metadata
import importlib.util
import math

import pytest
import torch
import torch.nn.functional as F

import torch_tpu

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def example(helion_source):
    """example(name): the module examples/<name>.py, with `helion` the
    installed 1.5.1 (not the archive's)."""
    loaded = {}

    def load(name):
        if name not in loaded:
            spec = importlib.util.spec_from_file_location(f"helion_example_{name}",
                                                          helion_source / "examples" / f"{name}.py")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            loaded[name] = module
        return loaded[name]

    return load


def tpu(*tensors):
    return [t.to("tpu") for t in tensors]


def close(tpu_value, cpu_value, op=""):
    assert tpu_value.device.type == "tpu"
    rtol, atol = torch_tpu.tolerance(cpu_value.dtype, op)
    torch.testing.assert_close(tpu_value.cpu(), cpu_value, rtol=rtol, atol=atol)


def test_helion_is_the_release_and_runs_on_tpu():
    import helion
    from helion.runtime.pallas import launcher

    assert importlib.metadata.version("helion") == "1.5.1" and "site-packages" in helion.__file__
    assert not launcher._pallas_interpret_enabled()


def test_add(example):
    x, y = torch.randn(64, 384), torch.randn(384)  # broadcast
    close(example("add").add(*tpu(x, y)), x + y)


def test_matmul_and_its_direct_calls(example, monkeypatch):
    """The second call takes Helion 1.5.1's direct path: its launcher calls
    call_custom_kernel itself, with device_assignment."""
    from torch_tpu._internal.pallas import tpu_torch_pallas

    seen = []
    real = tpu_torch_pallas.call_custom_kernel

    def spy(*args, **kwargs):
        seen.append(sorted(kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(tpu_torch_pallas, "call_custom_kernel", spy)
    a, b = torch.randn(128, 256), torch.randn(256, 128)
    matmul = example("matmul").matmul
    for _ in range(3):
        close(matmul(*tpu(a, b)), a @ b, "aten::mm")
    # The first call went through JaxCallable, which calls the registry itself.
    direct = ["device_assignment", "donate_argnums", "inputs", "output_shapes"]
    assert seen == [direct, direct], seen


def test_softmax(example):
    x = torch.randn(32, 256)
    softmax = example("softmax")
    for kernel in (softmax.softmax, softmax.softmax_decomposed, softmax.softmax_two_pass):
        close(kernel(*tpu(x)), torch.softmax(x, dim=1))


def test_layer_norm(example):
    x, w, b = torch.randn(32, 256), torch.randn(256), torch.randn(256)
    out, mean, rstd = example("layer_norm").layer_norm_fwd(x.to("tpu"), [256], *tpu(w, b), 1e-5)
    close(out, F.layer_norm(x, [256], w, b, 1e-5))
    close(mean, x.mean(-1))
    close(rstd, torch.rsqrt(x.var(-1, unbiased=False) + 1e-5))


def test_attention(example):
    q, k, v = (torch.randn(2, 4, 128, 64) for _ in range(3))
    out, lse = example("attention").attention(*tpu(q, k, v))
    close(out, F.scaled_dot_product_attention(q, k, v), "aten::bmm")
    scores = q @ k.transpose(-1, -2) / math.sqrt(64)
    close(lse, torch.logsumexp(scores, -1) / math.log(2), "aten::bmm")


def test_cross_entropy(example):
    # Helion's Pallas backend takes 32-bit integers (as a TPU does).
    logits, labels = torch.randn(64, 512), torch.randint(0, 512, (64,))
    loss = example("cross_entropy").cross_entropy(*tpu(logits, labels.int()))
    close(loss, F.cross_entropy(logits, labels))


def test_the_docs_example(tmp_path):
    """docs/custom_kernels.md's Helion block (marked no-run there: the docs
    examples run without Helion), in Helion's venv, from a file (Helion
    reads a kernel's source)."""
    import re
    import runpy
    import textwrap
    from pathlib import Path

    page = Path(__file__).resolve().parents[1] / "docs" / "custom_kernels.md"
    (block,) = re.findall(r"```python no-run: needs Helion[^\n]*\n(.*?)```", page.read_text(), re.S)
    script = tmp_path / "docs_helion_example.py"
    script.write_text(textwrap.dedent(block))
    runpy.run_path(str(script), run_name="__main__")
