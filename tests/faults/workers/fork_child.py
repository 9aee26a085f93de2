"""`fork_child.py`: forks children after the parent used tpu and reports
each outcome as JSON: a child that touches tpu (through an op, an inherited
tensor, torch.tpu.synchronize) must raise a RuntimeError naming 'spawn'; one
that does not must run normally; DataLoader workers must work; a 'spawn'
child may use tpu."""
import json
import multiprocessing as mp
import os

import torch

import torch_tpu

inherited = torch.arange(6.0).to("tpu") * 2


def new_op(q):
    (torch.ones(2, device="tpu") + 1).cpu()


def read_inherited(q):
    inherited.cpu()


def sync(q):
    torch.tpu.synchronize()


def expect_spawn_error(f):
    def run(q):
        try:
            f(q)
            q.put("no error")
        except RuntimeError as e:
            q.put("spawn" if "'spawn' start method" in str(e) else "other: " + str(e)[:300])
    return run


CASES = {"new_op": new_op, "read_inherited": read_inherited, "synchronize": sync}


def child(name, q):
    if name == "cpu_only":
        q.put(float((torch.arange(5.0) * 3).sum()))
    elif name == "bad_fork_flag":
        q.put(torch.tpu._is_in_bad_fork() and not torch.tpu.is_initialized())
    elif name == "spawn_uses_tpu":
        q.put(float((torch.arange(5.0).to("tpu") * 3).sum().item()))
    else:
        expect_spawn_error(CASES[name])(q)


def run(ctx_name, name):
    ctx = mp.get_context(ctx_name)
    q = ctx.Queue()
    p = ctx.Process(target=child, args=(name, q))
    p.start()
    p.join(60)
    if p.exitcode is None:
        p.kill()
        return "hang"
    if p.exitcode != 0:
        return f"exit {p.exitcode}"
    return q.get(timeout=10)


if __name__ == "__main__":
    out = {}
    for name in ("new_op", "read_inherited", "synchronize", "cpu_only", "bad_fork_flag"):
        out[name] = run("fork", name)
    out["spawn_uses_tpu"] = run("spawn", "spawn_uses_tpu")
    data = torch.utils.data.TensorDataset(torch.arange(40.0).reshape(20, 2), torch.arange(20))
    loader = torch.utils.data.DataLoader(data, batch_size=3, num_workers=2, shuffle=True,
                                         generator=torch.Generator().manual_seed(0))
    total = 0.0
    for x, y in loader:
        total += (x.to("tpu") * y.to("tpu")[:, None]).sum().item()
    out["dataloader"] = total
    out["dataloader_expected"] = float((torch.arange(40.0).reshape(20, 2) * torch.arange(20)[:, None]).sum())
    out["parent_ok"] = inherited.cpu().tolist()
    print(json.dumps(out))
