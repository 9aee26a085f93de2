"""Errors are Python exceptions (same type as the CPU where the CPU has one),
never crashes; asynchronous failures poison only their results."""
import pytest
import torch
import torch_tpu


def _cpu_and_tpu_error(fn, tpu):
    with pytest.raises(Exception) as cpu_err:
        fn(lambda t: t)
    with pytest.raises(Exception) as tpu_err:
        fn(lambda t: t.to(tpu))
    return cpu_err.value, tpu_err.value


@pytest.mark.parametrize(
    "fn,ops",
    [
        (lambda D: D(torch.ones(2)) + D(torch.ones(3)), ["aten::add.Tensor"]),
        (lambda D: D(torch.ones(2, 3)) * D(torch.ones(4, 3)), ["aten::mul.Tensor"]),
        (lambda D: D(torch.ones(2, 3)) @ D(torch.ones(2, 3)), ["aten::mm"]),
        (lambda D: D(torch.ones(2, 3)).add_(D(torch.ones(2, 2, 3))), ["aten::add.Tensor"]),
        (lambda D: torch.cat([D(torch.ones(2, 3)), D(torch.ones(2, 4))]), ["aten::cat"]),
        (lambda D: D(torch.ones(2, 3)).view(4), []),
        # same type; the wording differs (the host side broadcasts with expand)
        (lambda D: D(torch.ones(2, 3)).copy_(D(torch.ones(4))), None),
    ],
    ids=["add", "mul", "mm", "add_inplace_broadcast", "cat", "view", "copy_"],
)
def test_shape_mismatch_same_error_as_cpu(fn, ops, tpu, require_ops):
    require_ops(*(ops or []))
    cpu_e, tpu_e = _cpu_and_tpu_error(fn, tpu)
    assert type(tpu_e) is type(cpu_e)
    if ops is not None:
        assert str(tpu_e) == str(cpu_e)
    else:
        assert "(3)" in str(tpu_e) and "(4)" in str(tpu_e)


@pytest.mark.parametrize(
    "dtype,name",
    [(torch.float8_e4m3fnuz, "Float8_e4m3fnuz"), (torch.float8_e5m2fnuz, "Float8_e5m2fnuz"),
     (torch.complex32, "ComplexHalf")],
    ids=str,
)
def test_unsupported_dtype_names_it(dtype, name, tpu):
    with pytest.raises(TypeError, match=name):
        torch.empty(2, dtype=dtype, device=tpu)
    with pytest.raises(TypeError, match=name):
        torch.empty_strided((2,), (1,), dtype=dtype, device=tpu)
    with pytest.raises(TypeError, match=name):
        torch.zeros(2).to(dtype).to(tpu)


def test_bad_device_index_names_it():
    n = torch.tpu.device_count()
    with pytest.raises(RuntimeError, match=f"tpu:{n + 3}"):
        torch.empty(2, device=f"tpu:{n + 3}")
    with pytest.raises(RuntimeError, match="tpu:7"):
        torch.tensor([1.0, 2.0]).to("tpu:7")
    with pytest.raises(RuntimeError, match="tpu:7"):
        torch.empty(2).to("tpu:7")


def test_bad_device_index_factory(require_ops):
    require_ops("aten::fill.Scalar")
    with pytest.raises(RuntimeError, match="tpu:7"):
        torch.ones(2, device="tpu:7")


@pytest.mark.parametrize("order", ["tpu_cpu", "cpu_tpu"])
def test_mixing_devices_raises(order, tpu, require_ops):
    require_ops("aten::add.Tensor")
    a = torch.ones(3).to(tpu)
    b = torch.ones(3)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        (a + b) if order == "tpu_cpu" else (b + a)


def test_cpu_scalar_tensor_is_allowed(tpu, require_ops):
    require_ops("aten::add.Tensor")
    r = torch.arange(3.0).to(tpu) + torch.tensor(2.0)
    assert r.device == tpu and torch.equal(r.cpu(), torch.tensor([2.0, 3.0, 4.0]))


def test_mixing_tpu_devices_raises(require_ops):
    require_ops("aten::add.Tensor")
    if torch.tpu.device_count() < 2:
        pytest.skip("needs two devices")
    a = torch.ones(3).to("tpu:0")
    b = torch.ones(3).to("tpu:1")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        a + b


def test_async_failure_poisons_only_results(tpu, require_ops):
    require_ops("aten::add.Tensor", "aten::mul.Scalar")
    a = torch.arange(3.0).to(tpu)
    b = torch.ones(3).to(tpu)
    torch_tpu._C._fail_next_launch("boom")
    c = a + b  # returns: the failure is only seen when the value is used
    assert c.shape == (3,) and c.device == tpu
    with pytest.raises(RuntimeError, match=r"(?s)aten::add.*boom"):
        c.cpu()
    with pytest.raises(RuntimeError, match=r"(?s)aten::add.*boom"):
        c.cpu()  # still the same error, not a crash
    d = c * 2
    with pytest.raises(RuntimeError, match=r"(?s)aten::add.*boom"):
        d.cpu()
    with pytest.raises(RuntimeError, match=r"(?s)aten::add.*boom"):
        c[1].item()
    # unrelated tensors and later ops are fine
    torch.tpu.synchronize()
    assert torch.equal(a.cpu(), torch.arange(3.0))
    assert torch.equal(b.cpu(), torch.ones(3))
    assert torch.equal((a + b).cpu(), torch.arange(3.0) + 1)


def test_async_failure_of_inplace_op(tpu, require_ops):
    require_ops("aten::add.Tensor")
    a = torch.arange(4.0).to(tpu)
    keep = torch.arange(4.0).to(tpu)
    v = a[1:3]
    torch_tpu._C._fail_next_launch("boom-inplace")
    a.add_(1)
    with pytest.raises(RuntimeError, match="boom-inplace"):
        a.cpu()
    with pytest.raises(RuntimeError, match="boom-inplace"):
        v.cpu()  # an alias of the failed storage
    assert torch.equal(keep.cpu(), torch.arange(4.0))
    # overwriting the whole storage makes it valid again
    a.copy_(torch.zeros(4).to(tpu))
    assert torch.equal(a.cpu(), torch.zeros(4))


def test_async_failure_of_copy(tpu):
    a = torch.arange(6.0).to(tpu)
    torch_tpu._C._fail_next_launch("boom-copy")
    c = a[::2].contiguous()
    with pytest.raises(RuntimeError, match="boom-copy"):
        c.cpu()
    assert torch.equal(a.cpu(), torch.arange(6.0))


def _bad_plugins():
    import os
    import torch as _t
    lib = os.path.join(os.path.dirname(_t.__file__), "lib", "libc10.so")
    libc = next((p for p in ("/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libc.so.6",
                             "/lib64/libc.so.6") if os.path.exists(p)), lib)
    return [("/nonexistent.so", "does not exist"), (libc, "not a PJRT plugin"),
            (lib, "not a PJRT plugin"), ("/tmp", "cannot load")]


@pytest.mark.parametrize("path,why", _bad_plugins(), ids=["missing", "libc", "torch_lib", "directory"])
def test_bad_plugin_path_is_clear_error(path, why, start_failure):
    for e in start_failure(TORCH_TPU_PJRT_PLUGIN=path):
        assert path in e and why in e
