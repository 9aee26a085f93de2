"""`interrupt_producer_wait.py`: defer_and_fuse with a small graph bound,
so a long chain becomes graphs that run one after another on the worker.
Reading the last result flushes the last graph, which first waits for the
graph producing its inputs; a SIGINT during that wait raises
KeyboardInterrupt, and the graph interrupted before it was launched stays
pending: reading the result again computes it, equal to the CPU's. Prints
a JSON summary.

How long the chain takes depends on the machine (and on whether its
programs are compiled yet), so one fixed delay can land after the graphs
have run (nothing is in flight then). The worker records a fresh chain and
tries again with a shorter delay until a signal lands while graphs are in
flight."""
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

torch_tpu.set_eager_mode("defer_and_fuse")
STEPS = 120  # TORCH_TPU_FUSE_MAX_OPS=100: the chain's 240 ops make three graphs


def attempt(delay, n):
    # A new size each time: the programs compile again, and a graph waits
    # for its producer while the producer compiles.
    # An orthogonal `a`: the chain neither amplifies rounding nor fades to
    # zero. (A random `a` of gain 1.4 was chaotic: its 120 layers grew the
    # CPU's rounding differences 1000-fold, past the tolerance on another
    # machine's kernels.)
    g = torch.Generator().manual_seed(n)
    a_cpu = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))[0].float()
    x_cpu = torch.randn(n, n, generator=g)
    ref = x_cpu
    for _ in range(STEPS):
        ref = torch.tanh(ref @ a_cpu)
    a = a_cpu.to("tpu")
    y = x_cpu.to("tpu")  # recorded last, so that the graphs still run when it is read
    for _ in range(STEPS):
        y = torch.tanh(y @ a)
    out = dict(interrupted=False, delay=delay, in_flight_at_interrupt=0)
    timer = threading.Timer(delay, os.kill, (os.getpid(), signal.SIGINT))
    try:
        try:
            timer.start()
            y.cpu()
        finally:
            timer.cancel()
            timer.join()
            time.sleep(0.05)  # a signal sent after the read is taken here
    except KeyboardInterrupt:
        out["interrupted"] = True
        out["in_flight_at_interrupt"] = torch_tpu._C._graphs_in_flight()
    # The CPU's result differs by ~2e-6; a zeroed result by ~0.3 and one
    # graph's 40 or 100 layers left out by more than 1e-3.
    out["right"] = bool(torch.allclose(y.cpu(), ref, rtol=1e-3, atol=1e-4))
    return out


for k, delay in enumerate((0.2, 0.1, 0.05, 0.02, 0.01, 0.005, 0.0)):
    out = attempt(delay, 512 - 8 * k)
    print(json.dumps(out), file=sys.stderr)
    if out["interrupted"] and out["in_flight_at_interrupt"] > 0:
        break
print(json.dumps(out))
