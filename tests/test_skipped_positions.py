"""Positions PyTorch skips stay skipped on tpu, whatever they hold.

Where PyTorch *skips* elements (an embedding's `padding_idx`, `ignore_index`,
`zero_infinity`, `include_self=False`, positions outside every bag, the padded
steps of a packed sequence), a lowering that multiplies them by a zero mask
instead lets a NaN or inf there through (0 * inf = NaN) and trains on NaN,
silently. Each case here puts NaN and inf at exactly the skipped positions (in
the inputs, the weights and the incoming gradient) and compares the outputs and
every gradient with the CPU's, NaN pattern included: in each eager mode and
under torch.compile.
"""
import pytest
import torch
import torch.nn.functional as F

import torch_tpu

NAN, INF = float("nan"), float("inf")
HOW = ("strict", "debug", "defer_and_fuse", "compile")


def _embedding_padding(scale_grad_by_freq=False, padding_idx=0):
    def make():
        w = torch.randn(5, 3)
        idx = torch.tensor([[0, 1, 2, 0], [3, 0, 4, 1]])
        idx[idx == 0] = padding_idx % 5
        g = torch.ones(2, 4, 3)
        pad = idx == padding_idx % 5
        g[pad] = torch.tensor([NAN, INF, -INF])
        return (w,), (idx,), g

    def fn(w, idx):
        return F.embedding(idx, w, padding_idx=padding_idx, scale_grad_by_freq=scale_grad_by_freq)

    return make, fn


def _bag_inputs(num=6, dim=3):
    w = torch.randn(num, dim)
    w[0] = torch.tensor([NAN, INF, -INF])  # the padding row: never read
    # Bags: [pad, 1], [2, pad, 3], [pad, pad] (all padding), [4].
    idx = torch.tensor([0, 1, 2, 0, 3, 0, 0, 4])
    offsets = torch.tensor([0, 2, 5, 7])
    return w, idx, offsets


def _embedding_bag_padding(mode, per_sample=False):
    def make():
        w, idx, offsets = _bag_inputs()
        g = torch.randn(4, 3)
        g[2] = torch.tensor([NAN, INF, -INF])  # the all-padding bag's gradient
        extra = ()
        if per_sample:
            psw = torch.rand(idx.numel())
            psw[idx == 0] = torch.tensor([NAN, INF, -INF, NAN])
            extra = (psw,)
        return (w, *extra), (idx, offsets), g

    def fn(w, *rest):
        *psw, idx, offsets = rest
        return F.embedding_bag(idx, w, offsets, mode=mode, padding_idx=0,
                               per_sample_weights=psw[0] if psw else None)

    return make, fn


def _bag_past_last_offset():
    w = torch.randn(6, 3)
    w[5] = torch.tensor([NAN, INF, -INF])
    return w, torch.tensor([1, 2, 3, 4, 5, 5]), torch.tensor([0, 2, 4])


def _embedding_bag_past_last_offset():
    # include_last_offset: the sum fast path stops the last bag at
    # offsets[-1]; the rows after it are never read. (The weight's gradient
    # is test_rows_past_the_last_offset_get_no_gradient's: the CPU's is
    # uninitialized memory there.)
    def make():
        w, idx, offsets = _bag_past_last_offset()
        return (), (w, idx, offsets), None

    def fn(w, idx, offsets):
        return F.embedding_bag(idx, w, offsets, mode="sum", include_last_offset=True)

    return make, fn


def _cross_entropy_ignore(label_smoothing=0.0, reduction="mean", spatial=False):
    def make():
        shape = (4, 5, 2, 3) if spatial else (6, 5)
        x = torch.randn(shape)
        t = torch.randint(0, 5, (shape[0], *shape[2:]))
        t.view(-1)[::3] = -100
        ignored = (t == -100).unsqueeze(1).expand_as(x)
        x[ignored] = torch.tensor([NAN, INF, -INF]).repeat(int(ignored.sum()) // 3 + 1)[:int(ignored.sum())]
        g = torch.ones(()) if reduction != "none" else torch.randn(t.shape)
        if reduction == "none":
            g[t == -100] = NAN
        return (x,), (t,), g

    def fn(x, t):
        return F.cross_entropy(x, t, ignore_index=-100, label_smoothing=label_smoothing, reduction=reduction)

    return make, fn


def _ctc_zero_infinity():
    # The second sequence's target is longer than its input: no alignment,
    # an infinite loss, zeroed with its gradient.
    def make():
        T, N, C = 6, 2, 4
        lp = torch.randn(T, N, C)
        targets = torch.tensor([[1, 2, 1], [1, 2, 3]])
        return (lp,), (targets,), torch.ones(())

    def fn(lp, targets):
        return F.ctc_loss(lp.log_softmax(-1), targets, torch.tensor([6, 2]), torch.tensor([3, 3]),
                          reduction="sum", zero_infinity=True)

    return make, fn


def _scatter_reduce_exclude_self(reduce):
    def make():
        x = torch.randn(3, 5)
        index = torch.tensor([[0, 1, 1], [2, 2, 0], [4, 4, 4]])
        src = torch.randn(3, 3)
        # Every position an index names starts from the reduction's identity:
        # its own value (NaN, inf) is never read.
        x.scatter_(1, index, torch.tensor([NAN, INF, -INF]).expand(3, 3).contiguous())
        return (x, src), (index,), torch.randn(3, 5)

    def fn(x, src, index):
        return x.scatter_reduce(1, index, src, reduce, include_self=False)

    return make, fn


def _index_reduce_exclude_self(reduce):
    def make():
        x = torch.randn(5, 3)
        x[[1, 3]] = torch.tensor([NAN, INF, -INF])
        return (x, torch.randn(4, 3)), (torch.tensor([1, 3, 1, 3]),), torch.randn(5, 3)

    def fn(x, src, index):
        return x.index_reduce(0, index, src, reduce, include_self=False)

    return make, fn


def _packed_lstm():
    # The padded steps of a packed sequence are never read.
    def make():
        x = torch.randn(4, 3, 2)  # [T, B, features]
        x[3:, 1] = NAN
        x[2:, 2] = INF
        lstm = torch.nn.LSTM(2, 3)
        return (x, *lstm.parameters()), (), None

    def fn(x, w_ih, w_hh, b_ih, b_hh):
        packed = torch.nn.utils.rnn.pack_padded_sequence(x, [4, 3, 2], enforce_sorted=True)
        hx = (x.new_zeros(1, 3, 3), x.new_zeros(1, 3, 3))
        out, h, c = torch._VF.lstm(packed.data, packed.batch_sizes, hx, (w_ih, w_hh, b_ih, b_hh), True, 1, 0.0, True,
                                   False)
        return out.sum() + h.sum() + c.sum()

    return make, fn


def _where_and_masked():
    def make():
        x = torch.randn(4, 5)
        mask = torch.rand(4, 5) > 0.5
        x[~mask] = NAN
        return (x,), (mask,), torch.randn(4, 5)

    def fn(x, mask):
        return torch.where(mask, x, 0.0) + x.masked_fill(~mask, 1.0) + torch.nansum(x * 0 + x, 0, keepdim=True)

    return make, fn


def _grid_sample_outside(mode):
    # zeros padding: a tap outside the input is skipped; the border pixel a
    # clamped index would read holds inf and NaN.
    def make():
        x = torch.randn(1, 2, 4, 5)
        x[..., 0, :] = INF
        x[..., :, -1] = NAN
        grid = torch.rand(1, 3, 3, 2) * 3 - 1.5  # about half the points outside [-1, 1]
        grid[0, 0, 0] = torch.tensor([-1.4, -1.3])
        g = torch.randn(1, 2, 3, 3)
        return (x, grid), (), g

    def fn(x, grid):
        return F.grid_sample(x, grid, mode=mode, padding_mode="zeros", align_corners=False)

    return make, fn


CASES = {
    "embedding_padding_idx": _embedding_padding(),
    "embedding_padding_idx_negative": _embedding_padding(padding_idx=-1),
    "embedding_padding_idx_scale_grad_by_freq": _embedding_padding(scale_grad_by_freq=True),
    "embedding_bag_max_padding_idx": _embedding_bag_padding("max"),
    "embedding_bag_mean_padding_idx": _embedding_bag_padding("mean"),
    "embedding_bag_past_last_offset": _embedding_bag_past_last_offset(),
    "embedding_bag_sum_padding_idx": _embedding_bag_padding("sum"),
    "embedding_bag_sum_padding_idx_per_sample_weights": _embedding_bag_padding("sum", per_sample=True),
    "cross_entropy_ignore_index": _cross_entropy_ignore(),
    "cross_entropy_ignore_index_2d": _cross_entropy_ignore(spatial=True),
    "cross_entropy_ignore_index_label_smoothing": _cross_entropy_ignore(label_smoothing=0.1),
    "cross_entropy_ignore_index_none": _cross_entropy_ignore(reduction="none"),
    "ctc_loss_zero_infinity": _ctc_zero_infinity(),
    "grid_sample_bicubic_outside": _grid_sample_outside("bicubic"),
    "grid_sample_bilinear_outside": _grid_sample_outside("bilinear"),
    "grid_sample_nearest_outside": _grid_sample_outside("nearest"),
    "index_reduce_amax_exclude_self": _index_reduce_exclude_self("amax"),
    "index_reduce_mean_exclude_self": _index_reduce_exclude_self("mean"),
    "index_reduce_prod_exclude_self": _index_reduce_exclude_self("prod"),
    "packed_lstm_padding": _packed_lstm(),
    "scatter_reduce_amax_exclude_self": _scatter_reduce_exclude_self("amax"),
    "scatter_reduce_mean_exclude_self": _scatter_reduce_exclude_self("mean"),
    "scatter_reduce_sum_exclude_self": _scatter_reduce_exclude_self("sum"),
    "where_masked_fill_nansum": _where_and_masked(),
}


def _run(case, device, how):
    make, fn = CASES[case]
    torch.manual_seed(0)
    params, others, grad = make()
    params = [p.detach().to(device).requires_grad_() for p in params]
    others = [o.to(device) for o in others]
    if how == "compile":
        fn = torch.compile(fn, backend="tpu", dynamic=False)
    with torch_tpu.eager_mode("strict" if how in ("compile", None) else how):
        out = fn(*params, *others)
        if params:
            out.backward(torch.ones_like(out) if grad is None else grad.to(device))
        return [t.detach().cpu() for t in (out, *(p.grad for p in params))]


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("case", sorted(CASES))
def test_skipped_positions_match_the_cpu(case, how, fresh_dynamo):
    expected = _run(case, "cpu", None)
    actual = _run(case, "tpu", how)
    for name, a, e in zip(["output", *(f"grad {i}" for i in range(len(expected) - 1))], actual, expected):
        assert torch.equal(a.isnan(), e.isnan()), f"{case} ({how}): {name}'s NaN positions differ\n{a}\n{e}"
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5, equal_nan=True, msg=lambda m: f"{case} {name}: {m}")


@pytest.mark.parametrize("psw", [False, True])
def test_rows_past_the_last_offset_get_no_gradient(psw):
    """With include_last_offset, positions from the last offset on are in no
    bag: their rows get no gradient (by hand: the CPU's own backward reads
    uninitialized memory for them), the bags' rows get their bag's."""
    w, idx, offsets = _bag_past_last_offset()
    w = w.to("tpu").requires_grad_()
    weights = torch.ones(6, device="tpu", requires_grad=True) if psw else None
    out = F.embedding_bag(idx.to("tpu"), w, offsets.to("tpu"), mode="sum", include_last_offset=True,
                          per_sample_weights=weights)
    g = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    out.backward(g.to("tpu"))
    expected = torch.zeros(6, 3)
    expected[[1, 2]], expected[[3, 4]] = g[0], g[1]
    assert torch.equal(w.grad.cpu(), expected)
    if psw:
        assert weights.grad.cpu()[4:].tolist() == [0.0, 0.0]


def test_issue_repro_embedding_and_bag_give_zeros():
    """The issue's repro, and the same through EmbeddingBag: the padding row's
    gradient is the CPU's zeros, with NaN and inf at the padded positions."""
    e = torch.nn.Embedding(5, 3, padding_idx=0).to("tpu")
    out = e(torch.tensor([[0, 1, 2, 0]], device="tpu"))
    g = torch.ones_like(out)
    g[0, 0], g[0, 3] = NAN, INF
    out.backward(g)
    assert e.weight.grad.cpu()[0].tolist() == [0.0, 0.0, 0.0]
    bag = torch.nn.EmbeddingBag(5, 3, padding_idx=0).to("tpu")
    out = bag(torch.tensor([[0, 0], [1, 2]], device="tpu"))  # the first bag is all padding
    g = torch.ones_like(out)
    g[0] = NAN
    out.backward(g)
    assert bag.weight.grad.cpu()[0].tolist() == [0.0, 0.0, 0.0]
    assert bag.weight.grad.cpu()[1:3].eq(0.5).all()  # mean mode: each row half its bag's gradient


def test_gemma3n_padded_batch_gradients_match_the_cpu():
    """Gemma3n's tiny text model (the config of transformers' own tester) on a
    padded batch: its padded positions carry inf and NaN upstream, which the
    embedding's padding row must never see. Every gradient equals the CPU's,
    with the CPU's NaN pattern (none)."""
    import copy
    from transformers import Gemma3nForCausalLM, Gemma3nTextConfig

    config = Gemma3nTextConfig(
        vocab_size=99, vocab_size_per_layer_input=99, hidden_size=16, hidden_size_per_layer_input=16,
        num_hidden_layers=4, num_kv_shared_layers=2, num_attention_heads=2, num_key_value_heads=2,
        layer_types=["full_attention", "sliding_attention", "full_attention", "sliding_attention"],
        altup_num_inputs=2, intermediate_size=21, hidden_activation="gelu_pytorch_tanh",
        max_position_embeddings=512, pad_token_id=0, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    model = Gemma3nForCausalLM(config).train()
    ids = torch.randint(3, 99, (4, 7))
    mask = torch.ones_like(ids)
    for row, n in ((1, 2), (2, 4), (3, 6)):  # right-padded rows, as a collator pads
        ids[row, 7 - n:], mask[row, 7 - n:] = 0, 0
    labels = ids.masked_fill(mask == 0, -100)

    def grads(device):
        m = copy.deepcopy(model).to(device)
        reaching = []  # the gradient reaching the embedding's output

        def keep_gradient(module, inputs, out):
            out.register_hook(reaching.append)

        m.model.embed_tokens.register_forward_hook(keep_gradient)
        loss = m(input_ids=ids.to(device), attention_mask=mask.to(device), labels=labels.to(device)).loss
        loss.backward()
        return loss.detach().cpu(), {n: p.grad.cpu() for n, p in m.named_parameters() if p.grad is not None}, \
            reaching[0].cpu()

    cpu_loss, cpu, cpu_reaching = grads("cpu")
    tpu_loss, tpu, _ = grads("tpu")
    # The case is live: non-finite values reach the embedding, at padded positions only.
    bad = ~cpu_reaching.isfinite().all(-1)
    assert bad.any() and not bad[mask == 1].any()
    torch.testing.assert_close(tpu_loss, cpu_loss, rtol=1e-4, atol=1e-5)
    assert cpu.keys() == tpu.keys()
    for name in cpu:
        assert torch.equal(tpu[name].isnan(), cpu[name].isnan()), f"{name}: NaN where the CPU has none"
        torch.testing.assert_close(tpu[name], cpu[name], rtol=1e-3, atol=1e-4, equal_nan=True, msg=name)
    assert not any(g.isnan().any() for g in tpu.values())
