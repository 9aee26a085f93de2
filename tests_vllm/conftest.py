"""Shared by the vLLM-on-tpu tests (run with .venv-vllm's python: `make test-vllm`).

Each vLLM engine runs in its own process (run_llm.py), as vLLM expects one per
process; the references (HF generate() on the CPU) run here."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tiny_models  # noqa: E402

VOCAB = 384
BASE_LLM = {"dtype": "float32", "max_model_len": 256, "kv_cache_memory_bytes": 16 << 20, "seed": 0}


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: beyond the CI slice (make test-vllm runs it)")


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("vllm_models"))
    return lambda arch: tiny_models.build(arch, root)


# vLLM's own CPU backend in the same venv: the plugin disabled.
VLLM_CPU = {"VLLM_PLUGINS": ""}


def run_llm(model, prompts, sampling, timeout=600, env=None, **spec):
    """vLLM's tokens (and metrics) for token-id prompts, from a fresh process
    (`env` adds to its environment: VLLM_CPU runs vllm-cpu instead)."""
    llm = {**BASE_LLM, **spec.pop("llm", {})}
    spec = {"model": model, "llm": llm, "prompts": prompts, "sampling": sampling, **spec}
    got, log = run_script("run_llm.py", spec, timeout, env)
    got["log"] = log
    return got


def run_script(script, spec, timeout=600, env=None):
    """The JSON a script of this folder prints last for `spec` in a fresh
    process, and its log."""
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", **(env or {})}
    r = subprocess.run([sys.executable, os.path.join(HERE, script), json.dumps(spec)],
                       capture_output=True, text=True, timeout=timeout, env=env)
    if r.returncode != 0:
        raise AssertionError(f"{script} failed ({r.returncode}):\n{r.stderr[-4000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stdout + r.stderr   # vLLM logs to stdout


def greedy(max_tokens):
    return {"temperature": 0, "max_tokens": max_tokens, "ignore_eos": True}
