"""Every tpu_dist collective, 2 processes, against Gloo on CPU tensors (see
workers/collectives.py). One launch runs all checks; each is its own test."""
import pytest

from _launch import check_all_ok, launch

_runs = {}


def _results(nprocs):
    if nprocs not in _runs:
        runs = launch("collectives.py", nprocs, wall_s=300)
        check_all_ok(runs)
        _runs[nprocs] = runs
    return _runs[nprocs]


def _labels():
    # The labels are fixed by the worker; run it once to list them.
    return sorted(_results(2)[0]["data"])


def pytest_generate_tests(metafunc):
    if "label" in metafunc.fixturenames:
        metafunc.parametrize("label", _labels())


def _check(label, nprocs):
    for r in _results(nprocs):
        status = r["data"][label]
        if status.startswith("skip:"):
            pytest.skip(status[5:])
        assert status == "ok", f"rank {r['rank']}: {status}"


def test_collective(label):
    _check(label, 2)


@pytest.mark.dist4
def test_collectives_4_processes():
    for label in sorted(_results(4)[0]["data"]):
        for r in _results(4):
            status = r["data"][label]
            assert status == "ok" or status.startswith("skip:"), f"{label} rank {r['rank']}: {status}"
