"""Bit-flip fuzz of the persistent cache: `cache_fuzz.py TRIALS SEED`.

Each trial damages one entry that the programs use (a random kind of damage,
workers/cache_entries.py), forgets the in-memory programs so that the next
launch reads the disk again, runs the programs and compares them with the
CPU. Prints a line per trial before it runs (so that a crash names it) and a
JSON summary last. Exits 1 on a wrong result or an undetected damage."""
import collections
import json
import random
import sys
import warnings

import torch

import torch_tpu
from cache_entries import KINDS, damage, entries, results

trials, seed = int(sys.argv[1]), int(sys.argv[2])
warnings.simplefilter("ignore")  # the one-time damage warning has its own test
rng = random.Random(seed)
cache = torch_tpu._C._cache_dir()
expected = results("cpu")
results("tpu")  # compiles and writes the entries
files = entries(cache)
counters = torch_tpu._C._counters
by_kind, wrong, undetected = collections.Counter(), [], []
for t in range(trials):
    kind = rng.choice(KINDS)
    path = rng.choice(files)
    what = damage(path, kind, rng)
    print(f"trial {t} seed {seed}: {kind} {what} in {path}", flush=True)
    torch_tpu._C._clear_programs_for_test()
    before = counters().get("disk_damaged", 0)
    got = results("tpu")
    for g, e in zip(got, expected):
        if not torch.allclose(g, e, rtol=1e-5, atol=1e-5):
            wrong.append(t)
    if counters().get("disk_damaged", 0) == before:
        undetected.append(t)
    by_kind[kind] += 1
# Every damaged entry was replaced by a good one: all come from the disk now.
torch_tpu._C._clear_programs_for_test()
compiled = counters().get("compiled", 0)
final = results("tpu")
summary = dict(trials=trials, seed=seed, kinds=dict(by_kind), wrong=wrong, undetected=undetected,
               damaged_seen=counters().get("disk_damaged", 0), entries=len(files),
               recompiled_at_end=counters().get("compiled", 0) - compiled,
               final_ok=all(torch.allclose(g, e, rtol=1e-5, atol=1e-5) for g, e in zip(final, expected)))
print(json.dumps(summary))
sys.exit(0 if not wrong and not undetected and summary["final_ok"] else 1)
