"""The harness's rules beyond comparing with the CPU.

Choices among equal values (harness.TIE_FREE): an index output that picks
other tied elements than the CPU passes; one that picks different values,
repeats a position or moves a gradient to an element of another value fails.

A backward that raises on tpu passes only when the CPU's own backward, run
outside the recording mode, raises the same error.

A result that misses the CPU is judged by the float64 result: rounded to its
type, or element by element within twice the CPU's own error of it.

An argument PyTorch requires on the CPU (tensor_split's indices) stays there."""
import os
import sys

import torch
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.opinfo.core import SampleInput

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402

X = torch.tensor([[3.0, 1.0, 3.0, 2.0, 1.0]])


def ties(key, sample, actual, expected, grads=False):
    return harness._same_up_to_ties(key, sample, actual, expected, [], grads=grads)


def test_sort_indices_other_choice_among_ties_pass():
    s = SampleInput(X, args=(-1,))
    values, idx = X.sort(-1)
    swapped = idx.clone()
    swapped[0, [0, 1]] = swapped[0, [1, 0]]  # the two 1.0s, the other way round
    assert ties("sort", s, (values, swapped), (values, idx))


def test_sort_indices_that_pick_other_values_or_repeat_fail():
    s = SampleInput(X, args=(-1,))
    values, idx = X.sort(-1)
    wrong = idx.clone()
    wrong[0, [1, 2]] = wrong[0, [2, 1]]  # a 1.0 and the 2.0 exchanged
    assert not ties("sort", s, (values, wrong), (values, idx))
    repeated = idx.clone()
    repeated[0, 1] = repeated[0, 0]  # the same 1.0 twice
    assert not ties("sort", s, (values, repeated), (values, idx))


def test_stable_sort_gets_no_latitude():
    s = SampleInput(X, kwargs=dict(dim=-1, stable=True))
    values, idx = X.sort(dim=-1, stable=True)
    swapped = idx.clone()
    swapped[0, [0, 1]] = swapped[0, [1, 0]]
    assert not ties("sort", s, (values, swapped), (values, idx))


def test_kthvalue_index_of_another_tied_element_passes():
    s = SampleInput(X, args=(1, 1))
    assert ties("kthvalue", s, (torch.tensor([1.0]), torch.tensor([4])), (torch.tensor([1.0]), torch.tensor([1])))
    assert not ties("kthvalue", s, (torch.tensor([1.0]), torch.tensor([3])),
                    (torch.tensor([1.0]), torch.tensor([1])))


def test_gradient_moved_among_ties_passes_moved_elsewhere_fails():
    s = SampleInput(X, args=(-1,))
    cpu = torch.tensor([[0.5, 0.1, 0.7, 0.3, 0.2]])
    among_ties = torch.tensor([[0.7, 0.2, 0.5, 0.3, 0.1]])  # 3.0s and 1.0s exchange theirs
    elsewhere = torch.tensor([[0.5, 0.3, 0.7, 0.1, 0.2]])  # a 1.0 and the 2.0 exchange theirs
    assert ties("msort", SampleInput(X.t()), [among_ties.t()], [cpu.t()], grads=True)
    assert ties("sort", s, [among_ties], [cpu], grads=True)
    assert not ties("sort", s, [elsewhere], [cpu], grads=True)


def test_other_ops_get_no_latitude():
    values, idx = X.max(-1)
    assert not ties("max.reduction_with_dim", SampleInput(X, args=(-1,)), (values, idx + 1), (values, idx))


def test_cpu_backward_error_outside_the_recording_mode():
    # clamp's backward with a min that broadcasts the input raises on the CPU
    # itself (PyTorch's formula writes a [1, 4, 4] mask into a [4, 4] one).
    x, lo, hi = (torch.randn(4, 4), torch.randn(1, 4, 4), torch.randn(4, 4))
    op = [o for o in op_db if o.name == "clamp"][0]
    broadcasting = SampleInput(x.requires_grad_(), args=(lo.requires_grad_(), hi.requires_grad_()))
    assert "doesn't match the broadcast shape" in harness._cpu_backward_raises(op, broadcasting)
    same_shape = SampleInput(torch.randn(4, 4, requires_grad=True),
                             args=(torch.randn(4, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)))
    assert harness._cpu_backward_raises(op, same_shape) is None


def test_float64_judge_allows_the_cpus_own_error_not_more():
    ref = torch.tensor([1000.0, 2.0], dtype=torch.float64)
    cpu = torch.tensor([1000.1, 2.0])  # the CPU's float32 is 0.1 off float64
    near = torch.tensor([999.85, 2.0])  # 0.15 off: within twice the CPU's error
    far = torch.tensor([1000.25, 2.0])  # 0.25 off
    off_where_cpu_is_exact = torch.tensor([1000.1, 2.001])
    assert harness._judge_by_float64([near], [cpu], [ref], [])
    assert not harness._judge_by_float64([far], [cpu], [ref], [])
    assert not harness._judge_by_float64([off_where_cpu_is_exact], [cpu], [ref], [])


def test_float64_judge_rounds_half_types_to_their_type():
    ref = torch.tensor([1.0 + 2 ** -12], dtype=torch.float64)  # rounds to 1.0 in bfloat16
    assert harness._judge_by_float64([torch.tensor([1.0], dtype=torch.bfloat16)],
                                     [torch.tensor([1.0078125], dtype=torch.bfloat16)], [ref], [])
    assert not harness._judge_by_float64([torch.tensor([1.03125], dtype=torch.bfloat16)],
                                         [torch.tensor([1.0], dtype=torch.bfloat16)], [ref], [])
    # Off by more than the tolerance, but the CPU is further off.
    assert harness._judge_by_float64([torch.tensor([1.03125], dtype=torch.bfloat16)],
                                     [torch.tensor([0.9765625], dtype=torch.bfloat16)], [ref], [])


def test_host_arguments_stay_on_the_cpu():
    op = [o for o in op_db if o.name == "tensor_split"][0]
    s = SampleInput(torch.randn(5, 4), args=(torch.tensor([1, 3]), 1))
    moved = harness._to_device(s, "tpu", host_args=harness.HOST_ARGS["tensor_split"])
    assert moved.input.device.type == "tpu" and moved.args[0].device.type == "cpu"
    assert [t.shape for t in op(moved.input, *moved.args)] == [t.shape for t in op(s.input, *s.args)]


def test_topk_index_of_another_tied_element_passes():
    s = SampleInput(X, args=(2,))
    values, idx = X.topk(2)
    swapped = idx.flip(-1)  # the two 3.0s the other way round
    assert ties("topk", s, (values, swapped), (values, idx))
    assert not ties("topk", s, (values, torch.tensor([[0, 3]])), (values, idx))
