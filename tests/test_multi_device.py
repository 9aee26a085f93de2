"""Several devices in one process: copies between tpu:i and tpu:j go device
to device through PJRT, ops on tpu:j tensors run on device j (checked against
where the plugin put the result's buffer), and mixing devices in one op
raises as on CUDA. The CPU plugin has the 4 devices that conftest.py asks for
(TORCH_TPU_CPU_DEVICES); test_device.py fails if it has fewer, so these tests
cannot quietly skip there."""
import pytest
import torch

import torch_tpu

placement = torch_tpu._C._placement
MODES = ("strict", "debug", "defer_and_fuse")

pytestmark = pytest.mark.skipif(torch.tpu.device_count() < 4, reason="needs 4 tpu devices")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("src,dst", [(0, 1), (1, 0), (2, 3)])
def test_copy_between_devices(src, dst, mode):
    x = torch.randn(4, 5)
    with torch_tpu.eager_mode(mode):
        a = (x.to(f"tpu:{src}") * 2).t()        # a view of a pending result
        b = a.to(f"tpu:{dst}")
        assert b.device == torch.device("tpu", dst)
        assert placement(b) == dst and placement(a) == src
        torch.testing.assert_close(b.cpu(), (x * 2).t())
        c = a.to(f"tpu:{dst}", torch.float64)    # with a conversion
        torch.testing.assert_close(c.cpu(), (x * 2).t().double())


@pytest.mark.parametrize("mode", MODES)
def test_copy_into_a_view_on_another_device(mode):
    x = torch.randn(3, 4)
    with torch_tpu.eager_mode(mode):
        dst = torch.zeros(6, 4, device="tpu:2")
        dst[1:4].copy_(x.to("tpu:1"))
        expected = torch.zeros(6, 4)
        expected[1:4] = x
        torch.testing.assert_close(dst.cpu(), expected)
        assert placement(dst) == 2


@pytest.mark.parametrize("mode", MODES)
def test_ops_on_device_1_run_there(mode):
    x = torch.randn(8, 6)
    w = torch.randn(6, 3)
    with torch_tpu.eager_mode(mode):
        y = torch.relu(x.to("tpu:1") @ w.to("tpu:1")).sum(0)
        assert y.device == torch.device("tpu", 1)
        assert placement(y) == 1
        torch.testing.assert_close(y.cpu(), torch.relu(x @ w).sum(0))


def test_module_to_another_device_and_back():
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    m = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    m.load_state_dict(ref.state_dict())
    m.to("tpu:0")
    m.to("tpu:1")  # tpu:0 -> tpu:1, device to device
    assert all(p.device == torch.device("tpu", 1) and placement(p) == 1 for p in m.parameters())
    x = torch.randn(3, 5)
    out = m(x.to("tpu:1"))
    assert out.device == torch.device("tpu", 1) and placement(out) == 1
    out.sum().backward()
    ref(x).sum().backward()
    for p, q in zip(m.parameters(), ref.parameters()):
        assert p.grad.device == torch.device("tpu", 1)
        torch.testing.assert_close(p.grad.cpu(), q.grad)
    torch.testing.assert_close(out.cpu(), ref(x))
    m.to("tpu:3")
    torch.testing.assert_close(m(x.to("tpu:3")).cpu(), ref(x))


def test_training_step_on_device_2_matches_cpu():
    torch.manual_seed(0)
    ref = torch.nn.Linear(4, 3)
    m = torch.nn.Linear(4, 3).to("tpu:2")
    m.load_state_dict(ref.state_dict())
    opt_ref = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    for _ in range(3):
        x = torch.randn(5, 4)
        for mod, o, dev in ((ref, opt_ref, "cpu"), (m, opt, "tpu:2")):
            o.zero_grad()
            mod(x.to(dev)).square().mean().backward()
            o.step()
    for p, q in zip(m.parameters(), ref.parameters()):
        assert placement(p) == 2
        torch.testing.assert_close(p.detach().cpu(), q.detach())


def test_set_device_selects_the_default():
    before = torch.tpu.current_device()
    try:
        torch.tpu.set_device(3)
        t = torch.ones(2, device="tpu") + 1
        assert t.device == torch.device("tpu", 3) and placement(t) == 3
        with torch.tpu.device(1):
            u = torch.zeros(2, device="tpu")
            assert u.device == torch.device("tpu", 1)
    finally:
        torch.tpu.set_device(before)


def test_cross_device_op_raises_naming_both_devices():
    a = torch.ones(3, device="tpu:0")
    b = torch.ones(3, device="tpu:1")
    with pytest.raises(RuntimeError, match=r"Expected all tensors to be on the same device.*tpu:0 and tpu:1"):
        a + b
    with pytest.raises(RuntimeError, match=r"same device.*tpu:1 and tpu:0"):
        torch.mm(b.view(3, 1), a.view(1, 3))
    with pytest.raises(RuntimeError, match=r"same device.*tpu:0 and tpu:1"):
        a.add_(b)
    with pytest.raises(RuntimeError, match=r"same device.*tpu:0 and tpu:1"):
        torch._foreach_add_([a], [b])
    # the failed ops left both tensors as they were
    torch.testing.assert_close(a.cpu(), torch.ones(3))
    torch.testing.assert_close(b.cpu(), torch.ones(3))


def test_invalid_device_index_raises():
    with pytest.raises(RuntimeError):
        torch.ones(2).to(f"tpu:{torch.tpu.device_count()}")


def test_copy_of_a_failed_value_carries_its_error():
    x = torch.ones(3, device="tpu:0")
    torch_tpu._C._fail_next_launch("injected failure")
    y = x * 2
    z = y.to("tpu:1")
    with pytest.raises(RuntimeError, match="injected failure"):
        z.cpu()
