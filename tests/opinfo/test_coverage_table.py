"""docs/coverage.md must match the registry (regenerate: `make coverage-table`)."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import coverage_table  # noqa: E402


def test_coverage_table_is_current():
    # Both parts: Core ATen and every operator with a CPU kernel.
    with open(coverage_table.OUT) as f:
        current = f.read()
    assert current == coverage_table.render(), (
        "docs/coverage.md is stale (the lowering registry or torch changed): "
        "run `python3 scripts/coverage_table.py --write` and commit the result")


def test_render_is_deterministic():
    text = coverage_table.render()
    assert text == coverage_table.render()
    # An object's repr would change from run to run.
    assert " at 0x" not in text and "<" not in text.replace("<<=", "")


def test_every_core_op_is_classified():
    rows = coverage_table.rows()
    assert len(rows) > 100, "torch.Tag.core found too few operators"
    assert {k for _, k, _ in rows} <= set(coverage_table.ORDER)


def test_every_cpu_op_is_classified_and_not_handled_ones_have_a_reason():
    rows = coverage_table.rows2()
    names = [n for n, _, _, _ in rows]
    assert names == sorted(set(names))
    assert len(rows) > 1500, "too few operators with a CPU kernel"
    # Part 2 holds every Core ATen op but the CompositeImplicitAutograd ones.
    core = {n for n, k, _ in coverage_table.rows() if k not in ("decomposed", "metadata")}
    assert core <= set(names)
    assert {k for _, k, _, _ in rows} == set(coverage_table.ORDER2)
    for name, kind, reached, how in rows:
        assert reached, name
        if kind in ("fallback-only", "missing"):
            assert how, name
            assert (kind == "missing") == any(how.endswith(r) for r in coverage_table.NO_FALLBACK), name


def test_tables_are_sorted_and_every_reason_is_used():
    for table in (coverage_table.REASONS, coverage_table.REACHED_FROM, coverage_table.CALLS):
        assert list(table) == sorted(table)
    bases = {coverage_table._base(n) for n, k, _, _ in coverage_table.rows2()
             if k in ("fallback-only", "missing")}
    for key in coverage_table.REASONS:
        if key.endswith("*"):
            assert any(b.startswith(key[:-1]) for b in bases), f"REASONS[{key!r}] matches no unhandled op"
        else:
            assert key in bases, f"REASONS[{key!r}]: the op is handled now (or gone); drop the entry"


def test_user_visible_gaps_are_listed_under_their_module():
    by_name = {n: (k, r) for n, k, r, _ in coverage_table.rows2()}
    for name, area in [("aten::_linalg_svd", "torch.linalg"), ("aten::segment_reduce", "torch / Tensor"),
                       ("aten::rrelu_with_noise.out", "torch.nn.functional")]:
        kind, reached = by_name[name]
        if kind not in ("fallback-only", "missing"):
            pytest.skip(f"{name} is handled now; pick another unhandled op of {area}")
        assert coverage_table.area(reached) == area, (name, reached)


def test_fallback_only_runs_on_the_fallback_and_missing_does_not(tpu, run_python):
    by_name = {n: k for n, k, _, _ in coverage_table.rows2()}
    assert by_name["aten::quantize_per_tensor"] == "missing"
    if by_name["aten::linalg_matrix_exp"] != "fallback-only":
        pytest.skip("aten::linalg_matrix_exp is lowered now; pick another fallback-only op")
    r = run_python(
        """
        import warnings
        import torch, torch_tpu
        warnings.simplefilter("ignore")
        m = torch.linspace(-1, 1, 9).reshape(3, 3)
        torch.testing.assert_close(torch.linalg.matrix_exp(m.to("tpu")).cpu(), torch.linalg.matrix_exp(m))
        x = torch.linspace(-3, 3, 11)
        try:
            torch.quantize_per_tensor(x.to("tpu"), 0.1, 0, torch.qint8)
            print("quantized on tpu")
        except (NotImplementedError, RuntimeError) as e:
            print("refused:", type(e).__name__)
        """,
        TORCH_TPU_CPU_FALLBACK="1",
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().startswith("refused:"), r.stdout
