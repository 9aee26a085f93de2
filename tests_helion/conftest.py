"""Helion on tpu: Helion 1.5.1 (.venv-helion, scripts/install_helion.sh) with
HELION_BACKEND=pallas and no interpret flag, so its launcher calls
torch_tpu._internal. Run with that venv's python (make test-helion-fast).

Helion's examples and its archived launcher come from Helion's source at a
2026-08 commit (../shared/third_party/helion-ef091f41.tar.gz, or
HELION_ARCHIVE), unpacked once per session into a temporary folder; the
wheel ships neither."""
import os
import tarfile
from pathlib import Path

os.environ["HELION_BACKEND"] = "pallas"
os.environ.pop("HELION_PALLAS_INTERPRET", None)
# Helion's default configuration, not an autotuning search (minutes per kernel here).
os.environ.setdefault("HELION_AUTOTUNE_EFFORT", "none")

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
ARCHIVE = Path(os.environ.get("HELION_ARCHIVE",
                              REPO.parent / "shared" / "third_party" / "helion-ef091f41.tar.gz"))


@pytest.fixture(scope="session")
def helion_source(tmp_path_factory) -> Path:
    """The unpacked archive's root (helion/, examples/, test/)."""
    if not ARCHIVE.is_file():
        pytest.fail(f"Helion's source archive is not at {ARCHIVE} (set HELION_ARCHIVE)")
    folder = tmp_path_factory.mktemp("helion")
    with tarfile.open(ARCHIVE) as tar:
        tar.extractall(folder, filter="data")
    (root,) = folder.iterdir()
    return root
