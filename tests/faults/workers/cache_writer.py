"""`cache_writer.py FIRST COUNT`: compiles COUNT distinct programs (sums of
vectors of lengths FIRST..FIRST+COUNT-1), each checked against the CPU, so
that the persistent cache is written COUNT times. Prints "ready" before the
first and a JSON summary last."""
import json
import sys

import torch

import torch_tpu

first, count = int(sys.argv[1]), int(sys.argv[2])
print("ready", flush=True)
wrong = 0
for n in range(first, first + count):
    x = torch.arange(n, dtype=torch.float32)
    got = (x.to("tpu") * 2 + 1).sum().item()
    wrong += abs(got - float((x * 2 + 1).sum())) > 1e-3 * n * n
print(json.dumps(dict(wrong=wrong, counters=torch_tpu._C._counters())))
sys.exit(1 if wrong else 0)
