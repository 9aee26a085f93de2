"""The facts docs/dynamic_shapes.md builds on: the loaded plugin compiles and
runs StableHLO bounded dynamism (stablehlo.set_dimension_size on a padded
buffer, the true size a program argument), one program serves every size up to
the bound, and XLA masks the padding itself. The modules go through our own
runtime (stablehlo_op embeds them into our program). Padding rows hold NaN, so
a result that read one would show it."""
import itertools

import pytest
import torch

import torch_tpu

BOUND = 128
SIZES = (1, 37, BOUND)
DYN = f"tensor<?x64xf32, #stablehlo.bounds<{BOUND}, ?>>"
_ids = itertools.count()


def module(body, out):
    return f"""module {{
  func.func @main(%x: tensor<{BOUND}x64xf32>, %n: tensor<i32>) -> {out} {{
    %d = stablehlo.set_dimension_size %x, %n, dim = 0 : (tensor<{BOUND}x64xf32>, tensor<i32>) -> {DYN}
{body}
  }}
}}"""


# name -> (module text, reference on the n valid rows, bit-equal to the
# exact-size program on this plugin: see the note's measurements)
CASES = {
    "sum": (module(f"""    %z = stablehlo.constant dense<0.0> : tensor<f32>
    %s = stablehlo.reduce(%d init: %z) applies stablehlo.add across dimensions = [0] : ({DYN}, tensor<f32>) -> tensor<64xf32>
    return %s : tensor<64xf32>""", "tensor<64xf32>"), lambda x: x.sum(0), False),
    "max": (module(f"""    %z = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %s = stablehlo.reduce(%d init: %z) applies stablehlo.maximum across dimensions = [0] : ({DYN}, tensor<f32>) -> tensor<64xf32>
    return %s : tensor<64xf32>""", "tensor<64xf32>"), lambda x: x.amax(0), True),
    "contract": (module(f"""    %m = stablehlo.dot_general %d, %d, contracting_dims = [0] x [0] : ({DYN}, {DYN}) -> tensor<64x64xf32>
    return %m : tensor<64x64xf32>""", "tensor<64x64xf32>"), lambda x: x.T @ x, True),
    # A dynamic result made static again: the padded buffer comes back.
    "softmax": (module(f"""    %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %mx = stablehlo.reduce(%d init: %ninf) applies stablehlo.maximum across dimensions = [0] : ({DYN}, tensor<f32>) -> tensor<64xf32>
    %mb = stablehlo.broadcast_in_dim %mx, dims = [1] : (tensor<64xf32>) -> {DYN}
    %sh = stablehlo.subtract %d, %mb : {DYN}
    %e = stablehlo.exponential %sh : {DYN}
    %z = stablehlo.constant dense<0.0> : tensor<f32>
    %s = stablehlo.reduce(%e init: %z) applies stablehlo.add across dimensions = [0] : ({DYN}, tensor<f32>) -> tensor<64xf32>
    %sb = stablehlo.broadcast_in_dim %s, dims = [1] : (tensor<64xf32>) -> {DYN}
    %r = stablehlo.divide %e, %sb : {DYN}
    %bound = stablehlo.constant dense<{BOUND}> : tensor<i32>
    %st = stablehlo.set_dimension_size %r, %bound, dim = 0 : ({DYN}, tensor<i32>) -> tensor<{BOUND}x64xf32>
    return %st : tensor<{BOUND}x64xf32>""", f"tensor<{BOUND}x64xf32>"), lambda x: x.softmax(0), False),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_bounded_program_serves_every_size(name, tpu):
    text, ref, bit_equal = CASES[name]
    op = torch_tpu.stablehlo_op(f"bd{next(_ids)}::{name}", text)
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(n, 64, generator=g) for n in SIZES]
    padded = []
    for x in xs:
        p = torch.full((BOUND, 64), float("nan"))
        p[: x.shape[0]] = x
        padded.append(p.to(tpu))
    with torch_tpu.eager_mode("strict"):
        op(padded[0], torch.tensor(1, dtype=torch.int32).to(tpu)).cpu()  # compiles (or loads)
        misses = torch_tpu.metrics()["cache_misses"]
        outs = [op(p, torch.tensor(x.shape[0], dtype=torch.int32).to(tpu)).cpu()
                for p, x in zip(padded, xs)]
        assert torch_tpu.metrics()["cache_misses"] == misses  # no new program for any size
        for x, out in zip(xs, outs):
            n = x.shape[0]
            if out.shape[0] == BOUND and out.dim() == 2:
                out = out[:n]
            torch.testing.assert_close(out, ref(x.double()).float(), rtol=1e-5, atol=1e-5)
            if bit_equal:
                # Against our exact-shape program: kept static (a padded
                # contraction sums in another order, docs/dynamic_shapes.md).
                exact = torch_tpu.dynamic.mark_static(x, 0).to(tpu)
                assert torch.equal(out, ref(exact).cpu()), f"{name}, n={n}"
