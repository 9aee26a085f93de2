"""Fault scenarios (argv[1]); every surviving rank must raise, naming the
collective, within the group's timeout instead of hanging.
  killed:       rank 1 is SIGKILLed after init; rank 0 runs all_reduce.
  silent:       rank 1 stays alive but never calls; rank 0 runs all_gather.
  never_joins:  only rank 0 is started; init_process_group itself must fail."""
import os
import signal
import sys
import time

import torch

from _common import dist, init, report

TIMEOUT_S = 5
scenario = sys.argv[1]
start = time.monotonic()
outcome = dict(scenario=scenario)
try:
    rank, world, dev = init(timeout_s=TIMEOUT_S)
    outcome["init_s"] = time.monotonic() - start
    dist.barrier()
    if scenario == "killed" and rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    if scenario == "silent" and rank == 1:
        time.sleep(TIMEOUT_S + 3)
        os._exit(0)
    time.sleep(0.5)  # let the kill land before the collective starts
    t0 = time.monotonic()
    try:
        if scenario == "killed":
            dist.all_reduce(torch.ones(4, device=dev))
        else:
            out = torch.zeros(2 * world, device=dev)
            dist.all_gather_into_tensor(out, torch.ones(2, device=dev))
        outcome["error"] = None
    except RuntimeError as e:
        outcome["error"] = str(e)
    outcome["collective_s"] = time.monotonic() - t0
except RuntimeError as e:
    outcome["error"] = str(e)
    outcome["init_failed_s"] = time.monotonic() - start
report(outcome)
os._exit(0)  # skip destroy_process_group: the peer is gone
