"""How much KV cache vLLM may allocate on `tpu`.

With XLA's CPU plugin the "device" is the host: its memory holds the process,
the engine and whatever else runs there. vLLM's default
`gpu_memory_utilization` (0.9) of that would take the machine, so on the CPU
plugin the device is presented as a share of the host's memory
(HOST_SHARE), of which the utilization is then taken.
"""
import torch

import torch_tpu

HOST_SHARE = 0.125
GiB = 1 << 30


def device_memory(device) -> tuple[int, int]:
    """(free, total) bytes vLLM may plan against."""
    free, total = torch.tpu.mem_get_info(device)
    if torch_tpu.platform()["platform_name"] == "cpu":
        total = int(total * HOST_SHARE)
        free = min(free, total)
    return free, total


def kv_cache_bytes(cache_config, device) -> int:
    free, total = device_memory(device)
    used = torch.tpu.memory_allocated(device)
    if cache_config.kv_cache_memory_bytes is not None:
        asked = cache_config.kv_cache_memory_bytes
        if asked > free:
            raise ValueError(
                f"vLLM on tpu: kv_cache_memory_bytes asks for {asked / GiB:.2f} GiB of KV cache; "
                f"{free / GiB:.2f} GiB of {total / GiB:.2f} GiB device memory is free")
        return asked
    budget = int(total * cache_config.gpu_memory_utilization) - used
    if budget <= 0 or budget > free:
        raise ValueError(
            f"vLLM on tpu: gpu_memory_utilization={cache_config.gpu_memory_utilization} of "
            f"{total / GiB:.2f} GiB device memory leaves {budget / GiB:.2f} GiB for the KV cache after "
            f"{used / GiB:.2f} GiB of weights; {free / GiB:.2f} GiB is free. Raise "
            "gpu_memory_utilization or set kv_cache_memory_bytes")
    return budget
