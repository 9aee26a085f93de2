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
    # A child forked before the parent imported torch starts its own runtime.
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


def test_fork_after_import_before_first_use(fault):
    # Importing starts no runtime (that is the first use of a device), so a
    # child forked after `import torch` may use tpu, and so may the parent.
    code = """
import os
import torch, torch_tpu
assert not torch.tpu.is_initialized()
pid = os.fork()
if pid == 0:
    ok = (torch.arange(4.0).to("tpu") + 1).sum().item() == 10.0
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
print("child status", status, "parent", (torch.arange(3.0).to("tpu") * 2).sum().item())
"""
    assert "child status 0 parent 6.0" in fault.run(code=code).stdout
