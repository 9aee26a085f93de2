"""Ray Train on tpu: a `TorchTrainer` with 2 workers on `tpu_dist`, DDP or
FSDP2, against one process training on the whole batch.

    make ray-env
    .venv-ray/bin/python examples/ray_train.py                  # DDP
    .venv-ray/bin/python examples/ray_train.py --strategy fsdp2

A local Ray (127.0.0.1, no dashboard) is started as a fake single-host v6e
TPU VM of four chips (`resources={"TPU": 4}`: this machine has none), and Ray
schedules the workers as on a real one: `use_tpu=True` with Ray's smallest
v6e topology, 2x2, and two chips per worker (Ray 2.60 has no 2-chip slice, so
one chip each would need four workers), named in each worker's
TPU_VISIBLE_CHIPS ("0,1" and "2,3"). Here the chips are XLA CPU plugin
devices (TORCH_TPU_CPU_DEVICES=4), and each worker sees its first chip as
tpu:0. `ray.train.torch.get_device()` answers that device and
`prepare_model` moves the model to it; Ray calls `torch_tpu._loader.load()`
before `init_process_group("tpu_dist")`.
`--ray-chooses-backend` leaves `TorchConfig()`'s backend unset: Ray picks
`tpu_dist` itself for workers with TPU resources. `--no-tpu-resources` runs
plain CPU workers with `TorchConfig(backend="tpu_dist")` instead: Ray's device
is then the CPU, so the workers pick their tpu device themselves
(torch_tpu.distributed.local_device()).

Each step's loss, averaged over the workers (each has half of the batch),
equals the loss of one process on the whole batch; the last line is a JSON
summary (tests_ray/ reads it).
"""
import argparse
import json
import os
import sys
import tempfile

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch_tpu

STEPS = 5
BATCH, IN, HIDDEN, CLASSES = 16, 16, 32, 4
WORKERS, CHIPS = 2, 4


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(IN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(),
                         nn.Linear(HIDDEN, CLASSES))


def make_batch():
    g = torch.Generator().manual_seed(1)
    return torch.randn(BATCH, IN, generator=g), torch.randint(0, CLASSES, (BATCH,), generator=g)


def train(model, x, y, device):
    """STEPS of SGD with momentum; the loss of each step."""
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x, y = x.to(device), y.to(device)
    losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return [l.item() for l in losses]


def train_loop_per_worker(config):
    """One Ray Train worker: its half of the batch, its tpu device."""
    import ray.train
    import ray.train.torch
    import torch.distributed as dist

    ctx = ray.train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    device = ray.train.torch.get_device()
    if device.type != "tpu":  # no TPU resources: Ray's device is the CPU
        device = torch_tpu.distributed.local_device()
    model = make_model()
    if config["strategy"] == "ddp":
        model = ray.train.torch.prepare_model(model, move_to_device=device)
    else:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        model = ray.train.torch.prepare_model(model, move_to_device=device, parallel_strategy=None)
        mesh = init_device_mesh("tpu", (world,))
        for layer in model:
            if isinstance(layer, nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
    x, y = make_batch()
    losses = train(model, x.chunk(world)[rank], y.chunk(world)[rank], device)
    first = next(model.parameters())
    seen = dict(rank=rank, losses=losses, ray_device=str(ray.train.torch.get_device()),
                model=type(model).__name__, param=type(first).__name__,
                param_device=str(first.device), visible_chips=os.environ.get("TPU_VISIBLE_CHIPS"),
                device_count=torch.tpu.device_count(), backend=dist.get_backend(),
                plugin_device_id=torch.tpu.get_device_properties(device).plugin_device_id)
    workers = [None] * world
    dist.all_gather_object(workers, seen)
    # Ray Train keeps the metrics that come with a checkpoint: rank 0 reports one.
    with tempfile.TemporaryDirectory() as folder:
        checkpoint = ray.train.Checkpoint.from_directory(folder) if rank == 0 else None
        ray.train.report({"workers": workers}, checkpoint=checkpoint)


def run_ray(strategy, tpu_resources, backend, storage):
    import ray
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    # The workers' plugin has one device per chip of the fake TPU VM.
    env = {"TORCH_TPU_CPU_DEVICES": str(CHIPS), "RAY_USAGE_STATS_ENABLED": "0",
           # Ray's memory monitor kills workers when the node's memory is
           # nearly full, whoever fills it: off on a machine shared with others.
           "RAY_memory_monitor_refresh_ms": "0"}
    os.environ.update(env)
    resources = {"TPU": CHIPS, "accelerator_type:TPU-V6E": 1} if tpu_resources else {}
    ray.init(num_cpus=WORKERS, resources=resources, include_dashboard=False,
             _node_ip_address="127.0.0.1", object_store_memory=100 << 20, runtime_env={"env_vars": env})
    try:
        if tpu_resources:
            scaling = ScalingConfig(num_workers=WORKERS, use_tpu=True, topology="2x2", accelerator_type="TPU-V6E",
                                    resources_per_worker={"TPU": CHIPS // WORKERS})
        else:
            scaling = ScalingConfig(num_workers=WORKERS)
        trainer = TorchTrainer(train_loop_per_worker, train_loop_config={"strategy": strategy},
                               torch_config=TorchConfig(backend=backend), scaling_config=scaling,
                               run_config=RunConfig(storage_path=storage, name=f"ray_train_{strategy}"))
        return trainer.fit().metrics["workers"]
    finally:
        ray.shutdown()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strategy", choices=["ddp", "fsdp2"], default="ddp")
    parser.add_argument("--no-tpu-resources", dest="tpu_resources", action="store_false",
                        help="CPU workers with TorchConfig(backend='tpu_dist'), no fake TPU chips")
    parser.add_argument("--ray-chooses-backend", dest="backend", action="store_const", const=None,
                        default="tpu_dist", help="TorchConfig() without a backend: Ray picks tpu_dist")
    args = parser.parse_args()
    if args.backend is None and not args.tpu_resources:
        parser.error("Ray picks tpu_dist only for workers with TPU resources")

    with tempfile.TemporaryDirectory() as storage:
        workers = run_ray(args.strategy, args.tpu_resources, args.backend, storage)

    x, y = make_batch()
    single = train(make_model().to("tpu"), x, y, torch.device("tpu"))
    averaged = [sum(w["losses"][i] for w in workers) / len(workers) for i in range(STEPS)]
    print(f"{'step':>4} {'2 Ray workers (mean)':>22} {'1 process':>12}")
    for i, (a, b) in enumerate(zip(averaged, single)):
        print(f"{i:>4} {a:>22.7f} {b:>12.7f}")
    for w in workers:
        print(f"worker {w['rank']}: TPU_VISIBLE_CHIPS={w['visible_chips']} sees {w['device_count']} device(s); "
              f"Ray's device {w['ray_device']}; {w['model']} with {w['param']} parameters on "
              f"{w['param_device']} (plugin device {w['plugin_device_id']}); backend {w['backend']}")
    rtol, atol = torch_tpu.tolerance(torch.float32)
    ok = torch.allclose(torch.tensor(averaged), torch.tensor(single), rtol=rtol, atol=atol)
    print("losses match" if ok else "LOSSES DIFFER")
    print(json.dumps(dict(strategy=args.strategy, tpu_resources=args.tpu_resources, backend=args.backend,
                          workers=workers, averaged=averaged, single=single, match=ok)))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
