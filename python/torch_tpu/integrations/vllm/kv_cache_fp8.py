"""A KV cache in fp8 on tpu: vLLM's `kv_cache_dtype` "fp8" (= "fp8_e4m3") and
"fp8_e5m2".

vLLM sizes such a cache as bytes (its spec's dtype is uint8) and leaves the
format to each attention backend's kernels. The runner keeps it as bytes
(`storage_dtype`): the written values are fp8 bit patterns viewed as uint8,
and the gathered blocks are viewed back as fp8 before they are converted. (A
cache of dtype float8 was slower by far: XLA's CPU plugin scatters into an
f8 buffer with a pass over the whole buffer, 14.8 ms for a write of 32 tokens
into a 16 MiB cache, 0.2 ms into the same bytes as u8.) A layer's keys and values are divided by
its scale (vLLM's `_k_scale_float` / `_v_scale_float`: 1.0, or a checkpoint's),
clamped to the format's range (vLLM's CUDA kernels saturate as well) and
rounded to nearest-even when written (`quantize`); attention reads them back
as float32 times the same scale, inside the step's program (attention.py) or
in the platform kernel.
"""
import torch

FORMATS = {"fp8": torch.float8_e4m3fn, "fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}


def fp8_format(kv_cache_dtype: str):
    """The fp8 dtype a layer's cache holds, or None for "auto" (the model's
    dtype)."""
    return None if kv_cache_dtype == "auto" else FORMATS[kv_cache_dtype]


def storage_dtype(spec_dtype: torch.dtype, kv_cache_dtype: str) -> torch.dtype:
    """The dtype of a cache tensor vLLM's spec sizes as `spec_dtype`: an fp8
    cache's is bytes."""
    if fp8_format(kv_cache_dtype) is not None and spec_dtype != torch.uint8:
        raise NotImplementedError(f"vLLM on tpu: kv_cache_dtype {kv_cache_dtype!r} with a cache spec of "
                                  f"{spec_dtype} (uint8 expected)")
    return spec_dtype


def quantize(x: torch.Tensor, fp8: torch.dtype, scale: float) -> torch.Tensor:
    """x / scale in `fp8`, saturated at the format's largest value, as the
    cache's bytes."""
    limit = torch.finfo(fp8).max
    return (x.to(torch.float32) / scale).clamp(-limit, limit).to(fp8).view(torch.uint8)


def dequantize(stored: torch.Tensor, fp8: torch.dtype, scale: float) -> torch.Tensor:
    """The cache's bytes `stored` as float32 values times scale."""
    return stored.view(fp8).to(torch.float32) * scale
