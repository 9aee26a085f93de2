#!/usr/bin/env bash
# Helion 1.5.1 (HELION_BACKEND=pallas calls torch_tpu._internal) in its own
# virtual environment (.venv-helion): Helion brings scikit-learn and friends that
# the environment torch_tpu is built and tested in does not need. The venv sees
# that environment's packages (torch 2.13.0+cpu, jax 0.10.2, torch_tpu itself)
# through --system-site-packages; the constraints keep torch and JAX there.
# pytest-timeout: Helion's own Pallas suite (make test-helion) runs with its
# per-test timeout.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${HELION_VENV:-.venv-helion}
PYTHON=${PYTHON:-python3}
stamp="$VENV/.installed-$(sha1sum scripts/helion-constraints.txt scripts/install_helion.sh | sha1sum | cut -c1-12)"
[ -f "$stamp" ] && exit 0
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv --system-site-packages "$VENV"
"$VENV/bin/pip" install -q -c scripts/helion-constraints.txt helion==1.5.1 pytest-timeout
"$VENV/bin/python" - <<'PY'
import importlib.metadata as md, jax, torch
assert torch.__version__ == "2.13.0+cpu", torch.__version__
assert jax.__version__ == "0.10.2", jax.__version__
import helion  # noqa: F401
print("Helion", md.version("helion"), "with torch", torch.__version__, "and JAX", jax.__version__,
      "in", __import__("sys").prefix)
PY
rm -f "$VENV"/.installed-*
touch "$stamp"
