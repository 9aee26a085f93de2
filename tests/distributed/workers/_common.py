"""Shared by the worker scripts: process-group setup and result reporting."""
import json
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch_tpu  # noqa: F401  (registers tpu and tpu_dist)


def init(backend="tpu_dist", timeout_s=30, **kwargs):
    dist.init_process_group(backend, timeout=timedelta(seconds=timeout_s), **kwargs)
    torch.tpu.set_device(int(os.environ["LOCAL_RANK"]))
    return dist.get_rank(), dist.get_world_size(), torch.device("tpu", int(os.environ["LOCAL_RANK"]))


def report(data):
    with open(os.environ["TPU_DIST_RESULT"], "w") as f:
        json.dump(data, f)
