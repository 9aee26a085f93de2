"""Dynamo's view of the `tpu` device: how torch.compile asks for the current
device, streams, events and properties. There is one stream per device (PJRT
keeps a device's work in order), so stream calls are answered by that one
stream; every question goes to `torch.tpu`."""
import torch
from torch._dynamo.device_interface import (
    DeviceInterface,
    get_registered_device_interfaces,
    register_interface_for_device,
)


class TpuInterface(DeviceInterface):
    """Dynamo's view of the `tpu` device (streams are PJRT's in-order queue)."""

    Event = torch.Event
    Stream = torch.Stream

    class Worker:
        @staticmethod
        def set_device(device: int) -> None:
            torch.tpu.set_device(device)

        @staticmethod
        def current_device() -> int:
            return torch.tpu.current_device()

        @staticmethod
        def get_device_properties(device=None):
            return torch.tpu.get_device_properties(device)

    @staticmethod
    def current_device() -> int:
        return torch.tpu.current_device()

    @staticmethod
    def set_device(device) -> None:
        torch.tpu.set_device(device)

    @staticmethod
    def maybe_exchange_device(device: int) -> int:
        previous = torch.tpu.current_device()
        if device >= 0 and device != previous:
            torch.tpu.set_device(device)
        return previous

    @staticmethod
    def exchange_device(device: int) -> int:
        return TpuInterface.maybe_exchange_device(device)

    @staticmethod
    def device_count() -> int:
        return torch.tpu.device_count()

    @staticmethod
    def is_available() -> bool:
        return torch.tpu.is_available()

    @staticmethod
    def stream(stream):
        return torch.tpu.stream(stream) if hasattr(torch.tpu, "stream") else _NullContext()

    @staticmethod
    def current_stream():
        return torch.tpu.current_stream() if hasattr(torch.tpu, "current_stream") else None

    @staticmethod
    def set_stream(stream) -> None:
        if hasattr(torch.tpu, "set_stream"):
            torch.tpu.set_stream(stream)

    @staticmethod
    def _set_stream_by_id(stream_id: int, device_index: int, device_type: int) -> None:
        pass

    @staticmethod
    def get_raw_stream(device_idx: int) -> int:
        return 0

    @staticmethod
    def synchronize(device=None) -> None:
        torch.tpu.synchronize(device)

    @classmethod
    def get_device_properties(cls, device=None):
        return torch.tpu.get_device_properties(device)

    @staticmethod
    def get_compute_capability(device=None) -> str:
        return ""

    @staticmethod
    def is_bf16_supported(including_emulation: bool = False) -> bool:
        return True

    @classmethod
    def is_dtype_supported(cls, dtype: torch.dtype, including_emulation: bool = False) -> bool:
        return True

    @staticmethod
    def memory_allocated(device=None) -> int:
        return torch.tpu.memory_allocated(device)

    @staticmethod
    def is_triton_capable(device=None) -> bool:
        return False


class _NullContext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# Dynamo looks devices given as "tpu:N" strings up by name. Counting the
# devices would load the PJRT plugin and start a client at `import torch`
# (which imports this package), costing every process the plugin's start and
# making any process it forks unable to use tpu; so the names go up to a
# bound instead, and a missing device is reported when it is used.
_INDEXED_NAMES = 64


def register():
    # Dynamo fills its table lazily (and would then put its own placeholder
    # under "tpu"): fill it first, then install ours.
    get_registered_device_interfaces()
    register_interface_for_device("tpu", TpuInterface)
    for i in range(_INDEXED_NAMES):
        register_interface_for_device(f"tpu:{i}", TpuInterface)
