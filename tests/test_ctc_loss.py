"""F.ctc_loss (aten::_ctc_loss and _ctc_loss_backward, lengths as lists and
as tensors) on tpu against the CPU in every eager mode: the loss and its
gradient for each reduction, zero_infinity, a blank other than 0, variable
input and target lengths (empty targets, targets longer than the input: an
infinite loss), concatenated and padded targets, unbatched input, float32
and float64; and the CPU's argument errors."""
import pytest
import torch
import torch.nn.functional as F

T, B, C = 10, 3, 6
G = torch.Generator().manual_seed(0)
LOGITS = torch.randn(T, B, C, generator=G, dtype=torch.float64)
PADDED = torch.randint(1, C, (B, 5), generator=G)
LENGTHS = ([10, 7, 5], [5, 3, 2])


def _concatenated(padded, target_lengths):
    return torch.cat([row[:n] for row, n in zip(padded, target_lengths)])


def _run(d, targets, input_lengths, target_lengths, dtype=torch.float64, logits=LOGITS, **kw):
    x = logits.to(dtype).to(d).requires_grad_()
    to = lambda v: v.to(d) if isinstance(v, torch.Tensor) else v  # noqa: E731
    loss = F.ctc_loss(x.log_softmax(-1), to(targets), to(input_lengths), to(target_lengths), **kw)
    # An uneven cotangent, so that each sequence's gradient is weighted differently.
    cot = torch.linspace(0.5, 2.0, loss.numel(), dtype=dtype).reshape(loss.shape).to(d)
    (grad,) = torch.autograd.grad(loss, x, cot)
    return loss.detach(), grad


def _same_as_cpu(*args, **kw):
    want = _run("cpu", *args, **kw)
    got = _run("tpu", *args, **kw)
    tol = {} if kw.get("dtype", torch.float64) == torch.float64 else dict(atol=2e-5, rtol=2e-5)
    for g, w in zip(got, want):
        assert g.device.type == "tpu" and g.dtype == w.dtype and g.shape == w.shape
        torch.testing.assert_close(g.cpu(), w, equal_nan=True, **tol)


CASES = {
    "padded": (PADDED, *LENGTHS),
    "concatenated": (_concatenated(PADDED, LENGTHS[1]), *LENGTHS),
    "tensor_lengths": (PADDED, torch.tensor(LENGTHS[0]), torch.tensor(LENGTHS[1])),
    "int32_tensor_lengths": (PADDED.int(), torch.tensor(LENGTHS[0], dtype=torch.int32),
                             torch.tensor(LENGTHS[1], dtype=torch.int32)),
    "empty_target": (PADDED, [10, 7, 5], [5, 0, 2]),
    "no_input": (PADDED, [10, 0, 0], [5, 0, 2]),  # -0 for an empty target, inf otherwise
    "target_longer_than_input": (PADDED, [10, 3, 5], [5, 5, 2]),  # inf
    "repeats_need_blanks": (torch.tensor([[1, 1, 2, 2, 1], [3, 3, 3, 3, 3], [1, 2, 1, 2, 1]]), [10, 9, 7], [5, 3, 4]),
}


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_ctc_loss_and_gradient_match_cpu(case, reduction):
    _same_as_cpu(*CASES[case], reduction=reduction)


# zero_infinity zeroes the infinite losses and their gradients (NaN otherwise).
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("case", ["no_input", "target_longer_than_input"])
def test_ctc_loss_zero_infinity_matches_cpu(case, reduction):
    _same_as_cpu(*CASES[case], reduction=reduction, zero_infinity=True)


@pytest.mark.parametrize("blank", [2, C - 1])
def test_ctc_loss_with_another_blank_matches_cpu(blank):
    targets = torch.where(PADDED == blank, 0, PADDED)
    _same_as_cpu(targets, *LENGTHS, blank=blank, reduction="none")


def test_ctc_loss_float32_matches_cpu():
    _same_as_cpu(PADDED, *LENGTHS, dtype=torch.float32)


def test_ctc_loss_unbatched_matches_cpu():
    _same_as_cpu(PADDED[0], [T], [5], logits=LOGITS[:, 0])


def test_ctc_loss_with_targets_on_the_cpu_matches_cpu():
    # As on CUDA, the targets and lengths may stay on the host.
    lp = LOGITS.log_softmax(-1)
    want = F.ctc_loss(lp, PADDED, torch.tensor(LENGTHS[0]), torch.tensor(LENGTHS[1]), reduction="none")
    got = F.ctc_loss(lp.to("tpu"), PADDED, torch.tensor(LENGTHS[0]), torch.tensor(LENGTHS[1]), reduction="none")
    assert got.device.type == "tpu"
    torch.testing.assert_close(got.cpu(), want)


def test_ctc_loss_log_alpha_matches_cpu_where_defined():
    # The CPU leaves log_alpha past each input length unwritten: compared up to it.
    lp = LOGITS.log_softmax(-1)
    want = torch._ctc_loss(lp, PADDED, *LENGTHS)
    got = torch._ctc_loss(lp.to("tpu"), PADDED.to("tpu"), *LENGTHS)
    torch.testing.assert_close(got[0].cpu(), want[0])
    for b, (n, m) in enumerate(zip(*LENGTHS)):
        torch.testing.assert_close(got[1][b, :n, :2 * m + 1].cpu(), want[1][b, :n, :2 * m + 1])


BAD = [
    ("blank_negative", lambda lp, tg: F.ctc_loss(lp, tg, *LENGTHS, blank=-1)),
    ("blank_too_large", lambda lp, tg: F.ctc_loss(lp, tg, *LENGTHS, blank=C)),
    ("input_lengths_size", lambda lp, tg: F.ctc_loss(lp, tg, [10, 7], LENGTHS[1])),
    ("target_lengths_size", lambda lp, tg: F.ctc_loss(lp, tg, LENGTHS[0], [5, 3, 2, 1])),
    ("input_length_above_time", lambda lp, tg: F.ctc_loss(lp, tg, [11, 7, 5], LENGTHS[1])),
    ("input_length_negative", lambda lp, tg: F.ctc_loss(lp, tg, [10, -1, 5], LENGTHS[1])),
    ("target_length_negative", lambda lp, tg: F.ctc_loss(lp, tg, LENGTHS[0], [5, -1, 2])),
    ("target_length_above_targets", lambda lp, tg: F.ctc_loss(lp, tg, LENGTHS[0], [6, 3, 2])),
    ("targets_rows", lambda lp, tg: F.ctc_loss(lp, tg[:2], *LENGTHS)),
    ("concatenated_size", lambda lp, tg: F.ctc_loss(lp, tg.flatten(), *LENGTHS)),
    ("log_probs_rank", lambda lp, tg: torch._ctc_loss(lp[None], tg, *LENGTHS)),
    ("float_lengths", lambda lp, tg: torch._ctc_loss(lp, tg, torch.tensor([10.0, 7, 5], device=lp.device),
                                                     torch.tensor(LENGTHS[1], device=lp.device))),
    ("half", lambda lp, tg: F.ctc_loss(lp.half(), tg, *LENGTHS)),
]


@pytest.mark.parametrize("name,fn", BAD, ids=[c[0] for c in BAD])
def test_ctc_loss_argument_errors_as_on_cpu(name, fn):
    lp = LOGITS.float().log_softmax(-1)
    with pytest.raises(Exception) as want:
        fn(lp, PADDED)
    with pytest.raises(type(want.value)) as got:
        fn(lp.to("tpu"), PADDED.to("tpu"))
    assert str(got.value).splitlines()[0] == str(want.value).splitlines()[0]
