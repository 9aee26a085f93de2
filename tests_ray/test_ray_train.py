"""Ray Train's TorchTrainer on tpu: 2 workers on tpu_dist, DDP and FSDP2, on a
local Ray posing as a TPU VM of 4 chips (2 per worker, examples/ray_train.py);
each step's loss, averaged over the workers, equals one process on the whole
batch on the CPU."""
import pytest
import torch
import torch_tpu
from conftest import run_example


def check(summary, cpu_losses, model, param):
    rtol, atol = torch_tpu.tolerance(torch.float32)
    torch.testing.assert_close(torch.tensor(summary["averaged"]), torch.tensor(cpu_losses), rtol=rtol, atol=atol)
    workers = summary["workers"]
    assert [w["rank"] for w in workers] == [0, 1]
    for w in workers:
        assert w["backend"] == "tpu_dist" and w["model"] == model and w["param"] == param, w
    if summary["tpu_resources"]:
        # Ray's chips for each worker, seen as tpu:0 and tpu:1: worker 1's
        # tpu:0 is the plugin's device 2.
        assert [w["visible_chips"] for w in workers] == ["0,1", "2,3"]
        assert [w["plugin_device_id"] for w in workers] == [0, 2]
        for w in workers:
            assert w["device_count"] == 2 and w["ray_device"] == "tpu" and w["param_device"] == "tpu:0", w
    else:
        # No TPU resources: Ray's device is the CPU, the workers take tpu:LOCAL_RANK.
        assert [w["param_device"] for w in workers] == ["tpu:0", "tpu:1"]
        assert [w["plugin_device_id"] for w in workers] == [0, 1]
        for w in workers:
            assert w["visible_chips"] is None and w["ray_device"] == "cpu", w


def test_ddp_on_tpu_resources_equals_one_process(cpu_losses):
    check(run_example("--strategy", "ddp"), cpu_losses, "DistributedDataParallel", "Parameter")


@pytest.mark.slow
def test_fsdp2_on_tpu_resources_equals_one_process(cpu_losses):
    check(run_example("--strategy", "fsdp2"), cpu_losses, "FSDPSequential", "DTensor")


@pytest.mark.slow
def test_ray_picks_tpu_dist_for_tpu_resources(cpu_losses):
    summary = run_example("--strategy", "ddp", "--ray-chooses-backend")
    assert summary["backend"] is None
    check(summary, cpu_losses, "DistributedDataParallel", "Parameter")


@pytest.mark.slow
def test_tpu_dist_without_tpu_resources(cpu_losses):
    check(run_example("--strategy", "ddp", "--no-tpu-resources"), cpu_losses, "DistributedDataParallel",
          "Parameter")
