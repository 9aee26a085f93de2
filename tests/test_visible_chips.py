"""TPU_VISIBLE_CHIPS: a process sees the listed chips as tpu:0, tpu:1..., as
CUDA_VISIBLE_DEVICES does; on the CPU plugin they index its
TORCH_TPU_CPU_DEVICES devices (each test starts its own interpreter: the
variable is read once, when the process first uses tpu)."""
import json
import os
import subprocess
import sys

import pytest
import torch_tpu

SEEN = """
import json, torch, torch_tpu
n = torch.tpu.device_count()
ids = [torch.tpu.get_device_properties(i).plugin_device_id for i in range(n)]
# each visible device computes, and its result lands on the plugin device listed
placed = []
for i in range(n):
    t = torch.arange(4.0, device=f"tpu:{i}") * (i + 1)
    placed.append([str(t.device), t.cpu().tolist()])
table = dict((name, v) for name, _, v in torch_tpu.env_table())["TPU_VISIBLE_CHIPS"]
print(json.dumps(dict(count=n, accelerator_count=torch.accelerator.device_count(), ids=ids,
                      placed=placed, table=table)))
"""


@pytest.fixture(autouse=True)
def _cpu_plugin():
    if torch_tpu.platform()["platform_name"] != "cpu":
        pytest.skip("the chips index TORCH_TPU_CPU_DEVICES devices on the CPU plugin only")


@pytest.fixture(scope="module")
def all_ids():
    """The CPU plugin's 4 device ids, in its order, seen with no TPU_VISIBLE_CHIPS."""
    env = {k: v for k, v in os.environ.items() if k != "TPU_VISIBLE_CHIPS"}
    r = subprocess.run([sys.executable, "-c", SEEN], capture_output=True, text=True, timeout=180,
                       env={**env, "TORCH_TPU_CPU_DEVICES": "4"}, cwd="/tmp")
    assert r.returncode == 0, r.stderr[-3000:]
    ids = json.loads(r.stdout.strip().splitlines()[-1])["ids"]
    assert len(set(ids)) == 4, ids
    return ids


@pytest.mark.parametrize("chips", ["2,3", "3,0", "1"])
def test_process_sees_the_listed_chips_from_tpu0(run_python, all_ids, chips):
    r = run_python(SEEN, TORCH_TPU_CPU_DEVICES="4", TPU_VISIBLE_CHIPS=chips)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    listed = [int(c) for c in chips.split(",")]
    assert got["count"] == got["accelerator_count"] == len(listed)
    # tpu:i is the plugin's device listed i-th
    assert got["ids"] == [all_ids[c] for c in listed]
    assert got["placed"] == [[f"tpu:{i}", [0.0, i + 1.0, 2 * (i + 1.0), 3 * (i + 1.0)]]
                             for i in range(len(listed))]
    assert got["table"] == chips


def test_read_at_first_use_not_at_import(run_python, all_ids):
    # A launcher (Ray) may set the chips in a worker that imported torch, and
    # so loaded torch_tpu, already: as CUDA_VISIBLE_DEVICES, they count from
    # the first use of the device.
    late = "import os, torch, torch_tpu\nos.environ['TPU_VISIBLE_CHIPS'] = '3,1'\n" + SEEN
    r = run_python(late, TORCH_TPU_CPU_DEVICES="4", TPU_VISIBLE_CHIPS=None)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["ids"] == [all_ids[3], all_ids[1]] and got["table"] == "3,1"


def test_a_chip_past_the_plugins_devices_is_an_error(start_failure):
    for e in start_failure(TORCH_TPU_CPU_DEVICES="2", TPU_VISIBLE_CHIPS="1,2"):
        assert "TPU_VISIBLE_CHIPS" in e and "chip 2" in e and "2 device(s)" in e, e
        assert "TORCH_TPU_CPU_DEVICES" in e, e


@pytest.mark.parametrize("value,why", [
    ("", "empty"), ("1,1", "chip 1 twice"), ("0,,1", "separated by commas"), ("-1", "separated by commas"),
    ("1,", "separated by commas"), ("0;1", "separated by commas"),
])
def test_garbage_is_an_error_at_init(start_failure, value, why):
    for e in start_failure(TORCH_TPU_CPU_DEVICES="4", TPU_VISIBLE_CHIPS=value):
        assert "TPU_VISIBLE_CHIPS" in e and why in e, e
        if value:
            assert f"'{value}'" in e, e
