"""Collectives inside captured programs (torch_tpu.program_collectives), on
two processes: workers/program_collectives.py checks each against CPU
tensors."""
import torch_tpu

from _launch import check_all_ok, launch


def test_program_collectives_two_ranks(tmp_path):
    if torch_tpu.ffi.platform() != "Host":
        import pytest
        pytest.skip("in-program collectives run on XLA's CPU plugin only (docs/distributed.md)")
    runs = launch("program_collectives.py", 2, tmp_path=tmp_path)
    check_all_ok(runs)
    for r in runs:
        failed = [k for k, v in r["data"].items() if not v]
        assert not failed, f"rank {r['rank']}: {failed}\n{r['output'][-3000:]}"
