"""torch.compile(backend="tpu") next to its peers, in one run: the GPT-style
decoder of benchmarks/gpt.py (training step: forward, backward, AdamW; and an
inference forward), at the sizes of gpt.SIZES ("issue": the issues' example,
matmul-bound on this CPU; "small": dominated by per-op host work, the balance
an accelerator gives the bigger model), as

  compile_tpu     torch.compile(backend="tpu"): one captured StableHLO program per graph
                  (forward, backward, AdamW(capturable=True) step)
  compile_tpu_composite   the same with TORCH_TPU_KERNELS=composite: XLA's dot for every
                  matmul instead of the GEMM platform kernel (before/after, side by side)
  compile_tpu_unfused     compile_tpu with torch_tpu.dynamo.fuse_attention = False: the
                  GPT's written-out attention kept as written instead of the SDPA kernel
  defer_and_fuse  eager on tpu, ops fused into deferred graphs
  strict          eager on tpu, one program per op
  cpu_eager       PyTorch eager on the CPU
  inductor_cpu    torch.compile (Inductor) on the CPU
  jax_jit_cpu     the same model in JAX (benchmarks/jax_gpt.py), jax.jit on the CPU

Configurations are interleaved (one timed block of each per round, several
rounds) and the median of the rounds is reported, because this machine is
shared and its speed drifts. Each configuration runs in a process of its own,
kept for the rounds of its workload: in one process jaxlib's threads, the
plugin's and Inductor's slow each other (defer_and_fuse / compile_tpu on the
small training step measured 0.68-0.69x with JAX in the same process, 0.77-0.83x
without it). Prints steps per second and compile_tpu's ratio to every peer;
writes benchmarks/results/compile.{json,png}.

JAX's jaxlib carries its own XLA: by default it hands dots and reductions to
the YNNPACK library (fusions of kind __ynn_fusion), which the xla-cpu-pjrt
plugin does only when asked. To compare the same code generation, turn that
off for JAX (the plugin's default already has it off):

    XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type= python3 benchmarks/compile.py

benchmarks/program_gap.py tells how much of the distance is the plugin's.

`--attention 128,256,512` times instead the GPT's written-out causal attention alone
(forward and backward, 8 x 4 heads of 64, compiled) rewritten into the SDPA kernel and
as written, interleaved in one process, at each key length: the evidence for
attention_fusion.MIN_KEYS.

    python3 benchmarks/compile.py [--sizes issue,small]   # needs `pip install jax jaxlib` for the JAX peer
"""
import argparse
import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
import time
import types

import torch

import torch_tpu

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt import GPT, SIZES, loss_fn, step_flops  # noqa: E402

CONFIGS = ["compile_tpu", "compile_tpu_composite", "compile_tpu_unfused", "defer_and_fuse", "strict", "cpu_eager",
           "inductor_cpu", "jax_jit_cpu"]
MODE = {"compile_tpu": "strict", "compile_tpu_composite": "strict", "compile_tpu_unfused": "strict",
        "defer_and_fuse": "defer_and_fuse", "strict": "strict"}
COMPILE_TPU = ("compile_tpu", "compile_tpu_unfused")
# Configurations that are another one in an environment of their own.
VARIANT = {"compile_tpu_composite": ("compile_tpu", {"TORCH_TPU_KERNELS": "composite"})}


def data(args):
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, args.vocab, (args.batch, args.seq), generator=g)
    tgt = torch.randint(0, args.vocab, (args.batch, args.seq), generator=g)
    return idx, tgt


def model(args):
    torch.manual_seed(0)
    return GPT(args.vocab, args.d_model, args.heads, args.layers, args.seq)


def torch_train(config, args):
    device = "cpu" if config in ("cpu_eager", "inductor_cpu") else "tpu"
    m = model(args).to(device)
    idx, tgt = (t.to(device) for t in data(args))
    torch_tpu.dynamo.fuse_attention = config != "compile_tpu_unfused"
    if config in COMPILE_TPU:
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4, capturable=True)
        compute_loss = torch.compile(loss_fn, backend="tpu")
        opt_step = torch.compile(opt.step, backend="tpu")
    elif config == "inductor_cpu":
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
        compute_loss = torch.compile(loss_fn)
        opt_step = torch.compile(opt.step)
    else:
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
        compute_loss, opt_step = loss_fn, opt.step

    def step():
        opt.zero_grad(set_to_none=True)
        loss = compute_loss(m, idx, tgt)
        loss.backward()
        opt_step()
        return loss

    return step, finish


def finish(outs):
    """Waits until every output of the timed block exists (holding them all,
    so that defer_and_fuse cannot skip the work of a result nobody reads)."""
    last = outs[-1]
    if last.device.type == "tpu":
        torch.tpu.synchronize()
    return float(last.reshape(-1)[0].item())


def torch_inference(config, args):
    device = "cpu" if config in ("cpu_eager", "inductor_cpu") else "tpu"
    m = model(args).to(device).eval()
    idx = data(args)[0].to(device)
    torch_tpu.dynamo.fuse_attention = config != "compile_tpu_unfused"
    if config in COMPILE_TPU:
        m = torch.compile(m, backend="tpu")
    elif config == "inductor_cpu":
        m = torch.compile(m)

    def step():
        with torch.no_grad():
            return m(idx)

    return step, finish


def jax_setup(workload, args):
    import jax

    jax.config.update("jax_platforms", "cpu")
    import jax_gpt

    idx, tgt = data(args)
    params = jax_gpt.params_from_torch(model(args))
    jidx, jtgt = jax_gpt.to_jax(idx), jax_gpt.to_jax(tgt)
    if workload == "train_step":
        train = jax_gpt.make_train_step(args.heads, args.layers)
        state = {"p": params, "opt": jax_gpt.adamw_init(params)}

        def step():
            state["p"], state["opt"], loss = train(state["p"], state["opt"], jidx, jtgt)
            return loss

        return step, jax_finish
    infer = jax_gpt.make_inference(args.heads, args.layers)
    return (lambda: infer(params, jidx)), jax_finish


def jax_finish(outs):
    import jax

    jax.block_until_ready(outs)
    return float(outs[-1].reshape(-1)[0])


def setup(workload, config, args):
    if config == "jax_jit_cpu":
        return jax_setup(workload, args)
    make = torch_train if workload == "train_step" else torch_inference
    with mode_of(config):
        return make(config, args)


def mode_of(config):
    return torch_tpu.eager_mode(MODE[config]) if config in MODE else contextlib.nullcontext()


def timed_block(step, finish, config, steps):
    with mode_of(config):
        start = time.perf_counter()
        outs = [step() for _ in range(steps)]
        value = finish(outs)
        return (time.perf_counter() - start) / steps, value


class Worker:
    """One configuration of one workload in a process of its own, set up and
    warmed up at start (`ready`: warm-up seconds and the value it gave, or why
    it was skipped), then timing blocks of steps when asked."""

    def __init__(self, workload, size, config, warmup):
        base, env = VARIANT.get(config, (config, {}))
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker", workload, size, base, str(warmup)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env={**os.environ, **env})
        self.ready = self._reply()

    def block(self, steps):
        """Seconds per step of a timed block of `steps` steps."""
        self.proc.stdin.write(f"{steps}\n")
        self.proc.stdin.flush()
        return self._reply()["t"]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()

    def _reply(self):
        for line in self.proc.stdout:
            if line.startswith(REPLY):
                return json.loads(line[len(REPLY):])
        raise RuntimeError(f"the {self.proc.args[3:6]} worker exited ({self.proc.wait()})")


REPLY = "@@compile.py "


def worker(workload, size, config, warmup):
    def reply(obj):
        print(REPLY + json.dumps(obj), flush=True)

    args = types.SimpleNamespace(**SIZES[size])
    try:
        step, finish = setup(workload, config, args)
    except ImportError as e:
        return reply({"skipped": str(e)})
    start = time.perf_counter()
    with mode_of(config):
        value = finish([step() for _ in range(warmup)])
    reply({"warmup_s": time.perf_counter() - start, "value": value})
    for line in sys.stdin:
        reply({"t": timed_block(step, finish, config, int(line))[0]})


def attention_sweep(lengths, rounds):
    """Best ms of forward+backward of written-out causal attention, fused and as written."""
    from torch_tpu.compile import attention_fusion

    attention_fusion.MIN_KEYS = 0  # fused at every length timed
    for n in lengths:
        torch._dynamo.reset()
        mask = torch.full((n, n), float("-inf")).triu(1).to("tpu")
        steps = {}
        for fuse in (True, False):
            torch_tpu.dynamo.fuse_attention = fuse
            f = torch.compile(lambda q, k, v: (q @ k.transpose(-2, -1) / 8.0 + mask).softmax(-1) @ v,
                              backend="tpu")
            q, k, v, up = (torch.randn(8, 4, n, 64, device="tpu", requires_grad=i < 3) for i in range(4))
            steps[fuse] = (lambda f=f, q=q, k=k, v=v, up=up: f(q, k, v).backward(up))
            steps[fuse]()
        torch.tpu.synchronize()
        reps = max(2, int(20 * (128 / n) ** 2))
        best = {True: math.inf, False: math.inf}
        for r in range(rounds):
            for fuse in (True, False) if r % 2 == 0 else (False, True):
                start = time.perf_counter()
                for _ in range(reps):
                    steps[fuse]()
                torch.tpu.synchronize()
                best[fuse] = min(best[fuse], (time.perf_counter() - start) / reps * 1e3)
        print(f"keys {n}: fused {best[True]:.2f} ms, as written {best[False]:.2f} ms, "
              f"fused / as written {best[True] / best[False]:.2f}x (best of {rounds} rounds)", flush=True)


def main():
    if len(sys.argv) == 6 and sys.argv[1] == "--worker":
        return worker(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="issue,small", help=f"GPT sizes: {', '.join(SIZES)}")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=3, help="steps per timed block")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (median reported)")
    p.add_argument("--workloads", default="train_step,inference")
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--out", default="benchmarks/results/compile")
    p.add_argument("--attention", help="key lengths: time the written-out attention alone, fused and not")
    args = p.parse_args()
    if args.attention:
        return attention_sweep([int(n) for n in args.attention.split(",")], args.rounds)
    configs = args.configs.split(",")

    results, compile_seconds, losses, gflops = {}, {}, {}, {}
    runs = [(w, size) for size in args.sizes.split(",") for w in args.workloads.split(",")]
    for base_workload, size in runs:
        vars(args).update(SIZES[size])
        workload = f"{base_workload}[{size}]"
        workers, first = {}, {}
        for config in configs:
            w = Worker(base_workload, size, config, args.warmup)
            if "skipped" in w.ready:
                print(f"{workload}/{config}: skipped ({w.ready['skipped']}); pip install jax jaxlib")
                w.close()
                continue
            workers[config] = w
            first[config] = w.ready["value"]
            compile_seconds[f"{workload}/{config}"] = w.ready["warmup_s"]
            print(f"{workload}/{config}: warmed up in {w.ready['warmup_s']:.1f} s "
                  f"(value {first[config]:.5f})", flush=True)
        # Timed blocks of at least ~0.3 s for each config (fast steps would
        # otherwise be timed a clock tick at a time).
        block = {c: max(args.steps, math.ceil(0.3 / w.block(1))) for c, w in workers.items()}
        times = {c: [] for c in workers}
        for r in range(args.rounds):
            order = list(workers) if r % 2 == 0 else list(reversed(workers))  # interleaved
            for config in order:
                times[config].append(workers[config].block(block[config]))
        for w in workers.values():
            w.close()
        row = {c: 1.0 / statistics.median(ts) for c, ts in times.items()}
        results[workload] = row
        losses[workload] = first
        flops = step_flops(**SIZES[size], train=base_workload == "train_step")
        gflops[workload] = {c: v * flops / 1e9 for c, v in row.items()}
        print(f"\n{workload} (steps/s, median of {args.rounds} interleaved rounds)")
        for c, v in row.items():
            spread = f"{1 / max(times[c]):.3f}..{1 / min(times[c]):.3f}"
            print(f"  {c:<15} {v:8.3f}   (range {spread}; matmul {gflops[workload][c]:.1f} GFLOP/s)")
        if "compile_tpu" in row:
            print("  compile_tpu / peer: " + ", ".join(
                f"{c} {row['compile_tpu'] / v:.2f}x" for c, v in row.items() if c != "compile_tpu"))
        print(flush=True)

    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    ratios = {w: {c: row["compile_tpu"] / v for c, v in row.items() if c != "compile_tpu"}
              for w, row in results.items() if "compile_tpu" in row}
    with open(args.out + ".json", "w") as f:
        json.dump({"config": vars(args), "sizes": SIZES, "steps_per_second": results,
                   "matmul_gflops_per_second": gflops,
                   "compile_tpu_over_peer": ratios, "warmup_seconds": compile_seconds,
                   "value_after_warmup": losses, "platform": torch_tpu.platform(),
                   "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
                   "torch": torch.__version__}, f, indent=2)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"wrote {args.out}.json (matplotlib is not installed: no chart)")
        return
    fig, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 4.2))
    axes = axes if len(results) > 1 else [axes]
    colors = {"compile_tpu": "tab:green", "compile_tpu_composite": "tab:olive", "compile_tpu_unfused": "tab:cyan",
              "defer_and_fuse": "tab:orange", "strict": "tab:blue", "cpu_eager": "gray", "inductor_cpu": "tab:purple",
              "jax_jit_cpu": "tab:red"}
    for ax, (workload, row) in zip(axes, results.items()):
        names = list(row)
        bars = ax.bar(names, [row[n] for n in names], color=[colors.get(n, "black") for n in names])
        for b, n in zip(bars, names):
            ax.annotate(f"{row[n]:.2f}", (b.get_x() + b.get_width() / 2, b.get_height()),
                        ha="center", va="bottom", fontsize=8)
        ax.set_title(f"GPT {workload} (median steps/s)")
        ax.set_ylabel("steps / second")
        ax.tick_params(axis="x", rotation=30)
    fig.tight_layout()
    fig.savefig(args.out + ".png")
    print(f"wrote {args.out}.json and {args.out}.png")


if __name__ == "__main__":
    main()
