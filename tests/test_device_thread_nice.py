"""TORCH_TPU_DEVICE_THREAD_NICE and torch_tpu._C._set_device_thread_nice:
the nice value of the threads the plugin starts with its client (on XLA's
CPU plugin its worker pool, threads named tf_XLAEigen), read back per thread
from the kernel; every other thread keeps its own."""
import pytest
import torch_tpu

NICE_OF_THREADS = """
import os, threading, torch, torch_tpu
torch.ones(2, device="tpu")   # creates the client
CALL
torch.ones(2, device="tpu").add(1).cpu()   # threads started later keep their own value
workers = {os.getpriority(os.PRIO_PROCESS, int(t)) for t in os.listdir("/proc/self/task")
           if open(f"/proc/self/task/{t}/comm").read().startswith("tf_XLA")}
print(sorted(workers), os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
"""


@pytest.fixture
def nices(run_python):
    """nices(call, **env): "[the workers' nice values] the main thread's"."""
    if torch_tpu.platform()["plugin_reason"] != "xla-cpu-pjrt":
        pytest.skip("the worker threads are told apart by the names XLA's CPU plugin gives them")

    def run(call="", **env):
        r = run_python(NICE_OF_THREADS.replace("CALL", call), **env)
        assert r.returncode == 0, r.stderr[-3000:]
        return r.stdout.strip().splitlines()[-1]

    return run


def test_unset_leaves_every_thread_as_started(nices):
    assert nices(TORCH_TPU_DEVICE_THREAD_NICE=None) == "[0] 0"


def test_variable_sets_the_plugins_workers_not_the_caller(nices):
    assert nices(TORCH_TPU_DEVICE_THREAD_NICE="7") == "[7] 0"


def test_call_sets_them_and_the_variable_wins(nices):
    call = "torch_tpu._C._set_device_thread_nice(5)"
    assert nices(call, TORCH_TPU_DEVICE_THREAD_NICE=None) == "[5] 0"
    assert nices(call, TORCH_TPU_DEVICE_THREAD_NICE="3") == "[3] 0"


@pytest.mark.parametrize("value", ["20", "-21", "five", "5x", " 5", "1.5", "-", "007"])
def test_bad_value_is_clear_error(start_failure, value):
    for e in start_failure(TORCH_TPU_DEVICE_THREAD_NICE=value):
        assert "TORCH_TPU_DEVICE_THREAD_NICE" in e and f"'{value}'" in e, e
