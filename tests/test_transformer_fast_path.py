"""The inference fast paths of nn.TransformerEncoder(Layer) and
nn.MultiheadAttention (eval mode, no gradients, batch_first), which PyTorch
takes on tpu as on the CPU (_transformer_encoder_layer_fwd,
_native_multi_head_attention), against the CPU's fast path in every eager
mode: both activations, norm_first, padding and attention masks (boolean and
additive), fully masked rows (NaN, as on the CPU), attention weights; and the
nested-tensor packing nn.TransformerEncoder tries with a padding mask, which
raises a clear NotImplementedError on tpu."""
import itertools

import pytest
import torch
import torch.nn as nn
from torch_tpu.validate.compare import OpRecorder

D, H, FF, B, T = 16, 4, 32, 3, 6


def _to(x, d):
    return x.to(d) if isinstance(x, torch.Tensor) else x


def _padding(rows_kept):
    """A [B, T] key padding mask (True = padding) keeping rows_kept[b] leading tokens."""
    return torch.arange(T)[None, :] >= torch.tensor(rows_kept)[:, None]


def _encoder(activation, norm_first, nested=False, seed=0):
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, activation=activation, batch_first=True,
                                       norm_first=norm_first)
    return nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=nested).eval()


def _compare(module, args, kwargs, fast_op):
    with torch.no_grad():
        want = module(*args, **kwargs)
        module.to("tpu")
        ops = OpRecorder()  # to show that the fast path was taken
        with ops:
            got = module(*[_to(a, "tpu") for a in args], **{k: _to(v, "tpu") for k, v in kwargs.items()})
    assert "aten::" + fast_op in ops.ops, f"the fast path ({fast_op}) was not taken: {sorted(ops.ops)}"
    want = want if isinstance(want, tuple) else (want,)
    got = got if isinstance(got, tuple) else (got,)
    for g, w in zip(got, want):
        if w is None:
            assert g is None
            continue
        assert g.device.type == "tpu" and g.shape == w.shape and g.dtype == w.dtype
        torch.testing.assert_close(g.cpu(), w, atol=2e-5, rtol=1e-4, equal_nan=True)


SRC = torch.randn(B, T, D, generator=torch.Generator().manual_seed(2))
MASKS = {
    "none": None,
    "padding": _padding([4, 6, 1]),
    "padding_whole_row": _padding([3, 0, 6]),  # one sequence is all padding
}


@pytest.mark.parametrize("activation,norm_first,mask", list(itertools.product(["relu", "gelu"], [False, True],
                                                                               sorted(MASKS))))
def test_transformer_encoder_matches_cpu(activation, norm_first, mask):
    kw = {} if MASKS[mask] is None else {"src_key_padding_mask": MASKS[mask]}
    _compare(_encoder(activation, norm_first), (SRC,), kw, "_transformer_encoder_layer_fwd")


def test_transformer_encoder_layer_with_src_mask_matches_cpu():
    torch.manual_seed(3)
    layer = nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True).eval()
    causal = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    _compare(layer, (SRC,), {"src_mask": causal, "src_key_padding_mask": MASKS["padding"]},
             "_transformer_encoder_layer_fwd")


MHA_CASES = {
    "plain": {},
    "key_padding": {"key_padding_mask": MASKS["padding"]},
    "key_padding_whole_row": {"key_padding_mask": MASKS["padding_whole_row"]},
    "causal_bool": {"attn_mask": torch.triu(torch.ones(T, T, dtype=torch.bool), 1)},
    "both_masks": {"attn_mask": torch.triu(torch.ones(T, T, dtype=torch.bool), 1),
                   "key_padding_mask": MASKS["padding"]},
    "weights_per_head": {"need_weights": True, "average_attn_weights": False},
    "no_weights": {"need_weights": False},
}


@pytest.mark.parametrize("case", sorted(MHA_CASES))
def test_multihead_attention_matches_cpu(case):
    torch.manual_seed(5)
    mha = nn.MultiheadAttention(D, H, batch_first=True).eval()
    x = SRC.clone()

    # Self-attention (the same tensor three times) is what takes the fast path.
    class SelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = mha

        def forward(self, q, **kw):
            return self.mha(q, q, q, **kw)

    _compare(SelfAttention().eval(), (x,), MHA_CASES[case], "_native_multi_head_attention")


@pytest.mark.parametrize("mask_type,shape", [(0, (T, T)), (1, (B, T)), (2, (B, H, T, T))])
@pytest.mark.parametrize("need_weights", [False, True])
def test_native_multi_head_attention_op_matches_cpu(mask_type, shape, need_weights):
    # Called directly with an additive mask: the op masks wherever it is
    # nonzero, as the CPU's does; key and value differ from the query.
    g = torch.Generator().manual_seed(6)
    mask = torch.randn(*shape, generator=g).relu().neg()
    mask[..., 0] = 0.0  # no row masked everywhere
    w_qkv, b_qkv = torch.randn(3 * D, D, generator=g) / 4, torch.randn(3 * D, generator=g)
    w_out, b_out = torch.randn(D, D, generator=g) / 4, torch.randn(D, generator=g)
    k, v = torch.randn(B, T, D, generator=g), torch.randn(B, T, D, generator=g)

    def run(d):
        return torch._native_multi_head_attention(SRC.to(d), k.to(d), v.to(d), D, H, w_qkv.to(d), b_qkv.to(d),
                                                  w_out.to(d), b_out.to(d), mask.to(d), need_weights, False,
                                                  mask_type)
    want, got = run("cpu"), run("tpu")
    torch.testing.assert_close(got[0].cpu(), want[0], atol=2e-5, rtol=1e-4)
    if need_weights:
        torch.testing.assert_close(got[1].cpu(), want[1], atol=2e-5, rtol=1e-4)


def test_native_multi_head_attention_argument_errors_as_on_cpu():
    w, b = torch.zeros(3 * D, D), torch.zeros(3 * D)
    for args, match in [((SRC[0], SRC[0], SRC[0], D, H, w, b), "expected 3-D `query`"),
                        ((SRC, SRC, SRC[:, :2], D, H, w, b), "shapes to match"),
                        ((SRC, SRC, SRC, D, 3, w, b), "must divide evenly"),
                        ((SRC, SRC, SRC, D, H, w[:D], b), "first dim to be 3x embed_dim")]:
        for d in ("cpu", "tpu"):
            with pytest.raises(RuntimeError, match=match):
                torch._native_multi_head_attention(*[_to(a, d) for a in args], _to(torch.zeros(D, D), d),
                                                   _to(torch.zeros(D), d))


def test_nested_tensor_packing_raises_a_clear_error():
    enc = _encoder("relu", False, nested=True).to("tpu")
    with torch.no_grad():
        with pytest.raises(NotImplementedError, match="_nested_tensor_from_mask.*enable_nested_tensor=False"):
            enc(SRC.to("tpu"), src_key_padding_mask=MASKS["padding"].to("tpu"))


def test_nested_tensor_packing_is_skipped_for_a_mask_not_left_aligned():
    # The encoder packs only left-aligned masks; others take the per-layer fast path.
    mask = torch.zeros(B, T, dtype=torch.bool)
    mask[0, 1] = True
    _compare(_encoder("gelu", False, nested=True), (SRC,), {"src_key_padding_mask": mask},
             "_transformer_encoder_layer_fwd")
