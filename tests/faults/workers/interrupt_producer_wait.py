"""`interrupt_producer_wait.py`: defer_and_fuse with a small graph bound,
so a long chain becomes graphs that run one after another on the worker.
Reading the last result flushes the last graph, which first waits for the
graph producing its inputs; a SIGINT during that wait raises
KeyboardInterrupt, and the graph interrupted before it was launched stays
pending: reading the result again computes it, equal to the CPU's. Prints
a JSON summary."""
import json
import os
import signal
import threading

import torch

import torch_tpu

# A process started with SIGINT ignored (a background job of a shell script)
# passes that on, and Python then installs no handler: take it back.
signal.signal(signal.SIGINT, signal.default_int_handler)

torch_tpu.set_eager_mode("defer_and_fuse")
g = torch.Generator().manual_seed(0)
a_cpu = torch.randn(512, 512, generator=g) / 16
a = a_cpu.to("tpu")
STEPS = 120  # TORCH_TPU_FUSE_MAX_OPS=100: the chain's 240 ops make three graphs
ref = a_cpu
for _ in range(STEPS):
    ref = torch.tanh(ref @ a_cpu)
y = a  # recorded last, so that the graphs still run when it is read
for _ in range(STEPS):
    y = torch.tanh(y @ a)
threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
out = dict(interrupted=False)
try:
    y.cpu()
except KeyboardInterrupt:
    out["interrupted"] = True
    out["in_flight_at_interrupt"] = torch_tpu._C._graphs_in_flight()
# 120 layers of rounding: the CPU's result differs by ~5e-3; an unread or
# zeroed graph by ~1.
out["right"] = bool(torch.allclose(y.cpu(), ref, rtol=1e-2, atol=2e-2))
print(json.dumps(out))
