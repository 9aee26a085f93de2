"""torchrun as is, device choice per rank, and the reported collective path."""
import subprocess
import sys

import torch
import torch_tpu

from _launch import WORKERS, free_port


def test_collective_path_is_reported():
    p = torch_tpu.distributed.collective_path()
    assert p["path"] in ("pjrt", "host_gloo")
    assert p["reason"]
    if p["platform"] == "cpu":
        assert p["path"] == "host_gloo"


def test_tpu_dist_is_registered_for_tpu_and_cpu():
    import torch.distributed as dist
    assert "tpu_dist" in dist.Backend.backend_list
    assert set(dist.Backend.backend_capability["tpu_dist"]) == {"tpu", "cpu"}


def test_torchrun_with_local_rank_and_tpu0_devices():
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
           f"--master_port={free_port()}", str(WORKERS / "torchrun_devices.py")]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    for rank in range(2):
        assert f"rank {rank} ok" in out.stdout, out.stdout[-3000:]
