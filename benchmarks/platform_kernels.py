"""Platform kernels against the computations they replace, side by side in one run.

Paged attention (csrc/kernels/paged_attention.cpp), at the shapes of
benchmarks/serving.py's decode and prefill steps (its Llama: 4 heads, 2 KV heads,
head size 64, float32, blocks of 16), times
- the kernel inside a captured program (how the vLLM step runs it),
- the composite it replaces (integrations/vllm/attention.py), captured the same way,
- PyTorch's CPU kernel on the same numbers (scaled_dot_product_attention over each
  row's gathered keys, eager on the CPU),
each the best of several rounds of many launches, and prints the ratios. The
kernel's output is checked against the composite's first. It needs vLLM's venv
(make vllm-env): .venv-vllm/bin/python benchmarks/platform_kernels.py

Fused SDPA (csrc/kernels/sdpa.cpp), forward and backward of
scaled_dot_product_attention at the issue's shape (batch 1, 8 heads, sequence 4096,
head 64, causal, float32): the kernel, the composite (TORCH_TPU_KERNELS=composite)
and PyTorch's CPU kernel, each in a process of its own so that its peak RSS growth
(VmHWM over the RSS before the first call, compilation included) is its own; the
results of the three are compared before the table is printed. Needs no vLLM:
python3 benchmarks/platform_kernels.py --only sdpa

GEMM (csrc/kernels/gemm.cpp: MKL), at the products of benchmarks/compile.py's GPT
training step: the kernel's custom call, XLA's dot_general and PyTorch's CPU matmul, each
alone in a program (benchmarks/gemm_shapes.py, which sweeps the shape classes):
python3 benchmarks/platform_kernels.py --only gemm

(Not benchmarks/kernels.py: the scripts here run with benchmarks/ first on sys.path, and that
name would shadow the `kernels` package that transformers imports.)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F

import torch_tpu
from torch_tpu.compile.capture import CapturedFunction
from torch_tpu.kernels import platform as platform_kernels

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests_vllm"))

BLOCK, HEADS, KV_HEADS, HEAD = 16, 4, 2, 64


def step(seq_lens, qlens, max_seqs, num_blocks=1024, max_tokens=4096, seed=0):
    from attention_steps import random_step
    arrays, t_act, tables = random_step(seq_lens, qlens, max_seqs, num_blocks, max_tokens, BLOCK,
                                        np.random.default_rng(seed))
    torch.manual_seed(seed)
    cache = torch.randn(2, num_blocks * BLOCK, KV_HEADS, HEAD)
    query = torch.randn(len(arrays["output_index"]), HEADS * HEAD)
    return arrays, t_act, cache, query, tables, np.asarray(seq_lens), np.asarray(qlens)


def captured(use_kernel, arrays, t_act):
    from torch_tpu.integrations.vllm import attention as A
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


def paged_attention(args):
    from torch_tpu.integrations.vllm import attention as A
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


# ---- fused SDPA: one process per variant


def status_mb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def sdpa_variant(variant, seq, rounds, save):
    """In the variant's own process: forward and backward `rounds` times; prints the
    best time and the peak RSS growth as JSON and saves the results for comparison."""
    device = "cpu" if variant == "cpu" else "tpu"
    if variant == "kernel" and not platform_kernels.target("sdpa_forward"):
        raise SystemExit("the SDPA kernel does not run here (TORCH_TPU_KERNELS=composite, or a plugin without FFI)")
    g = torch.Generator().manual_seed(0)
    q, k, v, up = (torch.randn(1, 8, seq, 64, generator=g).to(device) for _ in range(4))
    leaves = [t.requires_grad_() for t in (q, k, v)]
    base = status_mb("VmRSS")
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        out = F.scaled_dot_product_attention(*leaves, is_causal=True)
        grads = torch.autograd.grad(out, leaves, up)
        if device == "tpu":
            torch.tpu.synchronize()
        best = min(best, time.perf_counter() - start)
    torch.save([t.detach().cpu() for t in (out, *grads)], save)
    print(json.dumps({"s": best, "peak_mb": status_mb("VmHWM") - base}))


def sdpa(args):
    print(f"\nSDPA forward+backward, batch 1, 8 heads, sequence {args.seq}, head 64, causal, float32 "
          f"(best of {args.sdpa_rounds}; peak RSS growth in each variant's own process)")
    results, figures = {}, {}
    with tempfile.TemporaryDirectory() as d:
        for variant in ("kernel", "composite", "cpu"):
            env = dict(os.environ)
            if variant == "composite":
                env["TORCH_TPU_KERNELS"] = "composite"
            save = os.path.join(d, variant + ".pt")
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "--sdpa-variant", variant,
                                "--seq", str(args.seq), "--sdpa-rounds", str(args.sdpa_rounds), "--save", save],
                               capture_output=True, text=True, env=env)
            if r.returncode != 0:
                raise SystemExit(f"the {variant} variant failed:\n{r.stderr[-4000:]}")
            figures[variant] = json.loads(r.stdout.strip().splitlines()[-1])
            results[variant] = torch.load(save)
    for variant in ("composite", "cpu"):
        for name, got, want in zip(("out", "dq", "dk", "dv"), results["kernel"], results[variant]):
            torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-3,
                                       msg=lambda m: f"kernel vs {variant} {name}: {m}")
    k, c, cpu = figures["kernel"], figures["composite"], figures["cpu"]
    print(f"{'':12} {'kernel':>10} {'composite':>10} {'cpu sdpa':>10} {'composite/kernel':>17} {'cpu/kernel':>11}")
    print(f"{'seconds':12} {k['s']:10.3f} {c['s']:10.3f} {cpu['s']:10.3f} {c['s'] / k['s']:17.2f} "
          f"{cpu['s'] / k['s']:11.2f}")
    print(f"{'peak RSS MB':12} {k['peak_mb']:10.0f} {c['peak_mb']:10.0f} {cpu['peak_mb']:10.0f} "
          f"{c['peak_mb'] / max(k['peak_mb'], 1):17.2f} {cpu['peak_mb'] / max(k['peak_mb'], 1):11.2f}")


# ---- GEMM


def gemm(args):
    import gemm_shapes

    if not platform_kernels.target("gemm"):
        raise SystemExit("the GEMM kernel does not run here (TORCH_TPU_KERNELS=composite, or no MKL)")
    print("\nGEMM, f32, the GPT training step's products (best of interleaved rounds)")
    print(f"{'M x N x K op':22} {'kernel ms':>10} {'xla dot ms':>11} {'cpu mm ms':>10} {'xla/kernel':>11} "
          f"{'cpu/kernel':>11}")
    with torch.inference_mode():
        for m, n, k, layout in [(1024, 768, 256, "NT"), (1024, 4096, 256, "NT"), (1024, 256, 1024, "NN"),
                                (4096, 256, 1024, "TN")]:
            t = gemm_shapes.measure(m, n, k, layout, torch.float32)
            print(f"{f'{m} x {n} x {k} {layout}':22} {t['kernel'] * 1e3:10.3f} {t['xla'] * 1e3:11.3f} "
                  f"{t['torch'] * 1e3:10.3f} {t['xla'] / t['kernel']:11.2f} {t['torch'] / t['kernel']:11.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", choices=["gemm", "paged_attention", "sdpa"], help="one kernel's rows (default: all)")
    ap.add_argument("--launches", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--seq", type=int, default=4096, help="SDPA's sequence length")
    ap.add_argument("--sdpa-rounds", type=int, default=3)
    ap.add_argument("--sdpa-variant", choices=["kernel", "composite", "cpu"], help=argparse.SUPPRESS)
    ap.add_argument("--save", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.sdpa_variant:
        return sdpa_variant(args.sdpa_variant, args.seq, args.sdpa_rounds, args.save)
    if args.only in (None, "gemm"):
        gemm(args)
    if args.only in (None, "paged_attention"):
        paged_attention(args)
    if args.only in (None, "sdpa"):
        sdpa(args)


if __name__ == "__main__":
    main()
