"""TorchTitan's own training loop on the CPU, the reference a `tpu` run is
compared with: the same config, model, data, optimizer and schedule, only the
device differs.

    torchrun --nproc_per_node=1 -m torch_tpu.integrations.torchtitan.cpu_reference \\
        --module torch_tpu.integrations.torchtitan --config llama3_debugmodel ...

TorchTitan has no CPU device: it takes `torch._utils._get_available_device_type()`
(`tpu` once torch_tpu is loaded, "cuda" when nothing is found) when it is first
imported. This entry point answers "cpu" there before TorchTitan is imported,
with a device module giving the calls TorchTitan makes on it (torch.cpu has
no memory statistics: they read as unknown, -1, in the metrics line).
"""
import os
import types

import torch
import torch._utils


def _cpu_properties(device=None):
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return types.SimpleNamespace(name="cpu", total_memory=total)


class _CpuDeviceModule(types.ModuleType):
    """torch.cpu plus the calls it lacks; anything else is torch.cpu's."""

    def __getattr__(self, name):
        return getattr(torch.cpu, name)


class _HostStream:
    """The one stream of the host: everything is already done."""
    device_type = "cpu"

    def synchronize(self):
        pass

    def wait_stream(self, other):
        pass


_HOST_STREAM = _HostStream()
CPU_DEVICE_MODULE = _CpuDeviceModule("torch_tpu_cpu_reference_device")
CPU_DEVICE_MODULE.__dict__.update(
    current_device=lambda: 0,
    set_device=lambda device: None,
    get_device_name=lambda device=None: "cpu",
    get_device_properties=_cpu_properties,
    memory_stats=lambda device=None: {},
    reset_peak_memory_stats=lambda device=None: None,
    empty_cache=lambda: None,
    # DCP's file writer stages copies on the device module's current stream.
    current_stream=lambda device=None: _HOST_STREAM,
    manual_seed=torch.manual_seed,
    manual_seed_all=torch.manual_seed,
)


def main() -> None:
    if "torchtitan" in {name.split(".")[0] for name in list(__import__("sys").modules)}:
        raise RuntimeError("cpu_reference must choose the device before TorchTitan is imported")
    torch._utils._get_available_device_type = lambda: "cpu"
    real_device_module = torch._utils._get_device_module
    torch._utils._get_device_module = lambda t: CPU_DEVICE_MODULE if t == "cpu" else real_device_module(t)
    from torchtitan.distributed import utils as dist_utils
    from torchtitan.train import main as titan_main

    # Its barrier names the accelerator's device (`tpu`), which this run's
    # Gloo-only group has no backend for; shortening a timeout changes no number.
    dist_utils.set_pg_timeouts = lambda timeout, parallel_dims: None
    titan_main()


if __name__ == "__main__":
    main()
