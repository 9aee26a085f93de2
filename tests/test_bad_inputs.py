"""Bad inputs raise on tpu what they raise on the CPU, in every eager mode:
each case runs on the CPU and on tpu, and both must raise the same exception
type with a message naming the problem (the CPU's message is checked too, so
a case whose CPU behaviour changes shows up here)."""
import re

import pytest
import torch
import torch.nn.functional as F
import torch_tpu

LOGP = torch.randn(3, 4).log_softmax(1)
LONG = torch.long


def _idx(*v):
    return torch.tensor(v, dtype=LONG)


# (id, fn(device), exception type, regex both messages match)
CASES = [
    ("nonzero_out_float", lambda d: torch.nonzero(torch.tensor([0.0, 1.0]).to(d), out=torch.empty(0, device=d)),
     RuntimeError, "nonzero: Expected out tensor to have scalar type Long"),
    ("all_out_float", lambda d: torch.all(torch.tensor([1.0, 0.0]).to(d), out=torch.empty((), device=d)),
     RuntimeError, "all only supports bool tensor for result, got: Float"),
    ("any_out_long", lambda d: torch.any(torch.tensor([1.0, 0.0]).to(d), out=torch.empty((), dtype=LONG, device=d)),
     RuntimeError, "any only supports bool tensor for result, got: Long"),
    ("all_dim_out_float", lambda d: torch.all(torch.ones(2, 3).to(d), 1, out=torch.empty(2, device=d)),
     RuntimeError, "all only supports bool tensor for result, got: Float"),
    ("any_dims_out_int", lambda d: torch.any(torch.ones(2, 3).to(d), (0, 1), out=torch.empty((), dtype=torch.int32, device=d)),
     RuntimeError, "any only supports bool tensor for result, got: Int"),
    ("abs_inplace_complex", lambda d: torch.tensor([1 + 1j]).to(d).abs_(),
     RuntimeError, "In-place abs is not supported for complex tensors"),
    ("nll_target_float", lambda d: F.nll_loss(LOGP.to(d), torch.tensor([0.0, 1, 2]).to(d)),
     RuntimeError, "expected target dtype to be Long or Byte, but got Float"),
    ("nll_target_int32", lambda d: F.nll_loss(LOGP.to(d), _idx(0, 1, 2).int().to(d)),
     RuntimeError, "expected target dtype to be Long or Byte, but got Int"),
    ("nll_batch_mismatch", lambda d: F.nll_loss(LOGP.to(d), _idx(0, 1).to(d)),
     ValueError, "Expected input batch_size \\(3\\) to match target batch_size \\(2\\)"),
    ("nll_weight_size", lambda d: F.nll_loss(LOGP.to(d), _idx(0, 1, 2).to(d), weight=torch.ones(3).to(d)),
     RuntimeError, "weight tensor should be defined either for all 4 classes or no classes"),
    ("nll_0d_input", lambda d: F.nll_loss(torch.tensor(1.0).to(d), torch.tensor(0).to(d)),
     ValueError, "Expected 1 or more dimensions \\(got 0\\)"),
    ("nll_1d_input_2_targets", lambda d: F.nll_loss(torch.randn(3).to(d), _idx(0, 1).to(d)),
     ValueError, "For 1D input, 1D target must have size 1, but got target size: 2"),
    ("nll_spatial_target_shape", lambda d: F.nll_loss(torch.randn(2, 3, 4).to(d), torch.zeros(2, 5, dtype=LONG).to(d)),
     RuntimeError, "Expected target size \\[2, 4\\], got \\[2, 5\\]"),
    ("nll_3d_target", lambda d: torch.ops.aten.nll_loss_forward(LOGP.to(d), torch.zeros(3, 1, 1, dtype=LONG).to(d), None, 1, -100),
     RuntimeError, "0D or 1D target tensor expected, multi-target not supported"),
    ("index_select_empty_dim", lambda d: torch.index_select(torch.empty(0, 3).to(d), 0, _idx(0).to(d)),
     RuntimeError, "index_select\\(\\): self indexing axis dim should be positive"),
    ("embedding_empty_weight", lambda d: F.embedding(_idx(0).to(d), torch.empty(0, 3).to(d)),
     RuntimeError, "index_select\\(\\): self indexing axis dim should be positive"),
    ("gather_empty_dim", lambda d: torch.gather(torch.empty(2, 0).to(d), 1, torch.zeros(2, 1, dtype=LONG).to(d)),
     RuntimeError, "out of bounds for dimension 1 with size 0"),
    ("take_along_dim_empty_dim", lambda d: torch.take_along_dim(torch.empty(2, 0).to(d), torch.zeros(2, 1, dtype=LONG).to(d), 1),
     RuntimeError, ""),
    ("scatter_empty_dim", lambda d: torch.empty(2, 0).to(d).scatter(1, torch.zeros(2, 1, dtype=LONG).to(d), torch.ones(2, 1).to(d)),
     RuntimeError, "out of bounds for dimension 1 with size 0"),
    ("scatter_add_empty_dim", lambda d: torch.empty(2, 0).to(d).scatter_add(1, torch.zeros(2, 1, dtype=LONG).to(d), torch.ones(2, 1).to(d)),
     RuntimeError, "out of bounds for dimension 1 with size 0"),
    ("scatter_value_empty_dim", lambda d: torch.empty(2, 0).to(d).scatter(1, torch.zeros(2, 1, dtype=LONG).to(d), 2.0),
     RuntimeError, "out of bounds for dimension 1 with size 0"),
    ("put_empty", lambda d: torch.empty(0, 3).to(d).put(_idx(0).to(d), torch.ones(1).to(d)),
     IndexError, "put_\\(\\): Tried to put elements into an empty tensor"),
    ("take_empty", lambda d: torch.take(torch.empty(0, 3).to(d), _idx(0).to(d)),
     IndexError, "take\\(\\): tried to take from an empty tensor"),
    ("kthvalue_empty_dim", lambda d: torch.kthvalue(torch.empty(2, 0).to(d), 1, 1),
     IndexError, "kthvalue\\(\\): Expected reduction dim 1 to have non-zero size"),
    ("kthvalue_k_too_large", lambda d: torch.kthvalue(torch.randn(2, 3).to(d), 4, 1),
     RuntimeError, "kthvalue\\(\\): selected number k out of range for dimension 1"),
    ("advanced_index_empty_dim", lambda d: torch.empty(0, 3).to(d)[_idx(0).to(d)],
     IndexError, "out of bounds for dimension"),
    # Sizes, strides, steps, groups and dilations that a shape computation
    # divides by (or that would give a negative size): the CPU's error, not
    # a SIGFPE, a builder error or a wrong shape.
    ("max_pool2d_dilation_0", lambda d: F.max_pool2d(torch.randn(1, 1, 5, 5).to(d), 2, dilation=0),
     RuntimeError, "dilation should be greater than zero"),
    ("max_pool3d_dilation_0", lambda d: F.max_pool3d(torch.randn(1, 1, 5, 5, 5).to(d), 2, dilation=(1, 0, 1)),
     RuntimeError, "dilation should be greater than zero"),
    ("max_pool2d_stride_negative", lambda d: F.max_pool2d(torch.randn(1, 1, 5, 5).to(d), 2, stride=-1),
     RuntimeError, "stride should be greater than zero"),
    ("avg_pool2d_stride_negative", lambda d: F.avg_pool2d(torch.randn(1, 1, 5, 5).to(d), 2, stride=-1),
     RuntimeError, "stride should be greater than zero"),
    ("max_pool2d_stride_0", lambda d: F.max_pool2d(torch.randn(1, 1, 5, 5).to(d), 2, stride=0),
     RuntimeError, "stride"),
    ("avg_pool2d_kernel_0", lambda d: F.avg_pool2d(torch.randn(1, 1, 5, 5).to(d), 0),
     RuntimeError, "stride should not be zero"),
    ("upsample_bicubic_size_0", lambda d: F.interpolate(torch.randn(1, 1, 4, 4).to(d), size=(0, 2), mode="bicubic"),
     RuntimeError, "Input and output sizes should be greater than 0"),
    ("upsample_aa_input_0", lambda d: F.interpolate(torch.randn(1, 1, 0, 4).to(d), size=(2, 2), mode="bilinear", antialias=True),
     RuntimeError, "Input and output sizes should be greater than 0"),
    ("grid_sample_empty_input", lambda d: F.grid_sample(torch.randn(1, 1, 0, 4).to(d), torch.zeros(1, 2, 2, 2).to(d), align_corners=False),
     RuntimeError, "expected input to have non-empty spatial dimensions"),
    ("arange_size_overflows", lambda d: torch.arange(0, 2**62, device=d),
     RuntimeError, "Storage size calculation overflowed with sizes=\\[4611686018427387904\\]"),
    ("repeat_size_overflows", lambda d: torch.zeros(2, 2).to(d).repeat(2**40, 2**40),
     RuntimeError, "Storage size calculation overflowed"),
    ("conv2d_groups_0", lambda d: F.conv2d(torch.randn(1, 4, 5, 5).to(d), torch.randn(4, 4, 3, 3).to(d), groups=0),
     RuntimeError, "non-positive groups is not supported"),
    ("conv2d_stride_0", lambda d: F.conv2d(torch.randn(1, 4, 5, 5).to(d), torch.randn(4, 4, 3, 3).to(d), stride=0),
     RuntimeError, "non-positive stride is not supported"),
    ("conv2d_dilation_0", lambda d: F.conv2d(torch.randn(1, 4, 5, 5).to(d), torch.randn(4, 4, 3, 3).to(d), dilation=0),
     RuntimeError, "dilation should be greater than zero"),
    ("arange_step_0", lambda d: torch.arange(0, 5, 0, device=d), RuntimeError, "step must be nonzero"),
    ("slice_step_0", lambda d: torch.arange(6.0).to(d)[::0], ValueError, "slice step cannot be zero"),
    ("unfold_step_0", lambda d: torch.arange(6.0).to(d).unfold(0, 2, 0), RuntimeError, "step is 0 but must be > 0"),
    ("group_norm_groups_0", lambda d: F.group_norm(torch.randn(2, 4, 3).to(d), 0), ZeroDivisionError,
     "division or modulo by zero"),
    ("pixel_shuffle_0", lambda d: F.pixel_shuffle(torch.randn(1, 4, 2, 2).to(d), 0),
     RuntimeError, "pixel_shuffle expects a positive upscale_factor"),
    ("channel_shuffle_0", lambda d: F.channel_shuffle(torch.randn(1, 4, 2, 2).to(d), 0),
     RuntimeError, "Number of groups to divide channels in must be positive"),
    ("unfold_nn_stride_0", lambda d: F.unfold(torch.randn(1, 1, 4, 4).to(d), 2, stride=0),
     RuntimeError, "stride should be greater than zero"),
]

# Errors whose message on tpu is ours (the CPU's names a value the device
# cannot know when the program is built, or is an internal detail): only the
# type and our message are checked.
OWN_MESSAGE = [
    ("index_copy_empty_dim", lambda d: torch.empty(0, 3).to(d).index_copy(0, _idx(0).to(d), torch.ones(1, 3).to(d)),
     RuntimeError, "index_copy_\\(\\): index is out of bounds for dimension 0 with size 0"),
    ("index_fill_empty_dim", lambda d: torch.empty(0, 3).to(d).index_fill(0, _idx(0).to(d), 1.0),
     RuntimeError, "index_fill_\\(\\): index is out of bounds for dimension 0 with size 0"),
    ("embedding_bag_empty_weight", lambda d: F.embedding_bag(_idx(0).to(d), torch.empty(0, 3).to(d), _idx(0).to(d)),
     RuntimeError, "valid range \\[0, 0\\)"),
]


def _raised(fn, device):
    with pytest.raises(Exception) as info:
        r = fn(device)
        if isinstance(r, torch.Tensor):
            r.cpu()
        elif isinstance(r, tuple):
            [t.cpu() for t in r]
    return info.value


@pytest.mark.parametrize("name,fn,kind,match", CASES, ids=[c[0] for c in CASES])
def test_bad_input_raises_as_on_cpu(name, fn, kind, match):
    cpu, tpu = _raised(fn, "cpu"), _raised(fn, "tpu")
    assert type(cpu) is kind, f"the CPU now raises {type(cpu).__name__}: {cpu}"
    assert type(tpu) is type(cpu), f"tpu raised {type(tpu).__name__}: {tpu}; the CPU {type(cpu).__name__}: {cpu}"
    assert re.search(match, str(cpu)), str(cpu)
    assert re.search(match, str(tpu)), str(tpu)


@pytest.mark.parametrize("name,fn,kind,match", OWN_MESSAGE, ids=[c[0] for c in OWN_MESSAGE])
def test_bad_input_raises_the_cpu_type_with_our_message(name, fn, kind, match):
    cpu, tpu = _raised(fn, "cpu"), _raised(fn, "tpu")
    assert type(cpu) is kind and type(tpu) is kind, (cpu, tpu)
    assert re.search(match, str(tpu)), str(tpu)


def test_nll_target_out_of_range_raises_index_error_in_debug_mode():
    # Data-dependent: debug mode reads the targets back at the op (strict and
    # defer_and_fuse check them on the device, tests/test_index_checks.py).
    with torch_tpu.eager_mode("debug"):
        for t in (_idx(0, 1, 5), _idx(0, 1, -3)):
            with pytest.raises(IndexError, match="out of bounds"):
                F.nll_loss(LOGP, t)
            with pytest.raises(IndexError, match="Target -?[0-9]+ is out of bounds"):
                F.nll_loss(LOGP.to("tpu"), t.to("tpu")).cpu()
        # ignore_index outside the class range is allowed
        want = F.nll_loss(LOGP, _idx(0, 1, 7), ignore_index=7)
        got = F.nll_loss(LOGP.to("tpu"), _idx(0, 1, 7).to("tpu"), ignore_index=7)
        torch.testing.assert_close(got.cpu(), want)


def test_nll_1d_input_with_one_target_matches_cpu():
    x = torch.randn(4).log_softmax(0)
    for r in ("none", "mean", "sum"):
        want = F.nll_loss(x, _idx(2), reduction=r)
        got = F.nll_loss(x.to("tpu"), _idx(2).to("tpu"), reduction=r)
        assert got.shape == want.shape
        torch.testing.assert_close(got.cpu(), want)


@pytest.mark.parametrize("name,make,layout", [
    ("coo_to_tpu", lambda: torch.randn(3, 3).to_sparse().to("tpu"), "sparse"),
    ("coo_factory", lambda: torch.sparse_coo_tensor(torch.zeros(2, 1, dtype=torch.long), torch.ones(1), (2, 2),
                                                    device="tpu"), "sparse"),
    ("csr_to_dense", lambda: torch.randn(3, 3).to_sparse_csr().to("tpu").to_dense(), "sparse"),
    ("csr_mm", lambda: torch.mm(torch.randn(3, 3).to_sparse_csr().to("tpu"), torch.ones(3, 3, device="tpu")),
     "sparse"),
    ("quantized_to_tpu", lambda: torch.quantize_per_tensor(torch.randn(3), 0.1, 0, torch.qint8).to("tpu"),
     "quantized"),
])
def test_sparse_and_quantized_tensors_raise_naming_the_op_and_layout(name, make, layout):
    # A tpu buffer is a dense array; the error says what to call instead.
    with pytest.raises(NotImplementedError, match=rf"The operator 'aten::\w+.*' got a {layout} tensor on tpu"):
        make()
