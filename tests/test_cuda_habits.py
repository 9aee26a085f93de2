"""What a CUDA user writes, on tpu: record_stream and the torch.cuda names a
CUDA program calls (docs/devices.md, "CUDA habits on tpu")."""
import pytest
import torch
import torch_tpu


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_side_stream_copy_with_record_stream_matches_cpu(mode):
    # A DataLoader prefetcher: copy the next batch on a side stream, make the
    # main stream wait for it, record_stream it on the main stream and drop
    # the prefetcher's reference while the main stream's work still reads it.
    # New tensors are made in between, so memory that was released early
    # would be reused and the results would differ from the CPU's.
    g = torch.Generator().manual_seed(0)
    batches = [torch.randn(64, 32, generator=g) for _ in range(4)]
    w = torch.randn(32, 8, generator=g)
    with torch_tpu.eager_mode(mode):
        main, side = torch.tpu.current_stream(), torch.tpu.Stream()
        wd = w.to("tpu")
        outs = []
        with torch.tpu.stream(side):
            nxt = batches[0].pin_memory().to("tpu", non_blocking=True)
        for i in range(len(batches)):
            main.wait_stream(side)
            cur = nxt
            cur.record_stream(main)
            if i + 1 < len(batches):
                with torch.tpu.stream(side):
                    nxt = batches[i + 1].pin_memory().to("tpu", non_blocking=True)
            out = torch.relu(cur @ wd).sum(0)
            del cur
            torch.full((64, 32), float(i), device="tpu")  # fresh allocations meanwhile
            outs.append(out)
        got = torch.stack(outs).cpu()
    want = torch.stack([torch.relu(b @ w).sum(0) for b in batches])
    torch.testing.assert_close(got, want)


def test_record_stream_takes_only_a_tpu_stream():
    t = torch.ones(3, device="tpu")
    t.record_stream(torch.tpu.current_stream())  # returns, records nothing
    with pytest.raises(RuntimeError, match="record_stream: expected a tpu stream"):
        t.record_stream(torch.Stream("cpu"))


def test_device_of():
    n = torch.tpu.device_count()
    other = torch.ones(1, device=f"tpu:{n - 1}")
    assert torch.tpu.current_device() == 0
    with torch.tpu.device_of(other):
        assert torch.tpu.current_device() == n - 1
        assert torch.ones(1, device="tpu").device.index == n - 1
    assert torch.tpu.current_device() == 0
    with torch.tpu.device_of(torch.ones(1)):  # not a tpu tensor: nothing changes
        assert torch.tpu.current_device() == 0


def test_get_device_capability_is_the_device_description():
    props = torch.tpu.get_device_properties()
    cap = torch.tpu.get_device_capability()
    assert cap == (props.major, props.minor)
    assert torch.tpu.get_device_capability("tpu:0") == cap
    if props.platform_name == "cpu":  # XLA's CPU plugin describes no capability
        assert cap == (0, 0)
    elif props.platform_name == "cuda":
        assert ".".join(map(str, cap)) == props.attributes["compute_capability"]


def test_get_arch_list_names_the_devices_kind():
    arches = torch.tpu.get_arch_list()
    props = torch.tpu.get_device_properties()
    assert arches and all(isinstance(a, str) for a in arches)
    want = f"sm_{props.major}{props.minor}" if props.platform_name == "cuda" else props.kind
    assert want in arches


def test_init_and_ipc_collect():
    assert torch.tpu.init() is None
    assert torch.tpu.is_initialized()
    x = torch.arange(4.0, device="tpu")
    assert torch.tpu.ipc_collect() is None  # nothing is shared between processes
    assert x.cpu().tolist() == [0.0, 1.0, 2.0, 3.0]


def test_stream_context():
    n = torch.tpu.device_count()
    s = torch.tpu.Stream(n - 1)
    ctx = torch.tpu.stream(s)
    assert isinstance(ctx, torch.tpu.StreamContext)
    with ctx as entered:
        assert entered is s
        # the stream's device is current in the block, as on CUDA
        assert torch.tpu.current_device() == n - 1
        y = torch.ones(2, device="tpu") * 3
    assert torch.tpu.current_device() == 0
    assert y.device.index == n - 1 and y.cpu().tolist() == [3.0, 3.0]
    with torch.tpu.StreamContext(None) as none:
        assert none is None and torch.tpu.current_device() == 0
