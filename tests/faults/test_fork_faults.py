"""Fork safety (common/fork_guard.h): after the runtime started, a forked
child that uses tpu raises a RuntimeError naming the 'spawn' start method
instead of hanging; one that does not use it, and DataLoader workers, run
normally."""


def test_fork_after_init(fault):
    s = fault.summary(fault.run("fork_child", timeout=400))
    for case in ("new_op", "read_inherited", "synchronize"):
        assert s[case] == "spawn", (case, s[case])
    assert s["cpu_only"] == float(sum(range(5)) * 3)
    assert s["bad_fork_flag"] is True
    assert s["spawn_uses_tpu"] == float(sum(range(5)) * 3)
    assert s["dataloader"] == s["dataloader_expected"]
    assert s["parent_ok"] == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]


def test_fork_before_the_runtime_starts(fault):
    # import torch_tpu starts the runtime, so the guard covers every child
    # forked after it; a child forked before it starts its own runtime.
    code = """
import os
pid = os.fork()
if pid == 0:
    import torch, torch_tpu
    ok = (torch.arange(4.0).to("tpu") + 1).sum().item() == 10.0
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
print("child status", status)
"""
    assert "child status 0" in fault.run(code=code).stdout
