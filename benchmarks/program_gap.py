"""Where compile_tpu's distance to jax.jit on the CPU comes from (issue 29):
the same small GPT (benchmarks/gpt.py, JAX twin benchmarks/jax_gpt.py) run as

  jax_cpu      jax.jit on jaxlib's own CPU client (what compile.py's jax_jit_cpu runs)
  jax_plugin   jax.jit on the xla-cpu-pjrt plugin, loaded into JAX as a PJRT plugin:
               JAX's program and runtime, our compiler and executor
  compile_tpu  torch.compile(backend="tpu"), as compile.py runs it

for the workloads `inference` (forward), `grad` (forward and backward: loss and
gradients; the optimizer left out) and `train` (the step of compile.py: forward,
backward, AdamW). Each configuration runs in a process of its own (two clients
of the plugin, or the plugin's threads next to jaxlib's, in one process slow
each other), the processes alternate over the rounds, and each reports wall
time and process CPU time per step (on a shared 2-core machine CPU time is the
steadier figure); medians of the rounds are printed.

If jax_plugin is as slow as compile_tpu, the distance is the plugin's, not our
programs'.

A configuration may carry a device count for the CPU plugin, `compile_tpu@4`:
its process runs with TORCH_TPU_CPU_DEVICES=4 (jax_plugin asks the plugin for
as many with the create option cpu_device_count; without a count both ask for
TORCH_TPU_CPU_DEVICES, default 1, as the runtime does). `--cpu-devices 1,4`
gives each configuration once per count, so the counts alternate too:

    python3 benchmarks/program_gap.py [--workloads inference,grad,train] [--rounds 4]
    python3 benchmarks/program_gap.py --configs compile_tpu --cpu-devices 1,4
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = ["jax_cpu", "jax_plugin", "compile_tpu"]


def one(config, workload, size, seconds):
    """Runs one configuration in this process; prints JSON {wall_ms, cpu_ms}."""
    sys.path.insert(0, HERE)
    import torch

    from gpt import GPT, SIZES, loss_fn

    cfg = dict(SIZES[size])
    batch = cfg.pop("batch")
    torch.manual_seed(0)
    model = GPT(**cfg)
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, cfg["vocab"], (batch, cfg["seq"]), generator=g)
    tgt = torch.randint(0, cfg["vocab"], (batch, cfg["seq"]), generator=g)
    heads, layers = cfg["heads"], cfg["layers"]
    if config == "compile_tpu":
        import torch_tpu  # noqa: F401

        m = model.to("tpu")
        i, t = idx.to("tpu"), tgt.to("tpu")
        if workload == "inference":
            m = torch.compile(m.eval(), backend="tpu")

            def step():
                with torch.no_grad():
                    return m(i)
        else:
            loss = torch.compile(loss_fn, backend="tpu")
            opt = torch.optim.AdamW(m.parameters(), lr=1e-4, capturable=True)
            opt_step = torch.compile(opt.step, backend="tpu")

            def step():
                opt.zero_grad(set_to_none=True)
                v = loss(m, i, t)
                v.backward()
                if workload == "train":
                    opt_step()
                return v

        def sync(r):
            torch.tpu.synchronize()
    else:
        import jax

        if config == "jax_plugin":
            import xla_plugins.xla_cpu_pjrt as plugin
            from jax._src import xla_bridge

            # Not torch_tpu.platform(): that would start a second client of the plugin.
            path = os.environ.get("TORCH_TPU_PJRT_PLUGIN") or os.path.join(
                os.path.dirname(plugin.__file__), "xla_cpu_pjrt.so")
            # The count torch_tpu's runtime would ask for, so that both run the plugin alike.
            devices = int(os.environ.get("TORCH_TPU_CPU_DEVICES") or 1)
            xla_bridge.register_plugin("xla_cpu_pjrt", library_path=path,
                                       options={"cpu_device_count": devices})
        jax.config.update("jax_platforms", "xla_cpu_pjrt" if config == "jax_plugin" else "cpu")
        import jax_gpt

        p = jax_gpt.params_from_torch(model)
        ji, jt = jax_gpt.to_jax(idx), jax_gpt.to_jax(tgt)
        if workload == "inference":
            f = jax_gpt.make_inference(heads, layers)

            def step():
                return f(p, ji)
        elif workload == "grad":
            f = jax.jit(jax.value_and_grad(lambda q, a, b: jax_gpt.loss(q, a, b, heads=heads, layers=layers)))

            def step():
                return f(p, ji, jt)
        else:
            train = jax_gpt.make_train_step(heads, layers)
            state = {"p": p, "opt": jax_gpt.adamw_init(p)}

            def step():
                state["p"], state["opt"], v = train(state["p"], state["opt"], ji, jt)
                return v

        sync = jax.block_until_ready
    for _ in range(3):
        r = step()
    sync(r)
    n, wall, cpu = 0, time.perf_counter(), time.process_time()
    while n < 3 or time.perf_counter() - wall < seconds:
        r = step()
        n += 1
    sync(r)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(json.dumps({"wall_ms": wall / n * 1e3, "cpu_ms": cpu / n * 1e3}))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workloads", default="inference,grad,train")
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--cpu-devices", default="",
                   help="comma-separated CPU plugin device counts; each config runs with each")
    p.add_argument("--size", default="small")
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--seconds", type=float, default=1.0, help="timed seconds per process")
    p.add_argument("--one", nargs=2, metavar=("CONFIG", "WORKLOAD"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        return one(*args.one, args.size, args.seconds)
    configs = args.configs.split(",")
    if args.cpu_devices:
        configs = [f"{c}@{n}" for c in configs for n in args.cpu_devices.split(",")]
    for workload in args.workloads.split(","):
        runs = {c: [] for c in configs}
        for r in range(args.rounds):
            for c in configs if r % 2 == 0 else reversed(configs):
                name, _, devices = c.partition("@")
                env = dict(os.environ, **({"TORCH_TPU_CPU_DEVICES": devices} if devices else {}))
                out = subprocess.run([sys.executable, __file__, "--one", name, workload, "--size", args.size,
                                      "--seconds", str(args.seconds)], capture_output=True, text=True,
                                     env=env)
                lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
                if out.returncode or not lines:
                    sys.exit(f"{c}/{workload} failed:\n{out.stderr[-2000:]}")
                runs[c].append(json.loads(lines[-1]))
        print(f"\n{workload}[{args.size}] (ms per step, median [min-max] of {args.rounds} processes each)")
        for c, rs in runs.items():
            walls, cpus = [x["wall_ms"] for x in rs], [x["cpu_ms"] for x in rs]
            print(f"  {c:<14} wall {statistics.median(walls):7.3f} [{min(walls):.3f}-{max(walls):.3f}]"
                  f"   process CPU {statistics.median(cpus):7.3f} [{min(cpus):.3f}-{max(cpus):.3f}]")


if __name__ == "__main__":
    main()
