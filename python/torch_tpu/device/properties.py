"""torch.tpu.get_device_properties: torch.cuda's fields, filled from what the
PJRT plugin says about the device.

- total_memory: the device memory the memory API reports
  (torch.tpu.mem_get_info, from PJRT_Device_MemoryStats where the plugin
  reports it). Without it (the XLA CPU plugin reports no memory statistics;
  its device memory is host memory) it is the host's physical memory.
- major/minor: the CUDA plugin's "compute_capability" attribute; for a TPU the
  generation in its kind ("TPU v5 lite" -> 5, 0); 0, 0 for the CPU plugin.
- multi_processor_count: the plugin's "core_count" attribute (SMs on the CUDA
  plugin) or "num_cores"; for the CPU plugin the host cores this process may
  use; else 1.
- plugin_device_id: the plugin's id of the device, which stays the same when
  TPU_VISIBLE_CHIPS renumbers what this process sees from tpu:0 (as a GPU's
  pci_bus_id does under CUDA_VISIBLE_DEVICES).
"""
import os
import re
from dataclasses import dataclass, field

from .. import _C


@dataclass(frozen=True)
class DeviceProperties:
    name: str
    major: int
    minor: int
    total_memory: int
    multi_processor_count: int
    kind: str
    platform_name: str
    platform_version: str
    plugin_path: str
    pjrt_api_version: str
    memory_source: str  # "plugin" (PJRT memory statistics) or "host" (physical memory)
    plugin_device_id: int
    attributes: dict = field(default_factory=dict, compare=False)

    def __repr__(self):
        return (f"TpuDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory // (1024 * 1024)}MB, "
                f"multi_processor_count={self.multi_processor_count}, "
                f"platform='{self.platform_name}', kind='{self.kind}', "
                f"memory_source='{self.memory_source}')")


def _capability(kind, attributes):
    cc = attributes.get("compute_capability")
    if cc:
        parts = cc.split(".")
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    m = re.search(r"\bv(\d+)", kind)
    if kind.upper().startswith("TPU") and m:
        return int(m.group(1)), 0
    return 0, 0


def _cores(platform_name, attributes):
    for key in ("core_count", "num_cores"):
        if key in attributes:
            return int(attributes[key])
    if platform_name == "cpu":
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return 1


def _total_memory(index, mem_get_info):
    if mem_get_info is not None:
        try:
            total = mem_get_info(index)[1]
        except (RuntimeError, NotImplementedError):
            total = 0
        if total:
            return int(total), "plugin"
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "host"


def device_properties(index, mem_get_info=None) -> DeviceProperties:
    info = _C._device_info(index)
    plat = _C._platform()
    attributes = dict(info.get("attributes", {}))
    major, minor = _capability(info["kind"], attributes)
    total, source = _total_memory(index, mem_get_info if plat["platform_name"] != "cpu" else None)
    return DeviceProperties(
        name=f"{plat['platform_name']}:{info['kind']}",
        major=major,
        minor=minor,
        total_memory=total,
        multi_processor_count=_cores(plat["platform_name"], attributes),
        kind=info["kind"],
        platform_name=plat["platform_name"],
        platform_version=plat["platform_version"],
        plugin_path=plat["plugin_path"],
        pjrt_api_version=plat["pjrt_api_version"],
        memory_source=source,
        plugin_device_id=info["id"],
        attributes=attributes,
    )
