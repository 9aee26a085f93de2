"""vLLM on `tpu`: a platform plugin (entry point `vllm.platform_plugins`), and
a general plugin (`vllm.general_plugins`) that vLLM runs in each of its processes.

vLLM asks every installed platform plugin whether it applies; `register()`
answers with the platform's class path only when torch_tpu has a device, so
without one vLLM picks its own platform as before.

- platform.py: what vLLM asks of a device (config, memory, attention backend);
- worker.py: the worker and model runner (vLLM's CPU runner prepares each step
  on the host; the model, its KV cache and attention live on `tpu`);
- attention.py: paged attention through the block table, composed of ops torch_tpu
  lowers to StableHLO; buckets.py: the padded sizes that bound the programs.
"""


def register():
    try:
        import torch
        import torch_tpu  # noqa: F401  (registers the device)
    except ImportError:
        return None
    if not (torch.tpu.is_available() and torch.tpu.device_count() > 0):
        return None
    return "torch_tpu.integrations.vllm.platform.TpuPlatform"


def register_general():
    # LLaVA's module imports without torchvision (multimodal.py).
    from .multimodal import pixtral_without_torchvision
    pixtral_without_torchvision()
