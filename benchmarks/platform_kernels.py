"""Platform kernels against the computations they replace, side by side in one run.

For each kernel of csrc/kernels/ (today: paged attention), at the shapes of
benchmarks/serving.py's decode and prefill steps (its Llama: 4 heads, 2 KV heads,
head size 64, float32, blocks of 16), times
- the kernel inside a captured program (how the vLLM step runs it),
- the composite it replaces (integrations/vllm/attention.py), captured the same way,
- PyTorch's CPU kernel on the same numbers (scaled_dot_product_attention over each
  row's gathered keys, eager on the CPU),
each the best of several rounds of many launches, and prints the ratios. The
kernel's output is checked against the composite's first.

Run with vLLM's venv (make vllm-env): .venv-vllm/bin/python benchmarks/platform_kernels.py
(Not benchmarks/kernels.py: the scripts here run with benchmarks/ first on sys.path, and that
name would shadow the `kernels` package that transformers imports.)
"""
import argparse
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

import torch_tpu
from torch_tpu.compile.capture import CapturedFunction
from torch_tpu.integrations.vllm import attention as A
from torch_tpu.kernels import platform as platform_kernels

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests_vllm"))
from attention_steps import random_step  # noqa: E402

BLOCK, HEADS, KV_HEADS, HEAD = 16, 4, 2, 64


def step(seq_lens, qlens, max_seqs, num_blocks=1024, max_tokens=4096, seed=0):
    arrays, t_act, tables = random_step(seq_lens, qlens, max_seqs, num_blocks, max_tokens, BLOCK,
                                        np.random.default_rng(seed))
    torch.manual_seed(seed)
    cache = torch.randn(2, num_blocks * BLOCK, KV_HEADS, HEAD)
    query = torch.randn(len(arrays["output_index"]), HEADS * HEAD)
    return arrays, t_act, cache, query, tables, np.asarray(seq_lens), np.asarray(qlens)


def captured(use_kernel, arrays, t_act):
    impl = A.TpuPagedAttentionImpl(HEADS, HEAD, HEAD ** -0.5, num_kv_heads=KV_HEADS)

    def attend(query, cache, *meta):
        m = A.TpuPagedAttentionMetadata(t_act, *meta)
        output = torch.zeros_like(query)
        if use_kernel:
            return [impl.forward(None, query, None, None, cache, m, output)]
        real = platform_kernels.target
        platform_kernels.target = lambda name: None
        try:
            return [impl.forward(None, query, None, None, cache, m, output)]
        finally:
            platform_kernels.target = real

    return CapturedFunction(attend, "kernels benchmark")


def best_of(fn, launches, rounds):
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(launches):
            out = fn()
        torch.tpu.synchronize() if isinstance(out, torch.Tensor) and out.device.type == "tpu" else None
        best = min(best, (time.perf_counter() - start) / launches)
    return best


def cpu_reference(query, cache, tables, seq_lens, qlens):
    """PyTorch's CPU attention on each sequence's gathered keys (its causal queries at the end)."""
    outs, t = [], 0
    for s, (n, ql) in enumerate(zip(seq_lens, qlens)):
        slots = torch.from_numpy((tables[s][:, None] * BLOCK + np.arange(BLOCK)).reshape(-1)[:n])
        k = cache[0, slots].transpose(0, 1)[None]                  # [1, Hkv, n, D]
        v = cache[1, slots].transpose(0, 1)[None]
        q = query[t:t + ql].view(ql, HEADS, HEAD).transpose(0, 1)[None]
        mask = torch.arange(n)[None, :] <= (n - ql + torch.arange(ql))[:, None]
        outs.append(F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True))
        t += ql
    return outs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--launches", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    if not platform_kernels.target("paged_attention"):
        raise SystemExit("the paged attention kernel does not run here (TORCH_TPU_KERNELS=composite, or a "
                         "plugin without FFI)")
    rng = np.random.default_rng(1)
    shapes = {
        "decode 32 x 1 token, keys 40..160": (rng.integers(40, 161, 32), [1] * 32, 32),
        "prefill 8 x 128 tokens": ([128] * 8, [128] * 8, 32),
    }
    print(f"{'step':38} {'kernel ms':>10} {'composite ms':>13} {'cpu sdpa ms':>12} {'composite/kernel':>17} "
          f"{'cpu/kernel':>11}")
    with torch.inference_mode(), torch_tpu.eager_mode("defer_and_fuse"):
        for name, (seq_lens, qlens, max_seqs) in shapes.items():
            arrays, t_act, cache, query, tables, sl, ql = step(seq_lens, qlens, max_seqs)
            meta = [torch.from_numpy(arrays[k]).to("tpu") for k in A.METADATA_TENSORS]
            inputs = [query.to("tpu"), cache.to("tpu"), *meta]
            kernel, composite = captured(True, arrays, t_act), captured(False, arrays, t_act)
            got, want = kernel(list(inputs))[0], composite(list(inputs))[0]
            torch.testing.assert_close(got.cpu()[:t_act], want.cpu()[:t_act], rtol=1e-4, atol=1e-4)
            tk = best_of(lambda: kernel(list(inputs))[0], args.launches, args.rounds)
            tc = best_of(lambda: composite(list(inputs))[0], args.launches, args.rounds)
            tcpu = best_of(lambda: cpu_reference(query, cache, tables, sl, ql), max(1, args.launches // 4),
                           args.rounds)
            print(f"{name:38} {tk * 1e3:10.3f} {tc * 1e3:13.3f} {tcpu * 1e3:12.3f} {tc / tk:17.2f} "
                  f"{tcpu / tk:11.2f}")


if __name__ == "__main__":
    main()
