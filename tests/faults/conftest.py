"""The fault suite: each fault runs in a subprocess of its own, under a
timeout and with a private cache folder, so that a crash (a signal) or a hang
is a test failure instead of the end of the run. CI runs the fast slice
(`python3 -m pytest tests/faults`); `make test-faults-full` runs the long
trials too (`-m faults_full`)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

WORKERS = Path(__file__).parent / "workers"
sys.path.insert(0, str(WORKERS))  # the tests share the workers' helpers


def pytest_configure(config):
    config.addinivalue_line("markers", "faults_full: long fault trials (make test-faults-full)")


def pytest_collection_modifyitems(config, items):
    if "faults_full" in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="long fault trials: run `make test-faults-full`")
    for item in items:
        if "faults_full" in item.keywords:
            item.add_marker(skip)


class Fault:
    """run(worker, *args, env=..., timeout=...) runs tests/faults/workers/<worker>.py
    (or `code` given with python=) in a fresh interpreter with the cache folder
    `self.cache`; it fails the test on a hang or a death by signal."""

    def __init__(self, tmp_path):
        self.cache = str(tmp_path / "cache")
        self.tmp = tmp_path

    def env(self, **overrides):
        env = dict(os.environ, TORCH_TPU_CACHE_DIR=self.cache,
                   PYTHONPATH=os.pathsep.join([str(WORKERS)] + sys.path))
        for k, v in overrides.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = str(v)
        return env

    def start(self, worker, *args, **env):
        return subprocess.Popen([sys.executable, str(WORKERS / f"{worker}.py"), *map(str, args)],
                                env=self.env(**env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, cwd=str(self.tmp))

    def run(self, worker=None, *args, code=None, timeout=240, expect_ok=True, **env):
        cmd = [sys.executable, "-c", code] if code else [sys.executable, str(WORKERS / f"{worker}.py"),
                                                        *map(str, args)]
        try:
            r = subprocess.run(cmd, env=self.env(**env), capture_output=True, text=True,
                               timeout=timeout, cwd=str(self.tmp))
        except subprocess.TimeoutExpired as e:
            pytest.fail(f"hang: {worker or 'code'} {args} did not finish in {timeout} s\n"
                        f"{(e.stdout or '')[-2000:]}\n{(e.stderr or '')[-2000:]}")
        assert r.returncode >= 0, (f"crash: killed by signal {-r.returncode}\n"
                                   f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
        if expect_ok:
            assert r.returncode == 0, f"{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        return r

    @staticmethod
    def summary(r):
        """The last stdout line of a worker: its JSON summary."""
        return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture
def fault(tmp_path):
    return Fault(tmp_path)
