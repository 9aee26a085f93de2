"""view_copy.cpp on tpu against the CPU: the *_copy view ops (results must not alias their input),
unfold_backward (backward through Tensor.unfold) and select_backward."""
import pytest
import torch
import torch_tpu  # noqa: F401

DEV = "tpu"
A = torch.ops.aten
DTYPES = [torch.float32, torch.bfloat16, torch.float64, torch.int64, torch.bool]


def make(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g)
    return x > 0 if dtype == torch.bool else (x * 10).to(dtype)


def check(fn, x, grad=False):
    xc = x.detach().clone().requires_grad_(grad)
    xd = x.detach().to(DEV).requires_grad_(grad)
    oc, od = fn(xc), fn(xd)
    assert od.device.type == DEV
    torch.testing.assert_close(od.cpu(), oc)
    if grad:
        g = torch.randn(oc.shape, generator=torch.Generator().manual_seed(5)).to(oc.dtype)
        oc.backward(g)
        od.backward(g.to(DEV))
        torch.testing.assert_close(xd.grad.cpu(), xc.grad)
    return od


COPIES = [
    lambda x: A.view_copy(x, [4, -1]),
    lambda x: A.view_copy(x, [2, 2, 3, 2]),
    lambda x: A.permute_copy(x, [2, 0, 1]),
    lambda x: A.expand_copy(x[:, :1], [5, 4, 3, 2]),
    lambda x: A.transpose_copy(x, 0, -1),
    lambda x: A.unsqueeze_copy(x, -1),
    lambda x: A.squeeze_copy(x[:, :1]),
    lambda x: A.squeeze_copy(x[:1], 0),
    lambda x: A.squeeze_copy(x[:1, :1], [0, 1, 2]),
    lambda x: A.t_copy(x[0]),
    lambda x: A.select_copy(x, 1, -1),
    lambda x: A.slice_copy(x, 1, 1, None, 2),
    lambda x: A.slice_copy(x, 2, -5, 10),
    lambda x: A.alias_copy(x),
    lambda x: A.unfold_copy(x, 1, 2, 1),
    lambda x: A.unfold_copy(x, 0, 2, 2),
    lambda x: A.view_copy(x.transpose(0, 2), [6, 4]),  # a non-contiguous view read contiguously
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("i", range(len(COPIES)))
def test_copies(dtype, i):
    x = make((4, 3, 2), dtype)
    xd = x.to(DEV)
    out = check(COPIES[i], x, grad=dtype.is_floating_point)
    # A copy, not a view: writing to it leaves the input alone.
    if out.numel():
        out.view(-1)[0] = out.view(-1)[1]
        torch.testing.assert_close(xd.cpu(), x)


def test_copy_errors():
    with pytest.raises(RuntimeError, match="invalid for input of size"):
        A.view_copy(torch.zeros(4, device=DEV), [3])
    with pytest.raises(IndexError):
        A.select_copy(torch.zeros(4, device=DEV), 0, 7)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("args", [(0, 2, 1), (1, 3, 2), (-1, 1, 3), (1, 5, 5), (2, 2, 3)])
def test_unfold_backward(dtype, args):
    dim, size, step = args
    check(lambda t: t.unfold(dim, size, step), make((3, 5, 7), dtype), grad=True)


def test_unfold_backward_direct():
    g = make((3, 2, 7, 3), torch.float32)
    out_c = A.unfold_backward(g, [3, 5, 7], 1, 3, 2)
    torch.testing.assert_close(A.unfold_backward(g.to(DEV), [3, 5, 7], 1, 3, 2).cpu(), out_c)
    check(lambda t: t.unfold(0, 1, 1), torch.tensor(2.5), grad=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_select_backward(dtype):
    check(lambda t: t.select(1, 2) * 2, make((3, 4, 2), dtype), grad=True)
    check(lambda t: t[:, -1], make((3, 4), dtype), grad=True)
    g = make((3, 2), dtype)
    torch.testing.assert_close(A.select_backward(g.to(DEV), [3, 4, 2], 1, -1).cpu(), A.select_backward(g, [3, 4, 2], 1, -1))


@pytest.mark.parametrize("args,err,match", [
    (([6], 0, 3, 0), ValueError, "step is 0 but must be > 0"),
    (([6], 0, 3, -2), ValueError, "step is -2 but must be > 0"),
    (([6], 0, -1, 1), RuntimeError, "size is -1 but must be >= 0"),
    (([6], 1, 3, 1), IndexError, "Dimension out of range"),
])
def test_unfold_backward_bad_arguments_raise_as_on_cpu(args, err, match):
    # Once a SIGFPE: the window count divided by a zero step.
    g = torch.randn(2, 3)
    with pytest.raises(err, match=match):
        torch.ops.aten.unfold_backward(g, *args)
    with pytest.raises(err, match=match):
        torch.ops.aten.unfold_backward(g.to("tpu"), *args)


def test_unfold_backward_grad_that_does_not_fit_the_windows_raises():
    with pytest.raises(RuntimeError, match="unfold_backward"):
        torch.ops.aten.unfold_backward(torch.randn(2, 3, device="tpu"), [6], 0, 3, 1)
