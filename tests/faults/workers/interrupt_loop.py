"""`interrupt_loop.py MODE ROUNDS`: runs a loop of tpu ops (MODE: strict or
defer_and_fuse) while its parent sends SIGINT at random moments. Each
KeyboardInterrupt is caught; then every tensor the loop produced so far
must equal the CPU's (pending work finished, never half-written) and new
work must run. Prints "ready" first and a JSON summary last."""
import json
import signal
import sys

import torch

import torch_tpu

# A process started with SIGINT ignored (a background job of a shell script)
# passes that on, and Python then installs no handler: take it back.
signal.signal(signal.SIGINT, signal.default_int_handler)

mode, rounds = sys.argv[1], int(sys.argv[2])
torch_tpu.set_eager_mode(mode)
g = torch.Generator().manual_seed(0)
w_cpu = torch.randn(64, 64, generator=g) * 0.1
w = w_cpu.to("tpu")
# A half-written or stale result is off by O(1); the values are an mm's
# chain, so the table's mm tolerance applies (after interrupts, a few
# values were seen 2.5-5e-5 off: inside it, 100x the usual deviation).
rtol, atol = torch_tpu.tolerance(torch.float32, "aten::mm")
interrupts, wrong, steps = 0, 0, 0
print("ready", flush=True)
while interrupts < rounds:
    done = []
    # The round's first ops are inside the try too: a SIGINT may land in any
    # of them (once it landed in the CPU randn and ended the worker).
    try:
        x_cpu = torch.randn(64, 64, generator=g)
        x = x_cpu.to("tpu")
        for i in range(200):
            x = torch.tanh(x @ w) + 0.5
            x_cpu = torch.tanh(x_cpu @ w_cpu) + 0.5
            done.append((x, x_cpu))
            if i % 7 == 0:
                torch.tpu.synchronize()
            steps += 1
    except KeyboardInterrupt:
        interrupts += 1
        print("interrupt", interrupts, flush=True)
    # A SIGINT may also land while the results are checked: it counts, and
    # the check starts over (nothing it reads may have been half-written).
    while True:
        try:
            bad = sum(not torch.allclose(t.cpu(), ref, rtol=rtol, atol=atol) for t, ref in done)
            bad += not torch.equal((torch.ones(3).to("tpu") * 2).cpu(), torch.full((3,), 2.0))
            break
        except KeyboardInterrupt:
            interrupts += 1
            print("interrupt", interrupts, flush=True)
    wrong += bad
print(json.dumps(dict(mode=mode, interrupts=interrupts, wrong=wrong, steps=steps)))
