"""Host -> tpu copies of a 64 MiB float32 tensor: from pinned memory with
non_blocking=True next to a blocking copy from ordinary memory, side by side
in one run. Prints how long the call takes to return, how long until the data
is on the device (synchronize), and how many non_blocking copies were still
reading host memory when their call returned (0 would mean the copy was not
asynchronous)."""
import argparse
import statistics
import time

import torch

import torch_tpu


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mib", type=int, default=64)
    p.add_argument("--repeats", type=int, default=9)
    a = p.parse_args()
    n = a.mib * 2**20 // 4
    plain = torch.randn(n)
    pinned = plain.pin_memory()
    ret = {"pinned non_blocking": [], "plain blocking": []}
    total = {"pinned non_blocking": [], "plain blocking": []}
    in_flight = 0
    for _ in range(a.repeats):
        for label, src, nb in (("pinned non_blocking", pinned, True), ("plain blocking", plain, False)):
            torch.tpu.synchronize()
            start = time.perf_counter()
            d = src.to("tpu", non_blocking=nb)
            ret[label].append(time.perf_counter() - start)
            if nb:
                in_flight += torch_tpu._C._pending_pinned_reads() > 0
            torch.tpu.synchronize()
            total[label].append(time.perf_counter() - start)
            del d
    assert torch.equal(pinned.to("tpu", non_blocking=True).cpu(), plain)
    print(f"platform: {torch_tpu.platform()['platform_name']}; {a.mib} MiB, median of {a.repeats}")
    for label in ret:
        print(f"  {label:20s} returns after {statistics.median(ret[label]) * 1e3:7.2f} ms, "
              f"data on device after {statistics.median(total[label]) * 1e3:7.2f} ms")
    r = statistics.median(ret["plain blocking"]) / statistics.median(ret["pinned non_blocking"])
    print(f"  call returns {r:.1f}x sooner with pinned non_blocking; "
          f"{in_flight}/{a.repeats} copies still reading host memory at return")


if __name__ == "__main__":
    main()
