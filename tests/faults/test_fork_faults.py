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


def test_fork_before_init_uses_tpu_normally(fault):
    # Nothing to inherit: a child forked before the runtime started may start its own.
    code = """
import multiprocessing as mp, torch, torch_tpu
def child(q):
    q.put((torch.arange(4.0).to("tpu") + 1).sum().item())
ctx = mp.get_context("fork")
q = ctx.Queue(); p = ctx.Process(target=child, args=(q,)); p.start(); p.join(120)
assert p.exitcode == 0, p.exitcode
assert q.get(timeout=5) == 10.0
print("ok")
"""
    assert "ok" in fault.run(code=code).stdout
