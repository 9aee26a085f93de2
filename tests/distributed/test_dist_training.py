"""DDP, FSDP2 and DTensor on tpu with 2 processes against single-process runs."""
import pytest

from _launch import check_all_ok, launch


def test_ddp_mlp_matches_single_process():
    runs = launch("ddp_mlp.py", 2)
    check_all_ok(runs)
    for r in runs:
        assert r["data"]["replicas_identical"]
        assert r["data"]["max_diff"] < 1e-5, r["data"]


def test_fsdp2_gpt_matches_single_process():
    runs = launch("fsdp2_gpt.py", 2)
    check_all_ok(runs)
    for r in runs:
        assert r["data"]["max_diff"] < 1e-5, r["data"]


def test_dtensor_redistribute_and_tensor_parallel():
    runs = launch("dtensor_tp.py", 2)
    check_all_ok(runs)
    for r in runs:
        failed = [k for k, ok in r["data"].items() if not ok]
        assert not failed, f"rank {r['rank']}: {failed}"


@pytest.mark.dist4
def test_ddp_mlp_4_processes():
    runs = launch("ddp_mlp.py", 4)
    check_all_ok(runs)
    for r in runs:
        assert r["data"]["replicas_identical"] and r["data"]["max_diff"] < 1e-5, r["data"]


@pytest.mark.dist4
def test_fsdp2_gpt_4_processes():
    runs = launch("fsdp2_gpt.py", 4)
    check_all_ok(runs)
    for r in runs:
        assert r["data"]["max_diff"] < 1e-5, r["data"]
