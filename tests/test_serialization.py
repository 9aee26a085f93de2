"""torch.save / torch.load of tpu tensors and state dicts."""
import io

import pytest
import torch


def _round_trip(obj, **load_kwargs):
    buf = io.BytesIO()
    torch.save(obj, buf)
    buf.seek(0)
    return torch.load(buf, **load_kwargs)


COMPLEX_BYTES = (
    "saving copies the storage as bytes (UntypedStorage.cpu() reads it as uint8), and "
    "runtime/view.cpp flat_as() reinterprets a complex<f32> base as ui8 with bitcast_convert, "
    "which StableHLO rejects ('cannot convert between real and complex types'); bitcast via "
    "the component float type (real/imag) instead"
)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64,
                                   torch.uint8, torch.bool, torch.int8, torch.float16,
                                   torch.complex64], ids=str)
@pytest.mark.parametrize("map_location", [None, "tpu", "cpu"])
def test_tensor_round_trip(dtype, map_location, tpu):
    x = (torch.arange(12) - 5).reshape(3, 4).to(dtype)
    y = _round_trip(x.to(tpu), map_location=map_location)
    expected_device = torch.device("cpu") if map_location == "cpu" else tpu
    assert y.device == expected_device and y.dtype == dtype and y.shape == x.shape
    assert torch.equal(y.cpu(), x)


def test_saved_after_device_writes(tpu):
    t = torch.zeros(2, 3).to(tpu)
    t[1].copy_(torch.tensor([1.0, 2.0, 3.0]).to(tpu))
    y = _round_trip(t, map_location="cpu")
    assert torch.equal(y, torch.tensor([[0.0, 0, 0], [1, 2, 3]]))


def test_views_keep_sharing(tpu):
    base = torch.arange(10.0).to(tpu)
    view = base[2:6]
    a, b = _round_trip([base, view], map_location="tpu")
    assert torch.equal(a.cpu(), torch.arange(10.0)) and torch.equal(b.cpu(), torch.arange(2.0, 6.0))
    assert b.storage_offset() == 2
    # loaded as one storage, like the CPU: a write through one is seen by the other
    a[3:4].copy_(torch.tensor([-1.0]).to(tpu))
    assert b[1].item() == -1.0
    c, d = _round_trip([base, view], map_location="cpu")
    assert d.untyped_storage().data_ptr() == c.untyped_storage().data_ptr()


def test_non_contiguous_tensor(tpu):
    x = torch.arange(12.0).reshape(3, 4)
    y = _round_trip(x.to(tpu).t(), map_location="tpu")
    assert y.shape == (4, 3) and y.stride() == (1, 4)
    assert torch.equal(y.cpu(), x.t())


def test_state_dict_round_trip(tpu):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3), torch.nn.Linear(3, 2))
    ref = {k: v.clone() for k, v in model.state_dict().items()}
    model.tpu()
    sd = _round_trip(model.state_dict(), map_location="tpu")
    assert list(sd) == list(ref)
    for k in ref:
        assert sd[k].device == tpu and torch.equal(sd[k].cpu(), ref[k])
    sd_cpu = _round_trip(model.state_dict(), map_location="cpu")
    for k in ref:
        assert sd_cpu[k].device.type == "cpu" and torch.equal(sd_cpu[k], ref[k])
    # load into a fresh module on tpu
    torch.manual_seed(1)
    fresh = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3), torch.nn.Linear(3, 2)).tpu()
    fresh.load_state_dict(sd)
    for k, v in fresh.state_dict().items():
        assert v.device == tpu and torch.equal(v.cpu(), ref[k])


def test_cpu_saved_file_loaded_to_tpu(tpu, tmp_path):
    x = torch.randn(5, 7)
    sd = {"w": x, "n": torch.tensor(3), "half": x.half()}
    path = tmp_path / "cpu.pt"
    torch.save(sd, path)
    loaded = torch.load(path, map_location="tpu")
    assert all(v.device == tpu for v in loaded.values())
    assert torch.equal(loaded["w"].cpu(), x)
    assert loaded["n"].item() == 3
    assert torch.equal(loaded["half"].cpu(), x.half())
    loaded2 = torch.load(path, map_location=torch.device("tpu:0"))
    assert torch.equal(loaded2["w"].cpu(), x)


def test_file_round_trip(tpu, tmp_path):
    x = torch.randn(3, 3)
    path = tmp_path / "tpu.pt"
    torch.save({"x": x.to(tpu)}, path)
    assert torch.equal(torch.load(path)["x"].cpu(), x)
    assert torch.load(path)["x"].device == tpu
    assert torch.load(path, map_location="cpu")["x"].device.type == "cpu"
