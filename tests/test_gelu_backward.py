"""GELU's exact backward in f32 as one fraction over erf's denominator
(lowering/activation.cpp, normal_cdf_plus): its values against the CPU's and a
float64 reference, edge values included, eager and compiled; and the emitted
derivative ending in its division, the form XLA:CPU evaluates in one pass when
the result has two consumers (the lowering's comment says why)."""
import re

import pytest
import torch
import torch_tpu  # noqa: F401

aten = torch.ops.aten

EDGES = [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 5.6, -5.6, 1e-30, -0.75, 40.0, -40.0, 3.9, -3.9]


def inputs(scale, dtype=torch.float32):
    g = torch.Generator().manual_seed(int(scale * 10))
    x = torch.randn(256, 512, generator=g) * scale
    x.view(-1)[: len(EDGES)] = torch.tensor(EDGES)
    return torch.randn(256, 512, generator=g).to(dtype), x.to(dtype)


def error_per_grad(got, g, x):
    """Largest |got - exact| / |g| over finite exact values (the derivative is <= 1.13)."""
    exact = aten.gelu_backward(g.double(), x.double())
    finite = torch.isfinite(exact) & (g != 0)
    return ((got.double() - exact).abs() / g.double().abs())[finite].max().item()


@pytest.mark.parametrize("scale", [0.5, 3.0, 10.0])
def test_values_match_the_cpu_eager_and_compiled(scale):
    g, x = inputs(scale)
    cpu = aten.gelu_backward(g, x)
    eager = aten.gelu_backward(g.to("tpu"), x.to("tpu")).cpu()
    compiled = torch.compile(lambda g, x: aten.gelu_backward(g, x), backend="tpu")(g.to("tpu"), x.to("tpu")).cpu()
    bound = 2 * error_per_grad(cpu, g, x)
    for got in (eager, compiled):
        torch.testing.assert_close(got, cpu, equal_nan=True)
        assert torch.equal(torch.isnan(got), torch.isnan(cpu))
        assert error_per_grad(got, g, x) <= bound


def test_half_inputs_compute_in_f32_and_round_once():
    g, x = inputs(3.0, torch.bfloat16)
    got = aten.gelu_backward(g.to("tpu"), x.to("tpu")).cpu()
    torch.testing.assert_close(got, aten.gelu_backward(g, x), equal_nan=True)


def test_the_derivative_ends_in_its_division(run_python):
    r = run_python("""
        import torch, torch_tpu
        g, x = torch.randn(64, 32), torch.randn(64, 32)
        got = torch.ops.aten.gelu_backward(g.to("tpu"), x.to("tpu")).cpu()
        torch.testing.assert_close(got, torch.ops.aten.gelu_backward(g, x))
        print("ok")
    """, TORCH_TPU_DUMP_HLO="1", TORCH_TPU_CACHE_DIR=None)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-4000:]
    program = r.stderr[r.stderr.index("0x3ECC422A"):]  # the gelu_backward program (phi's constant)
    divides = re.findall(r'(%v\d+) = "stablehlo.divide"', program)
    assert len(divides) == 1, divides
    # The result is grad times the division itself, not times terms computed after it.
    returned = re.search(r'"func.return"\((%v\d+)\)', program).group(1)
    assert re.search(rf'{returned} = "stablehlo.multiply"\(%v\d+, {divides[0]}\)', program), program[-3000:]
