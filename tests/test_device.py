"""Device registration: torch.tpu, torch.accelerator, device strings, the
`torch.backends` entry point."""
import importlib.metadata

import pytest
import torch
import torch_tpu


def test_is_available_and_count():
    assert torch.tpu.is_available() is True
    n = torch.tpu.device_count()
    assert isinstance(n, int) and n >= 1
    assert torch.accelerator.device_count() == n
    assert torch.accelerator.is_available()


def test_suite_has_the_cpu_devices_it_asked_for():
    # conftest.py asks the CPU plugin for 4 devices; fewer would turn the
    # multi-device tests into skips.
    import os
    if torch_tpu.platform()["platform_name"] != "cpu":
        pytest.skip("TORCH_TPU_CPU_DEVICES is for the CPU plugin")
    assert os.environ["TORCH_TPU_CPU_DEVICES"] == "4"
    assert torch.tpu.device_count() == 4
    assert dict((n, v) for n, _, v in torch_tpu.env_table())["TORCH_TPU_CPU_DEVICES"] == "4"


COUNT_DEVICES = """
import torch, torch_tpu
print(torch.tpu.device_count(), torch.accelerator.device_count(),
      dict((n, v) for n, _, v in torch_tpu.env_table())["TORCH_TPU_CPU_DEVICES"])
last = torch.tpu.device_count() - 1
x = torch.arange(3.0).to(f"tpu:{last}")
assert x.device == torch.device("tpu", last) and torch.equal(x.cpu(), torch.arange(3.0))
try:
    torch.ones(2).to(f"tpu:{last + 1}")
    print("NO ERROR")
except RuntimeError as e:
    print("RuntimeError:", e)
"""


def _cpu_plugin_path():
    p = torch_tpu.platform()
    if p["platform_name"] != "cpu":
        pytest.skip("TORCH_TPU_CPU_DEVICES is for the CPU plugin")
    return p["plugin_path"]


def test_cpu_plugin_has_one_device_by_default(run_python):
    # As JAX's CPU backend: one device unless more are asked for.
    _cpu_plugin_path()
    r = run_python(COUNT_DEVICES, TORCH_TPU_CPU_DEVICES=None)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.strip().splitlines()
    assert lines[0] == "1 1 1"
    # the plugin's INFO line about the option stays out of the user's stderr
    assert "cpu_device_count" not in r.stderr and "absl" not in r.stderr, r.stderr
    assert lines[1].startswith("RuntimeError:") and "tpu:1" in lines[1], lines


@pytest.mark.parametrize("how", ["discovered", "TORCH_TPU_PJRT_PLUGIN"])
def test_cpu_plugin_has_the_devices_asked_for(run_python, how):
    # The count reaches the plugin however it was found: discovered, or named
    # by TORCH_TPU_PJRT_PLUGIN (then the runtime asks the client its platform).
    path = _cpu_plugin_path()
    plugin = {"TORCH_TPU_PJRT_PLUGIN": path} if how != "discovered" else {"TORCH_TPU_PJRT_PLUGIN": None}
    r = run_python(COUNT_DEVICES, TORCH_TPU_CPU_DEVICES="3", **plugin)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.strip().splitlines()
    assert lines[0] == "3 3 3"
    assert lines[1].startswith("RuntimeError:") and "tpu:3" in lines[1], lines


@pytest.mark.parametrize("value", ["0", "-1", "four", "4x", "2.0", " 2", "99999999999999999999"])
def test_bad_cpu_devices_is_clear_error(start_failure, value):
    for e in start_failure(TORCH_TPU_CPU_DEVICES=value):
        assert "TORCH_TPU_CPU_DEVICES" in e and f"'{value}'" in e, e


def test_current_accelerator_is_tpu():
    acc = torch.accelerator.current_accelerator()
    assert acc.type == "tpu"
    torch.accelerator.synchronize()
    torch.tpu.synchronize()
    torch.tpu.synchronize(0)
    torch.tpu.synchronize("tpu:0")


def test_platform_names_plugin():
    p = torch_tpu.platform()
    assert p["plugin_path"].endswith(".so")
    assert "xla_cpu_pjrt" in p["plugin_path"]  # the CPU plugin in tests and CI
    assert p["platform_name"] == "cpu"
    major, minor = p["pjrt_api_version"].split(".")
    assert int(major) >= 0 and int(minor) > 0


def test_device_name_and_properties():
    props = torch.tpu.get_device_properties()
    assert props == torch.tpu.get_device_properties(0) == torch.tpu.get_device_properties("tpu:0")
    name = torch.tpu.get_device_name()
    assert isinstance(name, str) and name
    assert name == props.name
    assert props.platform_name == torch_tpu.platform()["platform_name"]
    assert props.plugin_path == torch_tpu.platform()["plugin_path"]


def test_device_strings():
    d = torch.device("tpu")
    assert d.type == "tpu" and d.index is None
    d0 = torch.device("tpu:0")
    assert d0.type == "tpu" and d0.index == 0
    t = torch.arange(3.0).to("tpu")
    assert t.device == d0
    assert str(t.device) == "tpu:0"


def test_current_and_set_device():
    n = torch.tpu.device_count()
    assert torch.tpu.current_device() == 0
    if n < 2:
        pytest.skip("needs two devices")
    try:
        torch.tpu.set_device(1)
        assert torch.tpu.current_device() == 1
        assert torch.accelerator.current_device_index() == 1
        assert torch.empty(2, device="tpu").device == torch.device("tpu:1")
        assert torch.arange(2.0).to("tpu").device == torch.device("tpu:1")
    finally:
        torch.tpu.set_device(0)
    assert torch.tpu.current_device() == 0
    with torch.tpu.device(1):
        assert torch.tpu.current_device() == 1
    assert torch.tpu.current_device() == 0


def test_set_device_out_of_range_raises():
    with pytest.raises(RuntimeError, match="tpu:99"):
        torch.tpu.set_device(99)
    assert torch.tpu.current_device() == 0


def test_op_on_second_device():
    if torch.tpu.device_count() < 2:
        pytest.skip("needs two devices")
    x = torch.arange(6.0)
    t = x.to("tpu:1")
    assert t.device == torch.device("tpu:1")
    r = t + 1
    assert r.device == torch.device("tpu:1")
    torch.testing.assert_close(r.cpu(), x + 1)


def test_is_tpu_and_tpu_methods():
    c = torch.arange(4.0)
    assert not c.is_tpu
    t = c.tpu()
    assert t.is_tpu and t.device == torch.device("tpu:0")
    torch.testing.assert_close(t.cpu(), c)
    if torch.tpu.device_count() > 1:
        assert c.tpu(1).device == torch.device("tpu:1")


def test_module_tpu():
    torch.manual_seed(0)
    m = torch.nn.Linear(3, 2)
    ref = {k: v.clone() for k, v in m.state_dict().items()}
    m.tpu()
    for k, p in m.state_dict().items():
        assert p.device == torch.device("tpu:0")
        torch.testing.assert_close(p.cpu(), ref[k])
    assert all(p.is_tpu for p in m.parameters())


def test_manual_seed_and_rng_state():
    torch.tpu.manual_seed(1234)
    assert torch.tpu.initial_seed() == 1234
    state = torch.tpu.get_rng_state()
    assert state.device.type == "cpu" and state.dtype == torch.uint8
    torch.tpu.manual_seed(99)
    assert torch.tpu.initial_seed() == 99
    assert not torch.equal(torch.tpu.get_rng_state(), state)
    torch.tpu.set_rng_state(state)
    assert torch.tpu.initial_seed() == 1234
    assert torch.equal(torch.tpu.get_rng_state(), state)


def test_manual_seed_all_and_torch_manual_seed():
    torch.tpu.manual_seed_all(77)
    for i in range(torch.tpu.device_count()):
        assert torch.tpu.get_rng_state(i).tolist() == torch.tpu.get_rng_state(0).tolist()
    torch.manual_seed(4321)  # torch seeds every registered device module
    assert torch.tpu.initial_seed() == 4321


def test_rng_state_reproduces_random_numbers(require_ops):
    require_ops("aten::uniform")
    torch.tpu.manual_seed(5)
    s = torch.tpu.get_rng_state()
    a = torch.rand(100, device="tpu").cpu()
    b = torch.rand(100, device="tpu").cpu()
    assert not torch.equal(a, b)
    torch.tpu.set_rng_state(s)
    torch.testing.assert_close(torch.rand(100, device="tpu").cpu(), a, rtol=0, atol=0)


def test_entry_point_registered():
    eps = importlib.metadata.entry_points(group="torch.backends")
    names = {e.name: e.value for e in eps}
    assert "torch_tpu" in names
    assert names["torch_tpu"].startswith("torch_tpu")


def test_autoload_with_plain_import_torch(run_python):
    r = run_python(
        """
        import sys
        import torch
        assert "torch_tpu" in sys.modules, "torch did not autoload torch_tpu"
        t = torch.tensor([1.0, 1.0]).to("tpu")
        assert t.device.type == "tpu"
        print(t.cpu().tolist())
        """,
        TORCH_DEVICE_BACKEND_AUTOLOAD=None,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[1.0, 1.0]"


def test_ones_on_device_via_autoload(run_python, require_ops):
    require_ops("aten::fill.Scalar")
    r = run_python(
        """
        import torch
        print(torch.ones(2, device="tpu").cpu().tolist())
        """,
        TORCH_DEVICE_BACKEND_AUTOLOAD=None,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[1.0, 1.0]"


def test_import_torch_tpu_first(run_python):
    r = run_python(
        """
        import torch_tpu
        import torch
        print(torch.tensor([3.0]).to("tpu").cpu().tolist())
        """,
        TORCH_DEVICE_BACKEND_AUTOLOAD=None,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "[3.0]"


def test_streams_and_events_are_the_one_device_stream():
    s = torch.tpu.current_stream()
    assert s.device == torch.device("tpu", 0)
    assert torch.tpu.Stream() == s and torch.tpu.default_stream() == s
    x = torch.arange(4.0).to("tpu")
    with torch.tpu.stream(torch.tpu.Stream()):
        y = x * 3
    e = torch.tpu.Event()
    e.record()
    e.synchronize()
    assert e.query()
    torch.testing.assert_close(y.cpu(), torch.arange(4.0) * 3)
    timed = torch.tpu.Event(enable_timing=True)  # timing: tests/test_timing_events.py
    timed.record()
    timed.synchronize()
    assert timed.query()


def test_device_properties_have_torch_cuda_fields():
    import os
    n = torch.tpu.device_count()
    for i in range(n):
        p = torch.tpu.get_device_properties(i)
        assert isinstance(p.major, int) and isinstance(p.minor, int)
        assert p.total_memory > 0 and p.multi_processor_count >= 1
        assert p.name == torch.tpu.get_device_name(i)
    p = torch.tpu.get_device_properties(0)
    if p.platform_name == "cpu":
        # the CPU plugin reports no memory statistics: its memory is the host's
        assert p.memory_source == "host"
        with open("/proc/meminfo") as f:
            mem_total_kib = int(next(l for l in f if l.startswith("MemTotal:")).split()[1])
        assert p.total_memory == mem_total_kib * 1024
        assert p.multi_processor_count == len(os.sched_getaffinity(0))
        assert (p.major, p.minor) == (0, 0)
    text = repr(p)
    assert text.startswith("TpuDeviceProperties(") and f"total_memory={p.total_memory // 2**20}MB" in text
    assert f"multi_processor_count={p.multi_processor_count}" in text
    assert str(p) == text


def test_device_properties_capability_rules():
    from torch_tpu.device.properties import _capability, _cores
    assert _capability("NVIDIA H100", {"compute_capability": "9.0"}) == (9, 0)
    assert _capability("TPU v5 lite", {}) == (5, 0)
    assert _capability("TPU v4", {}) == (4, 0)
    assert _capability("cpu", {}) == (0, 0)
    assert _cores("cuda", {"core_count": "132"}) == 132
    assert _cores("tpu", {}) == 1
