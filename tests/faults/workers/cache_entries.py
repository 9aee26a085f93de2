"""Helpers of the cache workers: the programs they run, and damage done to
entries of the persistent cache (runtime/disk_cache.h)."""
import glob
import os
import struct

import torch


def programs(device):
    """A few small programs (in strict mode: one cache entry per op)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(32, 16, generator=g).to(device)
    w = torch.randn(16, 8, generator=g).to(device)
    h = (x @ w).relu()
    return [h, (h * 3 + 1).sin().sum(0), torch.cumsum(x, 1)]


def results(device):
    return [t.cpu() for t in programs(device)]


def entries(cache):
    return sorted(glob.glob(os.path.join(cache, "*.exe")))


def body_offset(data):
    """Where the serialized executable starts in an entry."""
    (header,) = struct.unpack_from("<Q", data, 16)
    (key,) = struct.unpack_from("<Q", data, 24 + header)
    return 32 + header + key


KINDS = ("bit", "body_bit", "bits", "truncate", "garbage", "zero_run", "empty")


def damage(path, kind, rng):
    """Damages the entry at `path` in place; returns a description."""
    with open(path, "rb") as f:
        data = bytearray(f.read())
    n = len(data)
    if kind == "bit":
        i = rng.randrange(n * 8)
        data[i // 8] ^= 1 << (i % 8)
        what = f"bit {i}"
    elif kind == "body_bit":
        start = body_offset(data)
        i = rng.randrange(start * 8, n * 8)
        data[i // 8] ^= 1 << (i % 8)
        what = f"bit {i} (body from byte {start})"
    elif kind == "bits":
        flips = [rng.randrange(n * 8) for _ in range(rng.randint(2, 64))]
        for i in flips:
            data[i // 8] ^= 1 << (i % 8)
        if bytes(data) == open(path, "rb").read():  # flips that cancel out
            data[0] ^= 1
        what = f"{len(flips)} bits"
    elif kind == "truncate":
        cut = rng.randrange(n)
        data = data[:cut]
        what = f"cut at {cut} of {n}"
    elif kind == "garbage":
        data = bytearray(rng.randbytes(rng.randint(1, 2 * n)))
        what = f"{len(data)} random bytes"
    elif kind == "zero_run":
        a = rng.randrange(n)
        b = min(n, a + rng.randint(1, 4096))
        if any(data[a:b]):
            data[a:b] = bytes(b - a)
        else:  # already zeros: damage them otherwise
            data[a] ^= 0xFF
        what = f"zeros at {a}..{b}"
    else:
        data = bytearray()
        what = "empty file"
    with open(path, "wb") as f:
        f.write(data)
    return what
