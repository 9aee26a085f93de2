import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))


def pytest_configure(config):
    config.addinivalue_line("markers", "dist4: 4-process tests (make test-dist4)")


def pytest_collection_modifyitems(config, items):
    # 4-process runs are slow on small machines: only with `-m dist4`
    # (make test-dist4).
    if "dist4" in (config.getoption("-m") or ""):
        return
    import pytest
    skip = pytest.mark.skip(reason="4-process test: run `make test-dist4`")
    for item in items:
        if "dist4" in item.keywords:
            item.add_marker(skip)
