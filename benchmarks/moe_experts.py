"""The experts of a mixture-of-experts layer on tpu, computed two ways, side by side.

vLLM's FusedMoE on tpu (python/torch_tpu/integrations/vllm/moe.py) routes each
token to top-k experts inside the step's program. Per shape (tokens, hidden,
expert inner size, experts, top-k) this times, each as one captured program
launched in a loop, interleaved over rounds in one process:
  dense    every token through every expert (two matmuls over all experts'
           weights), each expert's activations scaled by the token's routing
           weight for it (zero where it did not pick it): what the plugin runs
  grouped  a copy of each token per picked expert, sorted by expert, through
           torch._grouped_mm (which torch_tpu lowers densely: every group's
           product over all rows), scaled and added back
and prints the medians and the ratio grouped / dense. Both are checked against
a float64 CPU loop over the picked experts first. Writes
benchmarks/results/moe_experts.json. Needs vLLM (its venv):

    .venv-vllm/bin/python benchmarks/moe_experts.py [--rounds 5] [--shapes 16x64x64x4x2,...]
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != HERE]

import torch  # noqa: E402
import torch_tpu  # noqa: E402,F401
from torch_tpu.compile.capture import CapturedFunction  # noqa: E402
from torch_tpu.integrations.vllm.moe import EXPERTS  # noqa: E402

# tokens x hidden x inner x experts x top_k: the tests' tiny models' decode and
# prefill steps, then a larger layer (Mixtral-like ratios at small width).
SHAPES = ["16x64x64x4x2", "256x64x64x4x2", "16x64x32x8x2", "256x64x32x8x2",
          "32x256x512x8x2", "1024x256x512x8x2"]


def reference(x, w13, w2, weights, ids):
    """float64 loop over each token's picked experts."""
    x, w13, w2, weights = (t.double() for t in (x, w13, w2, weights))
    out = torch.zeros_like(x)
    for t in range(x.shape[0]):
        for j, e in enumerate(ids[t].tolist()):
            gate, up = (w13[e] @ x[t]).chunk(2)
            out[t] += weights[t, j] * (w2[e] @ (torch.nn.functional.silu(gate) * up))
    return out


def timed(fn, inputs, seconds=0.3):
    fn(list(inputs))
    torch.tpu.synchronize()
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        fn(list(inputs))
        n += 1
    torch.tpu.synchronize()
    return (time.perf_counter() - start) / n * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--shapes", default=",".join(SHAPES))
    args = ap.parse_args()
    g = torch.Generator().manual_seed(0)
    rows = []
    for shape in args.shapes.split(","):
        t, h, i, e, k = (int(v) for v in shape.split("x"))
        x = torch.randn(t, h, generator=g)
        w13 = torch.randn(e, 2 * i, h, generator=g) / h ** 0.5
        w2 = torch.randn(e, h, i, generator=g) / i ** 0.5
        weights, ids = torch.randn(t, e, generator=g).softmax(-1).topk(k, dim=-1)
        expected = reference(x, w13, w2, weights, ids) if t <= 256 else None
        # w2 as the plugin stores it: transposed once after loading.
        inputs = [v.to("tpu") for v in (x, w13, w2.transpose(1, 2).contiguous(), weights, ids)]
        fns = {name: CapturedFunction(lambda *a, f=f: [f(*a)], f"moe {name}") for name, f in EXPERTS.items()}
        for name, fn in fns.items():
            got = fn(list(inputs))[0].cpu().double()
            if expected is not None:
                torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4, msg=lambda m: f"{name} {shape}: {m}")
        times = {name: [] for name in fns}
        for _ in range(args.rounds):
            for name, fn in fns.items():
                times[name].append(timed(fn, inputs))
        med = {name: statistics.median(v) for name, v in times.items()}
        rows.append({"shape": shape, **{f"{n}_ms": round(v, 4) for n, v in med.items()},
                     "grouped_over_dense": round(med["grouped"] / med["dense"], 2)})
        print(f"{shape:>20}  dense {med['dense']:8.3f} ms  grouped {med['grouped']:8.3f} ms  "
              f"grouped/dense {med['grouped'] / med['dense']:5.2f}x", flush=True)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "moe_experts.json"), "w") as f:
        json.dump({"shapes": "tokens x hidden x inner x experts x top_k", "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
