"""docs/coverage.md must match the registry (regenerate: `make coverage-table`)."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import coverage_table  # noqa: E402


def test_coverage_table_is_current():
    with open(coverage_table.OUT) as f:
        current = f.read()
    assert current == coverage_table.render(), (
        "docs/coverage.md is stale (the lowering registry or torch changed): "
        "run `python3 scripts/coverage_table.py --write` and commit the result")


def test_every_core_op_is_classified():
    rows = coverage_table.rows()
    assert len(rows) > 100, "torch.Tag.core found too few operators"
    assert {k for _, k, _ in rows} <= set(coverage_table.ORDER)
