"""Cost of the device-side index checks (on by default) next to
TORCH_TPU_CHECK_INDICES=0 (XLA's clamp and drop), measured side by side in
one run. The flag is read once per process, so each setting runs in a child
process of its own; both children stay alive and take turns, a batch of
steps at a time, so that drift on a shared machine hits both alike.

Workloads, in strict and defer_and_fuse:
  lookups: a chain of embedding lookups and gathers (every op is checked);
  gpt:     a small GPT training step with AdamW (benchmarks/gpt.py "small":
           three checked ops -- two embeddings and the cross-entropy target --
           among a few hundred).
Prints steps/s of each setting and the ratio checked/unchecked (paired per
turn, median and range)."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def worker(workload, mode):
    import torch
    import torch.nn.functional as F

    import torch_tpu
    sys.path.insert(0, HERE)
    from gpt import GPT, SIZES, loss_fn

    torch_tpu.set_eager_mode(mode)
    torch.manual_seed(0)
    if workload == "lookups":
        table = torch.randn(1000, 64).to("tpu")
        idx = torch.randint(0, 1000, (256,)).to("tpu")

        def step():
            x = F.embedding(idx, table)
            for _ in range(16):
                x = x.gather(0, (idx[:, None] % 256).expand(256, 64)) + F.embedding(idx, table)
            return x.sum().item()
    else:
        cfg = dict(SIZES["small"])
        batch = cfg.pop("batch")
        model = GPT(**cfg).to("tpu")
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        idx = torch.randint(0, cfg["vocab"], (batch, cfg["seq"])).to("tpu")
        tgt = torch.randint(0, cfg["vocab"], (batch, cfg["seq"])).to("tpu")

        def step():
            opt.zero_grad()
            loss = loss_fn(model, idx, tgt)
            loss.backward()
            opt.step()
            return loss.item()
    for _ in range(3):  # compile and warm the caches
        step()
    print("ready", flush=True)
    for line in sys.stdin:  # "N": run N steps, answer the seconds they took
        start = time.perf_counter()
        for _ in range(int(line)):
            step()
        print(time.perf_counter() - start, flush=True)


def start_worker(workload, mode, checked):
    env = dict(os.environ)
    env.pop("TORCH_TPU_CHECK_INDICES", None)  # checked: the default
    if not checked:
        env["TORCH_TPU_CHECK_INDICES"] = "0"
    p = subprocess.Popen([sys.executable, __file__, "--worker", workload, mode],
                         env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if line.strip() != "ready":
        raise RuntimeError(f"{workload}/{mode} worker failed to start (exit {p.wait()})")
    return p


def run_steps(p, steps):
    p.stdin.write(f"{steps}\n")
    p.stdin.flush()
    return steps / float(p.stdout.readline())


def measure(workload, mode, rounds, steps):
    """Steps/s of each setting, a turn each per round."""
    off_p, on_p = start_worker(workload, mode, False), start_worker(workload, mode, True)
    try:
        off, on = [], []
        for _ in range(rounds):
            off.append(run_steps(off_p, steps))
            on.append(run_steps(on_p, steps))
        return off, on
    finally:
        for p in (off_p, on_p):
            p.stdin.close()
            p.wait()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--worker", nargs=2)
    p.add_argument("--workloads", default="lookups,gpt")
    p.add_argument("--json", default="")
    a = p.parse_args()
    if a.worker:
        return worker(a.worker[0], a.worker[1])
    results = {}
    print(f"{'workload':8} {'mode':15} {'unchecked st/s':>14} {'checked st/s':>12} "
          f"{'checked/unchecked':>17} (paired range)")
    for workload in a.workloads.split(","):
        for mode in ("strict", "defer_and_fuse"):
            off, on = measure(workload, mode, a.rounds, a.steps)
            ratios = [y / x for x, y in zip(off, on)]
            r = dict(unchecked=statistics.median(off), checked=statistics.median(on),
                     ratio=statistics.median(ratios), ratio_min=min(ratios), ratio_max=max(ratios))
            results[f"{workload}/{mode}"] = r
            print(f"{workload:8} {mode:15} {r['unchecked']:14.2f} {r['checked']:12.2f} "
                  f"{r['ratio']:17.3f} ({r['ratio_min']:.3f}-{r['ratio_max']:.3f})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
