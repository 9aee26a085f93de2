#!/usr/bin/env bash
# Ray Train for torch_tpu (ray.train.torch with TorchConfig(backend="tpu_dist")),
# in its own virtual environment (.venv-ray): Ray brings its own pins (grpcio,
# protobuf, pyarrow...) that must not move the environment torch_tpu is built
# and tested in. The venv sees that environment's packages (torch 2.13.0+cpu,
# torch_tpu's editable install) through --system-site-packages.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${RAY_VENV:-.venv-ray}
PYTHON=${PYTHON:-python3}
stamp="$VENV/.installed-$(sha1sum scripts/ray-constraints.txt scripts/install_ray.sh | sha1sum | cut -c1-12)"
[ -f "$stamp" ] && exit 0
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv --system-site-packages "$VENV"
# The version whose call sites torch_tpu._loader mirrors (tests/ray/test_ray_contract.py).
"$VENV/bin/pip" install -q -c scripts/ray-constraints.txt "ray[train]==2.60.0"
"$VENV/bin/python" - <<'PY'
import importlib.metadata as md, sys, torch
assert torch.__version__ == "2.13.0+cpu", torch.__version__
import ray.train.torch  # noqa: F401
print("Ray", md.version("ray"), "with torch", torch.__version__, "in", sys.prefix)
PY
rm -f "$VENV"/.installed-*
touch "$stamp"
