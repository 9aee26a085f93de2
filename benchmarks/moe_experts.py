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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests_vllm"))

import torch  # noqa: E402
from matmul_order import timed  # noqa: E402
from moe_layers import random_layer, reference  # noqa: E402
from torch.testing import assert_close  # noqa: E402
from torch_tpu.compile.capture import CapturedFunction  # noqa: E402
from torch_tpu.integrations.vllm.moe import EXPERTS  # noqa: E402

# tokens x hidden x inner x experts x top_k: the tests' tiny models' decode and
# prefill steps, then a larger layer (Mixtral-like ratios at small width).
SHAPES = ["16x64x64x4x2", "256x64x64x4x2", "16x64x32x8x2", "256x64x32x8x2",
          "32x256x512x8x2", "1024x256x512x8x2"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--shapes", default=",".join(SHAPES))
    args = ap.parse_args()
    g = torch.Generator().manual_seed(0)
    rows = []
    for shape in args.shapes.split(","):
        layer = random_layer(*(int(v) for v in shape.split("x")), g)
        expected = reference(*layer) if layer[0].shape[0] <= 256 else None
        inputs = [v.to("tpu") for v in layer]
        fns = {name: CapturedFunction(lambda *a, f=f: [f(*a)], f"moe {name}") for name, f in EXPERTS.items()}
        for name, fn in fns.items():
            got = fn(list(inputs))[0].cpu().double()
            if expected is not None:
                assert_close(got, expected, rtol=1e-4, atol=1e-4, msg=lambda m: f"{name} {shape}: {m}")
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
