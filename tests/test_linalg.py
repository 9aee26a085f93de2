"""linalg.cpp on tpu against the CPU: trace, vdot, linalg.cross, solve_triangular, cholesky(_ex),
cholesky_inverse, cholesky_solve, triangular_solve, isin, bucketize, searchsorted (scalar values, empty
sequences too), tril/triu_indices; backward where PyTorch differentiates them.
Float32 linear algebra uses tolerances of 1e-4 (XLA's blocked solves round differently)."""
import pytest
import torch
import torch_tpu  # noqa: F401

DEV = "tpu"
LA_TOL = {torch.float32: dict(atol=1e-4, rtol=1e-4), torch.float64: {}}


def make(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    if dtype.is_floating_point or dtype.is_complex:
        return x.to(dtype) if not dtype.is_complex else torch.complex(x, x.flip(-1)).to(dtype)
    return (x * 10).to(dtype) if dtype != torch.bool else x > 0


def check(fn, *xs, grad=False, **tol):
    cs = [x.detach().clone().requires_grad_(grad) for x in xs]
    ds = [x.detach().to(DEV).requires_grad_(grad) for x in xs]
    oc, od = fn(*cs), fn(*ds)
    assert od.device.type == DEV
    torch.testing.assert_close(od.cpu(), oc, **tol)
    if grad:
        g = make(oc.shape, oc.dtype, seed=7)
        oc.backward(g)
        od.backward(g.to(DEV))
        for c, d in zip(cs, ds):
            torch.testing.assert_close(d.grad.cpu(), c.grad, **tol)


def test_trace_bool():
    with pytest.raises(NotImplementedError, match="trace"):
        torch.trace(torch.ones(2, 2, dtype=torch.bool, device=DEV))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.int32])
def test_trace(dtype):
    check(torch.trace, make((4, 6), dtype), grad=dtype.is_floating_point)
    check(torch.trace, make((5, 3), dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.complex64])
def test_vdot_cross(dtype):
    grad = dtype.is_floating_point or dtype.is_complex
    tol = dict(atol=2e-2, rtol=2e-2) if dtype == torch.bfloat16 else {}
    check(torch.vdot, make((7,), dtype), make((7,), dtype, seed=1), grad=grad, **tol)
    check(lambda a, b: torch.linalg.cross(a, b), make((4, 3), dtype), make((4, 3), dtype, seed=1), grad=grad, **tol)
    check(lambda a, b: torch.linalg.cross(a, b, dim=0), make((3, 2, 5), dtype), make((3, 1, 5), dtype, seed=1),
          grad=grad, **tol)


def test_vdot_errors():
    with pytest.raises(RuntimeError, match="same dtype"):
        torch.vdot(torch.ones(3, device=DEV), torch.ones(3, device=DEV, dtype=torch.float64))


def spd(n, batch, dtype, seed=0):
    a = make(batch + (n, n), dtype, seed)
    return a @ a.mT + n * torch.eye(n, dtype=dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("left", [False, True])
@pytest.mark.parametrize("unit", [False, True])
def test_solve_triangular(dtype, upper, left, unit):
    a = spd(4, (2,), dtype)
    a = a.triu() if upper else a.tril()
    b = make((2, 4, 3) if left else (2, 3, 4), dtype, seed=1)
    check(lambda x, y: torch.linalg.solve_triangular(x, y, upper=upper, left=left, unitriangular=unit), a, b,
          grad=True, **LA_TOL[dtype])
    # broadcast batch
    check(lambda x, y: torch.linalg.solve_triangular(x, y, upper=upper, left=left, unitriangular=unit), a[0],
          make((3, 4, 4), dtype, seed=2), **LA_TOL[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(dtype, upper):
    a = spd(5, (3,), dtype)
    check(lambda x: torch.linalg.cholesky(x, upper=upper), a, grad=True, **LA_TOL[dtype])
    L, info = torch.linalg.cholesky_ex(a.to(DEV), upper=upper)
    assert info.dtype == torch.int32 and info.cpu().eq(0).all()
    bad = a.clone()
    bad[1, 2, 2] = -100.0
    _, info = torch.linalg.cholesky_ex(bad.to(DEV))
    # Nonzero exactly where the CPU's is (XLA does not say which minor failed).
    assert torch.equal(info.cpu() != 0, torch.linalg.cholesky_ex(bad)[1] != 0)
    # Empty matrices factor (info 0), batched or not.
    for shape in [(0, 0), (3, 0, 0), (0, 4, 4)]:
        e = torch.zeros(shape, dtype=dtype)
        L, info = torch.linalg.cholesky_ex(e.to(DEV), upper=upper)
        assert torch.equal(info.cpu(), torch.linalg.cholesky_ex(e)[1]) and L.shape == e.shape
        assert torch.linalg.cholesky(e.to(DEV)).shape == e.shape


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_inverse_and_solve(dtype, upper):
    a = spd(4, (2,), torch.float64)
    if dtype.is_complex:
        a = a + 1j * (make((2, 4, 4), torch.float64, seed=3) - make((2, 4, 4), torch.float64, seed=3).mT)
    factor = torch.linalg.cholesky(a, upper=upper).to(dtype)
    tol = LA_TOL.get(dtype, dict(atol=1e-4, rtol=1e-4))
    check(lambda f: torch.cholesky_inverse(f, upper=upper), factor, grad=True, **tol)
    check(lambda f: torch.cholesky_inverse(f, upper=upper), factor[0], **tol)
    # cholesky_solve broadcasts B's batch against the factor's.
    b = make((3, 1, 4, 2), dtype, seed=1)
    check(lambda x, f: torch.cholesky_solve(x, f, upper=upper), b, factor, grad=True, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64])
@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("unit", [False, True])
def test_triangular_solve(dtype, upper, transpose, unit):
    a = spd(4, (2, 1), torch.float64)
    if dtype.is_complex:
        a = a + 1j * make((2, 1, 4, 4), torch.float64, seed=3)
    a = a.to(dtype)
    b = make((3, 4, 2), dtype, seed=1)
    tol = LA_TOL.get(dtype, dict(atol=1e-4, rtol=1e-4))
    # Both results: the solution and A broadcast to the common batch.
    for i in range(2):
        check(lambda y, x: torch.triangular_solve(y, x, upper=upper, transpose=transpose, unitriangular=unit)[i],
              b, a, grad=i == 0, **tol)


def test_triangular_solve_cholesky_inverse_empty_and_errors():
    for fn, args in [(torch.triangular_solve, (torch.randn(0, 2), torch.eye(0))),
                     (torch.triangular_solve, (torch.randn(3, 0), torch.eye(3))),
                     (torch.cholesky_inverse, (torch.eye(0),))]:
        want = fn(*args)
        got = fn(*[x.to(DEV) for x in args])
        for w, g in zip(want if isinstance(want, tuple) else (want,), got if isinstance(got, tuple) else (got,)):
            assert g.device.type == DEV and g.shape == w.shape
    bad = [
        (torch.triangular_solve, (torch.randn(3), torch.eye(3))),
        (torch.triangular_solve, (torch.randn(3, 2), torch.ones(3))),
        (torch.triangular_solve, (torch.randn(3, 2), torch.ones(2, 3))),
        (torch.triangular_solve, (torch.randn(4, 2), torch.eye(3))),
        (torch.triangular_solve, (torch.randn(3, 2, dtype=torch.float64), torch.eye(3))),
        (torch.triangular_solve, (torch.randn(3, 2).long(), torch.eye(3).long())),
        (torch.cholesky_inverse, (torch.ones(3),)),
        (torch.cholesky_inverse, (torch.ones(2, 3),)),
        (torch.cholesky_inverse, (torch.eye(3).long(),)),
        (torch.cholesky_inverse, (torch.eye(3).half(),)),
    ]
    for fn, args in bad:
        with pytest.raises(Exception) as cpu_err:
            fn(*args)
        with pytest.raises(type(cpu_err.value)) as dev_err:
            fn(*[x.to(DEV) for x in args])
        assert str(cpu_err.value).splitlines()[0] in str(dev_err.value)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.int32, torch.uint8, torch.float64])
def test_isin(dtype):
    x, t = make((4, 5), dtype), make((6,), dtype, seed=1)
    x[0, :3] = t[:3]
    for invert in (False, True):
        check(lambda a, b: torch.isin(a, b, invert=invert), x, t)
    check(lambda a, b: torch.isin(a, b), x, t.view(2, 3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("right", [False, True])
def test_bucketize_searchsorted(dtype, right):
    bounds = torch.sort(make((9,), dtype))[0]
    v = make((3, 4), dtype, seed=1)
    v[0, :3] = bounds[:3]
    for out_int32 in (False, True):
        check(lambda x, b: torch.bucketize(x, b, right=right, out_int32=out_int32), v, bounds)
        check(lambda b, x: torch.searchsorted(b, x, right=right, out_int32=out_int32), bounds, v)
    seq = torch.sort(make((3, 6), dtype, seed=2))[0]
    check(lambda b, x: torch.searchsorted(b, x, side="right" if right else "left"), seq, v)
    raw = make((3, 6), dtype, seed=3)
    sorter = torch.argsort(raw)
    check(lambda b, x: torch.searchsorted(b, x, sorter=sorter.to(b.device), right=right), raw, v)
    check(lambda b, x: torch.searchsorted(b, x, sorter=sorter[0].to(b.device), right=right), raw[0], v)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_bucketize_searchsorted_scalar_and_empty(dtype):
    bounds = torch.sort(make((9,), dtype))[0]
    for v in (bounds[4].item(), 0, 2.5, -1e9, 1e9):
        for right in (False, True):
            check(lambda b: torch.bucketize(v, b, right=right), bounds)
            check(lambda b: torch.searchsorted(b, v, right=right, out_int32=True), bounds)
            check(lambda b: torch.searchsorted(b, v, side="right" if right else "left",
                                              sorter=torch.argsort(b).to(b.device)), -bounds)
    # An empty sequence puts everything at 0, sorter or not.
    empty, v = torch.tensor([], dtype=dtype), make((3,), dtype, seed=1)
    check(lambda b, x: torch.searchsorted(b, x), empty, v)
    check(lambda b, x: torch.searchsorted(b, x, sorter=torch.tensor([], dtype=torch.int64, device=b.device)), empty, v)
    with pytest.raises(RuntimeError, match="scalar only when boundaries tensor dimension is 1"):
        torch.searchsorted(torch.ones(2, 3, device=DEV), 2.0)


@pytest.mark.parametrize("args", [(3, 4, 0), (4, 3, 1), (5, 5, -2), (0, 3, 0), (3, 3, 10), (3, 3, -10)])
def test_tri_indices(args):
    for fn in (torch.tril_indices, torch.triu_indices):
        d = fn(*args, device=DEV)
        assert d.device.type == DEV
        torch.testing.assert_close(d.cpu(), fn(*args))
    torch.testing.assert_close(torch.tril_indices(*args, device=DEV, dtype=torch.int32).cpu(),
                               torch.tril_indices(*args, dtype=torch.int32))


@pytest.mark.parametrize("dtype", [torch.bool, torch.complex64], ids=str)
def test_bucketize_refuses_types_the_cpu_cannot_order(dtype):
    v, bounds = torch.tensor([1, 0]).to(dtype), torch.tensor([0, 1]).to(dtype)
    with pytest.raises(NotImplementedError) as cpu:
        torch.bucketize(v, bounds)
    with pytest.raises(NotImplementedError, match="not implemented for") as dev:
        torch.bucketize(v.to(DEV), bounds.to(DEV))
    assert str(cpu.value).split("for ")[-1] == str(dev.value).split("for ")[-1]


@pytest.mark.parametrize("out_dtype, out_int32", [(torch.int32, False), (torch.int64, True), (torch.float32, False)])
def test_bucketize_out_of_the_wrong_dtype_raises_as_on_the_cpu(out_dtype, out_int32):
    v, bounds = torch.tensor([2.0]), torch.tensor([1.0, 3.0])
    for fn in (lambda v, b, o: torch.bucketize(v, b, out_int32=out_int32, out=o),
               lambda v, b, o: torch.searchsorted(b, v, out_int32=out_int32, out=o)):
        with pytest.raises(RuntimeError) as cpu:
            fn(v, bounds, torch.empty(1, dtype=out_dtype))
        with pytest.raises(RuntimeError) as dev:
            fn(v.to(DEV), bounds.to(DEV), torch.empty(1, dtype=out_dtype, device=DEV))
        assert str(dev.value) == str(cpu.value)
