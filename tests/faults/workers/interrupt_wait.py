"""`interrupt_wait.py MODE`: a SIGINT sent while the main thread waits for a
long graph (torch.tpu.synchronize) raises KeyboardInterrupt during the wait:
work is still in progress when it is caught (launches running, or in
defer_and_fuse the fused graph compiling or running on the worker). The result is then
complete and right. Prints a JSON summary."""
import json
import os
import signal
import sys
import threading
import time

import torch

import torch_tpu

# A process started with SIGINT ignored (a background job of a shell script)
# passes that on, and Python then installs no handler: take it back.
signal.signal(signal.SIGINT, signal.default_int_handler)

torch_tpu.set_eager_mode(sys.argv[1])
g = torch.Generator().manual_seed(0)
# The CPU plugin lets 32 launches run at once and blocks the host on the
# next: what is left when the host has issued everything is those 32
# launches, not the whole loop. At 2048 they hold more than a second of
# work (at 1024 about 0.3 s, which a SIGINT 0.2 s later often missed).
N = 2048
a_cpu = torch.randn(N, N, generator=g) / 45
a = a_cpu.to("tpu")
(a @ a).cpu()  # compiled beforehand: the wait is for running, not compiling
(torch.tanh(a @ a)).cpu()
STEPS = 32
y = a
for _ in range(STEPS):
    y = torch.tanh(y @ a)
start = time.monotonic()
threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
out = dict(interrupted=False)
try:
    torch.tpu.synchronize()
except KeyboardInterrupt:
    out["interrupted"] = True
    out["in_progress_at_interrupt"] = (torch_tpu._C._launches_in_progress() +
                                       torch_tpu._C._graphs_in_flight())
    out["seconds_to_interrupt"] = time.monotonic() - start
ref = a_cpu
for _ in range(STEPS):
    ref = torch.tanh(ref @ a_cpu)
out["seconds_to_finish"] = None
got = y.cpu()
out["seconds_to_finish"] = time.monotonic() - start
out["right"] = bool(torch.allclose(got, ref, rtol=1e-3, atol=1e-4))
print(json.dumps(out))
