"""Time to first result with an empty compile cache, and how many programs
were compiled on the way, for work whose shapes are new:

  gpt_train     the GPT training step of benchmarks/gpt.py ("small" size, AdamW):
                the first step, and the first 10 steps
  generate_N    a tiny Hugging Face Llama (2 layers, hidden 64), greedy
                generate() of N new tokens from an 8-token prompt (the KV cache
                grows by one position per token, so every step has new shapes)
  generate_64_static   the same with cache_implementation="static" (strict and
                cpu_eager; transformers then compiles the forward with torch.compile)
  size_loop     a small function (matmul, bias, tanh, softmax, sum) called on
                32 inputs of different lengths; on tpu eager each input is
                marked with torch_tpu.dynamic_dims(x, 0), as a user would

in each of

  strict          eager on tpu, one program per op
  defer_and_fuse  eager on tpu, ops fused into deferred graphs
  compile         torch.compile(backend="tpu"); dynamic=True for size_loop
  cpu_eager       PyTorch eager on the CPU (compiles nothing: the floor)
  jax_jit         the same work in JAX, jax.jit on the CPU (gpt_train and
                  size_loop; transformers 5 has no JAX Llama, so no generate)

Every measurement runs in a fresh process with a fresh, empty
TORCH_TPU_CACHE_DIR, so both the in-memory and the on-disk program caches
start empty (JAX's own compilation cache is in memory only unless configured,
so a new process starts it empty too). The clock starts after the model and
inputs are on the device, so it measures compiling and running, not imports.
Compilations are the runtime's own counter (torch_tpu.metrics()
["graphs_compiled"], programs handed to PJRT_Client_Compile) and, for JAX, its
backend-compile monitoring events. generate() tokens on tpu are compared with
the CPU's.

    python3 benchmarks/first_step.py            # all of it (several minutes)
    python3 benchmarks/first_step.py --quick    # smoke test: fewer steps, tokens and sizes

Prints one table and writes benchmarks/results/first_step.{json,png}
(`pip install matplotlib` for the chart).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = ["strict", "defer_and_fuse", "compile", "cpu_eager", "jax_jit"]
TPU_MODES = {"strict": "strict", "defer_and_fuse": "defer_and_fuse", "compile": "strict"}


def workloads(quick):
    if quick:
        return {"gpt_train": dict(steps=3), "generate_8": dict(tokens=8),
                "size_loop": dict(sizes=8)}
    return {"gpt_train": dict(steps=10), "generate_8": dict(tokens=8),
            "generate_64": dict(tokens=64), "generate_64_static": dict(tokens=64, static=True),
            "size_loop": dict(sizes=32)}


def supported(workload, config):
    if workload.endswith("_static"):
        return config in ("strict", "cpu_eager")
    return not (config == "jax_jit" and workload.startswith("generate"))


# ---------------------------------------------------------------- child side


class Baseline:
    """Programs compiled (and seconds spent compiling) since construction,
    from the runtime's counters; zero for work that never touches tpu."""

    def __init__(self, on_tpu):
        self.on_tpu = on_tpu
        self.n0, self.seconds0 = self.read()

    def read(self):
        if not self.on_tpu:
            return 0, 0.0
        import torch_tpu

        m = torch_tpu.metrics()
        return m["graphs_compiled"], m["compile_seconds"]

    def since(self):
        n, seconds = self.read()
        return n - self.n0, seconds - self.seconds0


class JaxCompiles:
    """Counts XLA compilations JAX asks its backend for."""

    def __init__(self):
        import jax
        from jax._src import dispatch

        self.n, self.seconds = 0, 0.0

        def listener(event, duration, **kwargs):
            if event == dispatch.BACKEND_COMPILE_EVENT:
                self.n += 1
                self.seconds += duration

        jax.monitoring.register_event_duration_secs_listener(listener)

    def start(self):
        self.n0, self.seconds0 = self.n, self.seconds

    def since(self):
        return self.n - self.n0, self.seconds - self.seconds0


def finish_torch(value):
    """Blocks until `value` (a tensor) exists on the host."""
    return value.detach().cpu()


def gpt_train(config, steps):
    import torch

    sys.path.insert(0, HERE)
    from gpt import GPT, SIZES, loss_fn

    size = SIZES["small"]
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, size["vocab"], (size["batch"], size["seq"]), generator=g)
    tgt = torch.randint(0, size["vocab"], (size["batch"], size["seq"]), generator=g)
    torch.manual_seed(0)
    model = GPT(size["vocab"], size["d_model"], size["heads"], size["layers"], size["seq"])
    marks = {}
    if config == "jax_jit":
        import jax

        jax.config.update("jax_platforms", "cpu")
        import jax_gpt

        counter = JaxCompiles()
        params = jax_gpt.params_from_torch(model)
        state = jax_gpt.adamw_init(params)
        jidx, jtgt = jax_gpt.to_jax(idx), jax_gpt.to_jax(tgt)
        jax.block_until_ready((params, state, jidx, jtgt))
        train = jax_gpt.make_train_step(size["heads"], size["layers"])
        counter.start()
        start = time.perf_counter()
        for i in range(steps):
            params, state, loss = train(params, state, jidx, jtgt)
            value = float(loss)
            if i == 0:
                marks["first"] = (time.perf_counter() - start, *counter.since(), value)
        marks["all"] = (time.perf_counter() - start, *counter.since(), value)
        return marks
    device = "cpu" if config == "cpu_eager" else "tpu"
    model = model.to(device)
    idx, tgt = idx.to(device), tgt.to(device)
    if config == "compile":
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, capturable=True)
        compute_loss = torch.compile(loss_fn, backend="tpu")
        opt_step = torch.compile(opt.step, backend="tpu")
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        compute_loss, opt_step = loss_fn, opt.step
    on_tpu = device == "tpu"
    base = Baseline(on_tpu)
    start = time.perf_counter()
    for i in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = compute_loss(model, idx, tgt)
        loss.backward()
        opt_step()
        value = loss.item()
        if on_tpu:
            # The step is done when its parameters are: strict runs ahead
            # of compiles, and the loss is ready before the optimizer step.
            torch.tpu.synchronize()
        if i == 0:
            marks["first"] = (time.perf_counter() - start, *base.since(), value)
    marks["all"] = (time.perf_counter() - start, *base.since(), value)
    return marks


def tiny_llama():
    import torch
    import transformers

    cfg = transformers.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=256,
                                   pad_token_id=0, eos_token_id=1, bos_token_id=2)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(cfg).eval()


def generate(config, tokens, static=False):
    import torch

    model = tiny_llama()
    prompt = torch.randint(3, 256, (1, 8), generator=torch.Generator().manual_seed(3))
    device = "cpu" if config == "cpu_eager" else "tpu"
    model = model.to(device)
    prompt = prompt.to(device)
    if config == "compile":
        model.forward = torch.compile(model.forward, backend="tpu")
    on_tpu = device == "tpu"
    base = Baseline(on_tpu)
    start = time.perf_counter()
    with torch.no_grad():
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt),
                             max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False,
                             **({"cache_implementation": "static"} if static else {}))
    ids = finish_torch(out)[0].tolist()
    elapsed = time.perf_counter() - start
    return {"all": (elapsed, *base.since(), None), "tokens": ids}


def size_loop_sizes(n):
    return [8 + 3 * i for i in range(n)]


def size_loop(config, n):
    import torch

    g = torch.Generator().manual_seed(5)
    w = torch.randn(64, 64, generator=g)
    b = torch.randn(64, generator=g)
    xs = [torch.randn(s, 64, generator=g) for s in size_loop_sizes(n)]
    marks = {}
    if config == "jax_jit":
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_platforms", "cpu")
        counter = JaxCompiles()
        jw, jb = jnp.asarray(w.numpy()), jnp.asarray(b.numpy())
        jxs = [jnp.asarray(x.numpy()) for x in xs]
        jax.block_until_ready((jw, jb, jxs))
        f = jax.jit(lambda x, w, b: jax.nn.softmax(jnp.tanh(x @ w + b) * 0.5, axis=-1).sum(0))
        counter.start()
        start = time.perf_counter()
        for i, x in enumerate(jxs):
            value = float(f(x, jw, jb)[0])
            if i == 0:
                marks["first"] = (time.perf_counter() - start, *counter.since(), value)
        marks["all"] = (time.perf_counter() - start, *counter.since(), value)
        return marks

    def f(x, w, b):
        return (torch.tanh(x @ w + b) * 0.5).softmax(-1).sum(0)

    device = "cpu" if config == "cpu_eager" else "tpu"
    w, b = w.to(device), b.to(device)
    xs = [x.to(device) for x in xs]
    if config in ("strict", "defer_and_fuse"):
        import torch_tpu

        xs = [torch_tpu.dynamic_dims(x, 0) for x in xs]
    if config == "compile":
        f = torch.compile(f, backend="tpu", dynamic=True)
    on_tpu = device == "tpu"
    if on_tpu:
        torch.tpu.synchronize()
    base = Baseline(on_tpu)
    start = time.perf_counter()
    for i, x in enumerate(xs):
        value = float(finish_torch(f(x, w, b))[0])
        if i == 0:
            marks["first"] = (time.perf_counter() - start, *base.since(), value)
    marks["all"] = (time.perf_counter() - start, *base.since(), value)
    return marks


def child(workload, config, params):
    import torch
    import torch_tpu

    torch_tpu.set_eager_mode(TPU_MODES.get(config, "strict"))
    if workload == "gpt_train":
        result = gpt_train(config, params["steps"])
    elif workload.startswith("generate"):
        result = generate(config, params["tokens"], params.get("static", False))
    else:
        result = size_loop(config, params["sizes"])
    if config in TPU_MODES:
        # Ops per call of the size loop's function: the yardstick of
        # "programs per op" (what strict compiles for one new size).
        result["metrics"] = {k: v for k, v in torch_tpu.metrics().items()
                             if k in ("ops_recorded", "graphs_launched", "cache_hits",
                                      "cache_misses", "graphs_compiled", "disk_cache_hits")}
    print("RESULT " + json.dumps(result))


# ---------------------------------------------------------------- parent side


def run_fresh(script, child_args, timeout, env_overrides=None):
    """`script --child *child_args` in a fresh process with a fresh, empty
    TORCH_TPU_CACHE_DIR and the default eager mode: its RESULT line's JSON,
    or {"error": ...}. Also serves benchmarks/varied_shapes.py."""
    env = dict(os.environ, **(env_overrides or {}))
    with tempfile.TemporaryDirectory(prefix="fresh_cache_") as cache:
        env["TORCH_TPU_CACHE_DIR"] = cache
        env.pop("TORCH_TPU_DEFER_AND_FUSE", None)
        env.pop("TPU_LAUNCH_BLOCKING", None)
        cmd = [sys.executable, os.path.abspath(script), "--child", *child_args]
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout} s"}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return {"error": f"exit {proc.returncode}: " + " | ".join(tail)}


def run_child(workload, config, params, timeout):
    return run_fresh(__file__, [workload, config, json.dumps(params)], timeout)


def rows_of(workload, config, result, params):
    """(row name, seconds, compilations, compile seconds) per timed mark."""
    if "error" in result:
        return [(workload, None, None, None, result["error"])]
    out = []
    if workload == "gpt_train":
        out.append(("gpt_train_first_step", *result["first"][:3], ""))
        out.append((f"gpt_train_{params['steps']}_steps", *result["all"][:3], ""))
    elif workload == "size_loop":
        out.append(("size_loop_first_size", *result["first"][:3], ""))
        out.append((f"size_loop_{params['sizes']}_sizes", *result["all"][:3], ""))
    else:
        out.append((workload, *result["all"][:3], ""))
    return out


def chart(table, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: no chart)")
        return
    names = list(dict.fromkeys(r["row"] for r in table))
    fig, axes = plt.subplots(1, 2, figsize=(14, 5))
    width = 0.8 / len(CONFIGS)
    for j, config in enumerate(CONFIGS):
        secs = [next((r["seconds"] for r in table if r["row"] == n and r["config"] == config), None)
                for n in names]
        comp = [next((r["compiles"] for r in table if r["row"] == n and r["config"] == config), None)
                for n in names]
        xs = [i + j * width for i in range(len(names))]
        axes[0].bar(xs, [s or 0 for s in secs], width, label=config)
        axes[1].bar(xs, [c or 0 for c in comp], width, label=config)
    for ax, title in ((axes[0], "seconds to result, empty cache"), (axes[1], "programs compiled")):
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(names))])
        ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
        ax.set_title(title)
        ax.set_yscale("log")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke test: fewer steps, tokens, sizes")
    ap.add_argument("--workloads", default="", help="comma-separated subset")
    ap.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated subset")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per measurement")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "first_step"),
                    help="path prefix of the .json and .png written")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], args.child[1], json.loads(args.child[2]))
        return
    work = workloads(args.quick)
    if args.workloads:
        work = {k: v for k, v in work.items() if k in args.workloads.split(",")}
    configs = [c for c in CONFIGS if c in args.configs.split(",")]
    table, tokens = [], {}
    for workload, params in work.items():
        for config in configs:
            if not supported(workload, config):
                continue
            result = run_child(workload, config, params, args.timeout)
            if "tokens" in result:
                tokens[(workload, config)] = result["tokens"]
            for row, secs, comp, csecs, err in rows_of(workload, config, result, params):
                table.append({"row": row, "config": config, "seconds": secs, "compiles": comp,
                              "compile_seconds": csecs, "error": err, "params": params})
                print(f"  {row:<24} {config:<15} "
                      + (f"{secs:8.2f} s {comp:5d} compiled ({csecs:.2f} s compiling)"
                         if err == "" else err), flush=True)
    for (workload, config), ids in sorted(tokens.items()):
        ref = tokens.get((workload, "cpu_eager"))
        if config != "cpu_eager" and ref is not None:
            same = ids == ref
            for r in table:
                if r["row"] == workload and r["config"] == config:
                    r["tokens_match_cpu"] = same
            print(f"  {workload} {config}: tokens {'identical to' if same else 'DIFFER from'} the CPU's")

    print()
    names = list(dict.fromkeys(r["row"] for r in table))
    configs = [c for c in configs if any(r["config"] == c for r in table)]
    print(f"{'':<24}" + "".join(f"{c:>22}" for c in configs))
    for n in names:
        cells = []
        for c in configs:
            r = next((r for r in table if r["row"] == n and r["config"] == c), None)
            if r is None or r["seconds"] is None:
                cells.append(f"{'-':>22}")
            else:
                cells.append(f"{r['seconds']:>10.2f} s {r['compiles']:>5d} comp")
        print(f"{n:<24}" + "".join(cells))
    cpu = {r["row"]: r["seconds"] for r in table if r["config"] == "cpu_eager" and r["seconds"]}
    if cpu:
        print("\nratio to cpu_eager (seconds to result)")
        for n in names:
            if n not in cpu:
                continue
            cells = []
            for c in configs:
                r = next((r for r in table if r["row"] == n and r["config"] == c), None)
                cells.append(f"{r['seconds'] / cpu[n]:>21.1f}x" if r and r["seconds"] else f"{'-':>22}")
            print(f"{n:<24}" + "".join(cells))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump({"quick": args.quick, "rows": table,
                   "size_loop_sizes": size_loop_sizes(work.get("size_loop", {}).get("sizes", 0))},
                  f, indent=1)
    print(f"wrote {args.out}.json")
    chart(table, args.out + ".png")


if __name__ == "__main__":
    main()
