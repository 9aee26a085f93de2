"""Ray's own call sites into torch_tpu, called as Ray calls them: a change on
either side (Ray 2.60's names, ours) fails here, not in a training run."""
import inspect
import json
import os
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist
import torch_tpu
import torch_tpu._loader
from ray._private.accelerators.tpu import TPUAcceleratorManager
from ray.air._internal.device_manager import register_custom_torch_dist_backend
from ray.air._internal.device_manager.tpu import TPUTorchDeviceManager
from ray.train.torch import config as ray_torch_config


@pytest.fixture
def load_calls(monkeypatch):
    """The calls that reach torch_tpu._loader.load (which still runs)."""
    calls = []
    real = torch_tpu._loader.load

    def spy():
        calls.append(1)
        return real()

    monkeypatch.setattr(torch_tpu._loader, "load", spy)
    return calls


def test_loader_is_idempotent():
    for _ in range(3):
        assert torch_tpu._loader.load() is None
    assert "TPU_DIST" in dist.Backend._plugins


def test_device_manager_registration_reaches_our_loader(load_calls):
    # ray/air/_internal/device_manager/tpu.py: `import torch_tpu._loader; torch_tpu._loader.load()`
    TPUTorchDeviceManager.register_custom_torch_dist_backend()
    assert load_calls == [1]


def test_tpu_dist_backend_name_reaches_our_loader(load_calls):
    # ray/air/_internal/device_manager/__init__.py dispatches on the backend name we register.
    register_custom_torch_dist_backend(torch_tpu.distributed.BACKEND_NAME)
    assert load_calls == [1]


def test_ray_process_group_setup_runs_tpu_dist(load_calls):
    # ray/train/torch/config.py's own setup, as each worker runs it (a group of one here).
    ray_torch_config._setup_torch_process_group(backend="tpu_dist", world_rank=0, world_size=1,
                                                init_method="tcp://127.0.0.1:0", timeout_s=60)
    try:
        assert load_calls == [1]
        assert dist.get_backend() == "tpu_dist"
        t = torch.arange(4.0, device="tpu")
        dist.all_reduce(t)
        assert torch.equal(t.cpu(), torch.arange(4.0))
    finally:
        dist.destroy_process_group()


def test_ray_picks_our_backend_for_tpu_resources():
    # _TorchBackend.on_start: no backend asked and TPU resources per worker -> "tpu_dist".
    source = inspect.getsource(ray_torch_config._TorchBackend.on_start)
    assert f'backend = "{torch_tpu.distributed.BACKEND_NAME}"' in source
    assert 'resources.get("TPU", 0)' in source


def test_device_manager_devices_are_ours():
    manager = TPUTorchDeviceManager()
    assert manager.is_available()
    (device,) = manager.get_devices()
    assert device.type == "tpu"
    # the device Ray hands prepare_model is this process's current tpu device
    t = torch.ones(2, device=device)
    assert t.device == torch.device("tpu", torch.tpu.current_device())
    assert torch.equal(t.cpu(), torch.ones(2))


SEEN_AFTER_RAY = """
import json, os, torch
from ray._private.accelerators.tpu import TPUAcceleratorManager
TPUAcceleratorManager.set_current_process_visible_accelerator_ids({chips!r})
import torch_tpu
n = torch.tpu.device_count()
print(json.dumps(dict(value=os.environ.get("TPU_VISIBLE_CHIPS"),
                      ids=[torch.tpu.get_device_properties(i).plugin_device_id for i in range(n)])))
"""


@pytest.mark.parametrize("chips", [["2", "3"], ["1"]])
def test_ray_visible_chips_are_what_we_read(chips):
    # Ray's variable is the one in our table, and what Ray's own setter writes
    # (ray/_private/accelerators/tpu.py) selects those plugin devices as tpu:0...
    assert TPUAcceleratorManager.get_visible_accelerator_ids_env_var() == "TPU_VISIBLE_CHIPS"
    assert "TPU_VISIBLE_CHIPS" in [name for name, _, _ in torch_tpu.env_table()]
    env = {k: v for k, v in os.environ.items() if k != "TPU_VISIBLE_CHIPS"}
    env["TORCH_TPU_CPU_DEVICES"] = "4"
    r = subprocess.run([sys.executable, "-c", SEEN_AFTER_RAY.format(chips=chips)], capture_output=True,
                       text=True, timeout=300, env=env, cwd="/tmp")
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["value"] == ",".join(chips)
    assert got["ids"] == [int(c) for c in chips]
