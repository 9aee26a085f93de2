#!/usr/bin/env bash
# TorchTitan (and the triton it imports) in a virtual environment that sees
# the system's packages (torch, torch_tpu's dependencies) but keeps its own
# pins to itself: torchtitan 0.3.0 would move fsspec and huggingface_hub down
# under transformers. torch stays the installed CPU build (constraint file),
# never a CUDA one. Skips what is already there.
set -euo pipefail
VENV="${TITAN_VENV:-$HOME/.cache/torch_tpu/venv-titan}"
[ -x "$VENV/bin/python" ] || python3 -m venv --system-site-packages "$VENV"
if "$VENV/bin/python" -c "import torchtitan, triton" 2>/dev/null; then exit 0; fi
constraints="$(mktemp)"
trap 'rm -f "$constraints"' EXIT
python3 -c "import torch; print('torch==' + torch.__version__)" > "$constraints"
"$VENV/bin/python" -m pip install -q -c "$constraints" torchtitan==0.3.0 triton==3.9.0
