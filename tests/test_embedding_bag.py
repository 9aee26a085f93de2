"""embedding_bag (aten::_embedding_bag / _embedding_bag_forward_only and its
backward ops) on tpu against the CPU: all four outputs (values, dtypes,
shapes), modes sum/mean/max, offsets with and without include_last_offset,
per_sample_weights, padding_idx, and the weight (and per-sample-weight)
gradients of nn.EmbeddingBag."""
import pytest
import torch
import torch.nn.functional as F
import torch_tpu

DEV = "tpu"
MODES = {"sum": 0, "mean": 1, "max": 2}


def gen(seed):
    return torch.Generator().manual_seed(seed)


def case(num=10, dim=5, n=12, seed=0):
    w = torch.randn(num, dim, generator=gen(seed))
    idx = torch.randint(0, num, (n,), generator=gen(seed + 1))
    # An empty bag, a bag of one, and a long last bag.
    offsets = torch.tensor([0, 3, 3, 4, 9])
    return w, idx, offsets


def assert_outputs(dev, cpu, values=4, **kw):
    """All four outputs match in dtype and shape, the first `values` in value
    (the CPU's _embedding_bag_forward_only leaves sum mode's bag_size and
    max_indices uninitialized)."""
    assert len(dev) == len(cpu) == 4
    for d, c in zip(dev, cpu):
        assert d.device.type == DEV
        assert d.dtype == c.dtype and d.shape == c.shape
    torch.testing.assert_close(dev[0].cpu(), cpu[0], **kw)
    for d, c in list(zip(dev, cpu))[1:values]:
        torch.testing.assert_close(d.cpu(), c)


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("incl", [False, True])
@pytest.mark.parametrize("padding_idx", [-1, 2])
@pytest.mark.parametrize("op", ["_embedding_bag", "_embedding_bag_forward_only"])
def test_aten_outputs(mode, incl, padding_idx, op):
    w, idx, offsets = case()
    idx[[0, 5]] = 2  # some entries at padding_idx
    if incl:
        offsets = torch.cat([offsets, torch.tensor([idx.numel()])])
    f = getattr(torch.ops.aten, op)
    args = (False, MODES[mode], False, None, incl, padding_idx)
    cpu = f(w, idx, offsets, *args)
    dev = f(w.to(DEV), idx.to(DEV), offsets.to(DEV), *args)
    assert_outputs(dev, cpu, values=2 if op.endswith("only") and mode == "sum" else 4)


@pytest.mark.parametrize("mode", list(MODES))
def test_all_padding_bag_and_int32(mode):
    w, _, _ = case()
    idx = torch.tensor([2, 2, 1, 4, 2], dtype=torch.int32)
    offsets = torch.tensor([0, 2, 2], dtype=torch.int32)
    args = (False, MODES[mode], False, None, False, 2)
    cpu = torch.ops.aten._embedding_bag(w, idx, offsets, *args)
    dev = torch.ops.aten._embedding_bag(w.to(DEV), idx.to(DEV), offsets.to(DEV), *args)
    assert_outputs(dev, cpu)
    # mixed index types promote to int64
    cpu = torch.ops.aten._embedding_bag(w, idx, offsets.long(), *args)
    dev = torch.ops.aten._embedding_bag(w.to(DEV), idx.to(DEV), offsets.long().to(DEV), *args)
    assert_outputs(dev, cpu)


def test_double_weight_sum():
    w, idx, offsets = case()
    w = w.double()
    cpu = torch.ops.aten._embedding_bag(w, idx, offsets, False, 0, False, None, False, -1)
    dev = torch.ops.aten._embedding_bag(w.to(DEV), idx.to(DEV), offsets.to(DEV), False, 0, False,
                                        None, False, -1)
    assert_outputs(dev, cpu)


@pytest.mark.parametrize("padding_idx", [None, 2])
@pytest.mark.parametrize("incl", [False, True])
def test_per_sample_weights(padding_idx, incl):
    w, idx, offsets = case()
    if incl:
        offsets = torch.cat([offsets, torch.tensor([idx.numel()])])
    psw = torch.rand(idx.numel(), generator=gen(5))
    out_c = F.embedding_bag(idx, w, offsets, mode="sum", per_sample_weights=psw,
                            include_last_offset=incl, padding_idx=padding_idx)
    out_d = F.embedding_bag(idx.to(DEV), w.to(DEV), offsets.to(DEV), mode="sum",
                            per_sample_weights=psw.to(DEV), include_last_offset=incl,
                            padding_idx=padding_idx)
    torch.testing.assert_close(out_d.cpu(), out_c)


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("padding_idx", [None, 3])
@pytest.mark.parametrize("incl", [False, True])
def test_module_forward_backward(mode, padding_idx, incl):
    torch.manual_seed(0)
    cpu = torch.nn.EmbeddingBag(10, 6, mode=mode, padding_idx=padding_idx, include_last_offset=incl)
    dev = torch.nn.EmbeddingBag(10, 6, mode=mode, padding_idx=padding_idx, include_last_offset=incl)
    dev.load_state_dict(cpu.state_dict())
    dev.to(DEV)
    _, idx, offsets = case()
    idx[1] = 3
    if incl:
        offsets = torch.cat([offsets, torch.tensor([idx.numel()])])
    out_c = cpu(idx, offsets)
    out_d = dev(idx.to(DEV), offsets.to(DEV))
    torch.testing.assert_close(out_d.cpu(), out_c)
    g = torch.randn(out_c.shape, generator=gen(13))
    out_c.backward(g)
    out_d.backward(g.to(DEV))
    torch.testing.assert_close(dev.weight.grad.cpu(), cpu.weight.grad)


@pytest.mark.parametrize("mode", ["sum", "mean"])
def test_scale_grad_by_freq_2d_input(mode):
    """The reference is embedding's scale_grad_by_freq reduced per row: the
    CPU's embedding_bag kernel divides by the wrong counts here (rows seen
    once after a repeated row get 1/count of that row)."""
    w, _, _ = case()
    idx = torch.randint(0, 10, (4, 3), generator=gen(7))
    idx[0, 0] = idx[1, 1] = idx[2, 2]
    wc, wd = w.clone().requires_grad_(), w.to(DEV).requires_grad_()
    emb = F.embedding(idx, wc, scale_grad_by_freq=True)
    out_c = emb.sum(1) if mode == "sum" else emb.mean(1)
    out_d = F.embedding_bag(idx.to(DEV), wd, mode=mode, scale_grad_by_freq=True)
    torch.testing.assert_close(out_d.cpu(), out_c)
    g = torch.randn(out_c.shape, generator=gen(3))
    out_c.backward(g)
    out_d.backward(g.to(DEV))
    torch.testing.assert_close(wd.grad.cpu(), wc.grad)


@pytest.mark.parametrize("padding_idx", [None, 2])
def test_per_sample_weights_grad(padding_idx):
    w, idx, offsets = case()
    psw = torch.rand(idx.numel(), generator=gen(5))
    wc, pc = w.clone().requires_grad_(), psw.clone().requires_grad_()
    wd, pd = w.to(DEV).requires_grad_(), psw.to(DEV).requires_grad_()
    out_c = F.embedding_bag(idx, wc, offsets, mode="sum", per_sample_weights=pc, padding_idx=padding_idx)
    out_d = F.embedding_bag(idx.to(DEV), wd, offsets.to(DEV), mode="sum", per_sample_weights=pd,
                            padding_idx=padding_idx)
    g = torch.randn(out_c.shape, generator=gen(3))
    out_c.backward(g)
    out_d.backward(g.to(DEV))
    torch.testing.assert_close(wd.grad.cpu(), wc.grad)
    torch.testing.assert_close(pd.grad.cpu(), pc.grad)


@pytest.mark.parametrize("mode", list(MODES))
def test_bfloat16_forward(mode):
    w, idx, offsets = case(n=40, dim=16)
    offsets = torch.tensor([0, 7, 7, 20, 21])
    w = w.bfloat16()
    out_c = F.embedding_bag(idx, w, offsets, mode=mode)
    out_d = F.embedding_bag(idx.to(DEV), w.to(DEV), offsets.to(DEV), mode=mode)
    assert out_d.dtype == torch.bfloat16
    rtol, atol = torch_tpu.tolerance(torch.bfloat16)
    torch.testing.assert_close(out_d.cpu(), out_c, rtol=rtol, atol=atol)


def test_sparse_raises():
    w = torch.randn(10, 4, device=DEV, requires_grad=True)
    out = F.embedding_bag(torch.tensor([1, 2], device=DEV), w, torch.tensor([0], device=DEV), sparse=True)
    with pytest.raises(NotImplementedError, match="sparse"):
        out.sum().backward()
