"""Shared by the Ray Train tests (run with .venv-ray's python: `make test-ray`).

Each Ray run is examples/ray_train.py in its own process: it starts a local Ray
(127.0.0.1, no dashboard), trains with a TorchTrainer and stops Ray before it
exits; its last line is a JSON summary."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "ray_train.py")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: beyond the CI slice (make test-ray runs it)")


def example_module():
    """examples/ray_train.py as a module (its model, batch and training loop)."""
    spec = importlib.util.spec_from_file_location("ray_train_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_example(*args, timeout=600):
    """The example's JSON summary; its output when it fails."""
    r = subprocess.run([sys.executable, EXAMPLE, *args], capture_output=True, text=True, timeout=timeout,
                       cwd="/tmp")
    if r.returncode != 0:
        raise AssertionError(f"ray_train.py {' '.join(args)} failed ({r.returncode}):\n"
                             f"{r.stdout[-3000:]}\n{r.stderr[-5000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def cpu_losses():
    """One process training on the whole batch on the CPU: the reference."""
    import torch

    ex = example_module()
    x, y = ex.make_batch()
    return ex.train(ex.make_model(), x, y, torch.device("cpu"))
