"""Every tpu_dist collective on `tpu` tensors against the same collective run
by Gloo on CPU tensors, in one group created as "cpu:gloo,tpu:tpu_dist".
Where Gloo lacks the dtype or reduce op, the expected value is computed from
the inputs, which every rank can regenerate for every other rank.
Writes {check name: "ok" | error text} to $TPU_DIST_RESULT."""
import contextlib
import traceback

import torch

from _common import dist, init, report

R = dist.ReduceOp
rank, world, dev = init("cpu:gloo,tpu:tpu_dist", timeout_s=15)
results = {}


def _complex_blocker():
    # c10d hands complex tensors to backends through torch.view_as_real.
    try:
        torch.view_as_real(torch.zeros(2, dtype=torch.complex64, device=dev))
        return None
    except NotImplementedError as e:
        return f"skip: needs a tpu lowering of aten::view_as_real ({str(e).splitlines()[0][:120]})"


COMPLEX_BLOCKER = _complex_blocker()

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
          torch.int16, torch.int32, torch.int64, torch.uint16, torch.uint32, torch.uint64,
          torch.bool, torch.complex64, torch.complex128]
GLOO_DTYPES = {torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
               torch.uint8, torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128}
OPS = {"sum": R.SUM, "avg": R.AVG, "product": R.PRODUCT, "min": R.MIN, "max": R.MAX}


def name(dtype):
    return str(dtype).replace("torch.", "")


def make(dtype, shape, r, salt=0):
    g = torch.Generator().manual_seed(7919 * r + 31 * salt + DTYPES.index(dtype))
    if dtype.is_floating_point:
        return torch.randn(shape, generator=g).to(dtype)
    if dtype.is_complex:
        return torch.randn(shape, generator=g, dtype=dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype == torch.uint64:  # values above 2**63 exercise unsigned ordering
        return torch.randint(-2**62, 2**62, shape, generator=g).mul(2).view(torch.uint64)
    lo = 0 if dtype in (torch.uint8, torch.uint16, torch.uint32) else -4
    return torch.randint(lo, lo + 9, shape, generator=g).to(dtype)


def gloo_reduces(dtype, op):
    if dtype not in GLOO_DTYPES:
        return False
    if dtype.is_complex:
        return op in ("sum", "avg")
    return op != "avg" or dtype.is_floating_point


def expected_reduction(dtype, op, inputs):
    """Reference for what Gloo cannot reduce: Python integers (exact, then
    wrapped to the dtype's width) or float64/complex128."""
    if dtype == torch.bool:
        return (torch.stack(inputs).all(0) if op in ("product", "min") else torch.stack(inputs).any(0))
    if dtype.is_complex:
        out = inputs[0].to(torch.complex128)
        for x in inputs[1:]:
            out = out * x.to(torch.complex128) if op == "product" else out + x.to(torch.complex128)
        return (out / len(inputs) if op == "avg" else out).to(dtype)
    bits = torch.iinfo(dtype).bits
    signed = torch.iinfo(dtype).min < 0
    cols = list(zip(*[x.reshape(-1).tolist() for x in inputs]))
    out = []
    for vals in cols:
        if op == "sum":
            v = sum(vals)
        elif op == "avg":
            s = sum(vals)
            v = abs(s) // len(vals) * (1 if s >= 0 else -1)
        elif op == "product":
            v = 1
            for x in vals:
                v *= x
        else:
            v = min(vals) if op == "min" else max(vals)
        v %= 2**bits
        if signed and v >= 2**(bits - 1):
            v -= 2**bits
        out.append(v)
    return torch.tensor(out, dtype=dtype).reshape(inputs[0].shape)


def same(a, b, exact=True):
    a = a.cpu()
    if exact:
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    return torch.allclose(a, b, rtol=1e-5, atol=1e-5)


def check(label, fn, dtype=None):
    if dtype is not None and dtype.is_complex and COMPLEX_BLOCKER:
        results[label] = COMPLEX_BLOCKER
        return
    try:
        ok = fn()
        if isinstance(ok, str) and ok.startswith("skip:"):
            results[label] = ok
        else:
            results[label] = "ok" if ok in (True, None) else f"mismatch: {ok}"
    except Exception:
        results[label] = traceback.format_exc(limit=3)


SHAPE = (3, 5)

# ---- all_reduce: every dtype x op --------------------------------------------
for dtype in DTYPES:
    for op, rop in OPS.items():
        if dtype.is_complex and op in ("min", "max", "product"):  # c10d rejects these itself
            continue

        def run(dtype=dtype, op=op, rop=rop):
            mine = make(dtype, SHAPE, rank)
            t = mine.to(dev)
            dist.all_reduce(t, op=rop)
            if gloo_reduces(dtype, op):
                ref = mine.clone()
                dist.all_reduce(ref, op=rop)
            else:
                ref = expected_reduction(dtype, op, [make(dtype, SHAPE, r) for r in range(world)])
            return same(t, ref, exact=not (dtype.is_complex and op == "product"))

        check(f"all_reduce[{name(dtype)}-{op}]", run, dtype)


def bitwise_on_float_rejected():
    try:
        dist.all_reduce(make(torch.float32, SHAPE, rank).to(dev), op=R.BAND)
    except RuntimeError as e:
        return "needs an integer dtype" in str(e) or str(e)
    return "no error"


check("all_reduce[float32-band]_raises", bitwise_on_float_rejected)


def bitwise_int():
    mine = make(torch.int32, SHAPE, rank)
    t = mine.to(dev)
    dist.all_reduce(t, op=R.BXOR)
    dist.all_reduce(mine, op=R.BXOR)
    return same(t, mine)


check("all_reduce[int32-bxor]", bitwise_int)


def both(make_args, call, outputs):
    """Runs `call` on tpu tensors and on CPU tensors (Gloo) built from the same
    inputs and compares the named outputs."""
    tpu_args = make_args(dev)
    cpu_args = make_args(torch.device("cpu"))
    call(*tpu_args)
    try:
        call(*cpu_args)
    except RuntimeError as e:
        # Gloo's own CPU gather sometimes rejects complex128 ("Invalid scalar
        # type"): then there is no reference to compare with.
        flat = [t for a in cpu_args for t in (a if isinstance(a, list) else [a])
                if isinstance(t, torch.Tensor)]
        if "Invalid scalar type" in str(e) and any(t.is_complex() for t in flat):
            return "skip: Gloo rejected the complex CPU reference (Invalid scalar type)"
        raise
    for i in outputs:
        a, b = tpu_args[i], cpu_args[i]
        pairs = zip(a, b) if isinstance(a, list) else [(a, b)]
        for x, y in pairs:
            if not same(x, y):
                return f"arg {i}: {x.cpu()} != {y}"
    return True


DATA_DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.uint8, torch.bool, torch.complex128]
ODD_DTYPES = [torch.int16, torch.uint16, torch.uint32, torch.uint64]  # Gloo lacks these


def movement(label, dtype, make_args, call, outputs, expected=None):
    if dtype in GLOO_DTYPES:
        check(f"{label}[{name(dtype)}]", lambda: both(make_args, call, outputs), dtype)
    else:
        def run():
            args = make_args(dev)
            call(*args)
            exp = expected(dtype)
            got = args[outputs[0]]
            got = got if isinstance(got, list) else [got]
            return all(same(g, e) for g, e in zip(got, exp)) or f"{[g.cpu() for g in got]} != {exp}"
        check(f"{label}[{name(dtype)}]", run, dtype)


for dtype in DATA_DTYPES + ODD_DTYPES:
    mk = lambda d, r=rank, dtype=dtype, s=0: make(dtype, SHAPE, r, s).to(d)
    movement("broadcast", dtype, lambda d: [mk(d)], lambda t: dist.broadcast(t, src=1), [0],
             lambda dt: [make(dt, SHAPE, 1)])
    movement("all_gather", dtype,
             lambda d: [[torch.zeros(SHAPE, dtype=dtype, device=d) for _ in range(world)], mk(d)],
             lambda outs, t: dist.all_gather(outs, t), [0],
             lambda dt: [make(dt, SHAPE, r) for r in range(world)])
    movement("all_gather_into_tensor", dtype,
             lambda d: [torch.zeros((world * 3, 5), dtype=dtype, device=d), mk(d)],
             lambda out, t: dist.all_gather_into_tensor(out, t), [0],
             lambda dt: [torch.cat([make(dt, SHAPE, r) for r in range(world)])])
    movement("all_to_all_single", dtype,
             lambda d: [torch.zeros((2 * world, 5), dtype=dtype, device=d),
                        make(dtype, (2 * world, 5), rank).to(d)],
             lambda out, t: dist.all_to_all_single(out, t), [0],
             lambda dt: [torch.cat([make(dt, (2 * world, 5), r)[2 * rank:2 * rank + 2]
                                    for r in range(world)])])

for dtype in DATA_DTYPES:
    mk = lambda d, r=rank, dtype=dtype, s=0: make(dtype, SHAPE, r, s).to(d)
    movement("gather", dtype,
             lambda d: [[torch.zeros(SHAPE, dtype=dtype, device=d) for _ in range(world)]
                        if rank == 1 else None, mk(d)],
             lambda outs, t: dist.gather(t, outs, dst=1), [0] if rank == 1 else [1])
    movement("scatter", dtype,
             lambda d: [torch.zeros(SHAPE, dtype=dtype, device=d),
                        [mk(d, r, s=5) for r in range(world)] if rank == 0 else None],
             lambda out, ins: dist.scatter(out, ins, src=0), [0])
    movement("all_to_all", dtype,
             lambda d: [[torch.zeros(2, 5, dtype=dtype, device=d) for r in range(world)],
                        [make(dtype, (2, 5), rank, r).to(d) for r in range(world)]],
             lambda outs, ins: dist.all_to_all(outs, ins), [0])


def uneven_all_to_all_list():
    # Rank r sends r + 1 rows to every rank; Gloo's list form needs equal
    # sizes, so the expected value comes from the inputs.
    outs = [torch.zeros(r + 1, 5, device=dev) for r in range(world)]
    dist.all_to_all(outs, [make(torch.float32, (rank + 1, 5), rank, j).to(dev) for j in range(world)])
    return all(same(outs[r], make(torch.float32, (r + 1, 5), r, rank)) for r in range(world))


check("all_to_all_uneven[float32]", uneven_all_to_all_list)

for dtype in [torch.float32, torch.int64, torch.bfloat16]:
    for op in ["sum", "max"] + (["avg"] if dtype.is_floating_point else []):
        rop = OPS[op]
        mk = lambda d, r=rank, dtype=dtype, s=0: make(dtype, SHAPE, r, s).to(d)
        movement(f"reduce-{op}", dtype, lambda d: [mk(d)], lambda t: dist.reduce(t, dst=1, op=rop),
                 [0] if rank == 1 else [])
        movement(f"reduce_scatter-{op}", dtype,
                 lambda d: [torch.zeros(SHAPE, dtype=dtype, device=d),
                            [mk(d, rank, s=r) for r in range(world)]],
                 lambda out, ins: dist.reduce_scatter(out, ins, op=rop), [0])
        movement(f"reduce_scatter_tensor-{op}", dtype,
                 lambda d: [torch.zeros(SHAPE, dtype=dtype, device=d),
                            make(dtype, (world * 3, 5), rank).to(d)],
                 lambda out, t: dist.reduce_scatter_tensor(out, t, op=rop), [0])

for dtype in [torch.int16, torch.uint32]:
    def rs_odd(dtype=dtype):
        out = torch.zeros(SHAPE, dtype=dtype, device=dev)
        dist.reduce_scatter_tensor(out, make(dtype, (world * 3, 5), rank).to(dev), op=R.MAX)
        full = expected_reduction(dtype, "max", [make(dtype, (world * 3, 5), r) for r in range(world)])
        return same(out, full.chunk(world)[rank])
    check(f"reduce_scatter_tensor-max[{name(dtype)}]", rs_odd)


def uneven_all_to_all(d):
    # Rank r sends (r + j + 1) rows to rank j.
    send = [rank + j + 1 for j in range(world)]
    recv = [j + rank + 1 for j in range(world)]
    inp = make(torch.float32, (sum(send), 4), rank).to(d)
    return [torch.zeros(sum(recv), 4, device=d), inp, recv, send]


check("all_to_all_single_uneven[float32]",
      lambda: both(uneven_all_to_all, lambda o, i, rs, ss: dist.all_to_all_single(o, i, rs, ss), [0]))


def coalesced_all_gather(d):
    ins = [make(torch.float32, (2, 3), rank, 1).to(d), make(torch.int64, (4,), rank, 2).to(d)]
    outs = [torch.zeros(world * 2, 3, device=d), torch.zeros(world * 4, dtype=torch.int64, device=d)]
    return [outs, ins]


def run_coalesced_all_gather(outs, ins):
    # Gloo has no coalescing, so the CPU reference issues the ops one by one.
    ctx = dist._coalescing_manager(device=outs[0].device) if outs[0].is_tpu else contextlib.nullcontext()
    with ctx:
        for o, i in zip(outs, ins):
            dist.all_gather_into_tensor(o, i)


check("all_gather_into_tensor_coalesced", lambda: both(coalesced_all_gather, run_coalesced_all_gather, [0]))


def coalesced_reduce_scatter(d):
    ins = [make(torch.float32, (world * 2, 3), rank, 1).to(d), make(torch.int64, (world * 4,), rank, 2).to(d)]
    outs = [torch.zeros(2, 3, device=d), torch.zeros(4, dtype=torch.int64, device=d)]
    return [outs, ins]


def run_coalesced_reduce_scatter(outs, ins):
    # Gloo has no coalescing, so the CPU reference issues the ops one by one.
    ctx = dist._coalescing_manager(device=outs[0].device) if outs[0].is_tpu else contextlib.nullcontext()
    with ctx:
        for o, i in zip(outs, ins):
            dist.reduce_scatter_tensor(o, i)


check("reduce_scatter_tensor_coalesced", lambda: both(coalesced_reduce_scatter, run_coalesced_reduce_scatter, [0]))


def coalesced_all_reduce(d):
    return [[make(torch.float32, (2, 3), rank, 1).to(d), make(torch.float32, (4,), rank, 2).to(d)]]


check("all_reduce_coalesced",
      lambda: both(coalesced_all_reduce, lambda ts: dist.all_reduce_coalesced(ts), [0]))


def send_recv(d):
    peer = (rank + 1) % world
    src = (rank - 1) % world
    out = torch.zeros(SHAPE, dtype=torch.float32, device=d)
    return [make(torch.float32, SHAPE, rank).to(d), out, peer, src]


def run_send_recv(t, out, peer, src):
    # Blocking send waits for the matching recv (as with Gloo), so ranks
    # alternate.
    if rank % 2 == 0:
        dist.send(t, peer)
        dist.recv(out, src)
    else:
        dist.recv(out, src)
        dist.send(t, peer)


check("send_recv", lambda: both(send_recv, run_send_recv, [1]))


def run_isend_irecv(t, out, peer, src):
    ops = [dist.P2POp(dist.isend, t, peer), dist.P2POp(dist.irecv, out, src)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()


check("isend_irecv", lambda: both(send_recv, run_isend_irecv, [1]))


def send_in_flight_during_collectives():
    # A large isend is still in flight (Gloo waits for the matching recv)
    # while other collectives stage their operands through host memory: the
    # bytes being sent must not be overwritten by that staging.
    shape = (1 << 20,)
    peer, src = (rank + 1) % world, (rank - 1) % world
    send = dist.isend(make(torch.float32, shape, rank, salt=5).to(dev), peer)
    summed = torch.ones(shape, device=dev)
    dist.all_reduce(summed)
    gathered = torch.zeros(world * shape[0], device=dev)
    dist.all_gather_into_tensor(gathered, torch.full(shape, float(rank), device=dev))
    out = torch.zeros(shape, device=dev)
    dist.recv(out, src)
    send.wait()
    expected_gather = torch.arange(world, dtype=torch.float32).repeat_interleave(shape[0])
    return (same(out, make(torch.float32, shape, src, salt=5)) and
            same(summed, torch.full(shape, float(world))) and same(gathered, expected_gather))


check("isend_in_flight_during_collectives", send_in_flight_during_collectives)
check("barrier", lambda: dist.barrier())


def view_write():
    base = torch.zeros(4, 6, device=dev)
    view = base[1:3, ::2]  # non-contiguous
    view.copy_(torch.full((2, 3), float(rank + 1)))
    dist.all_reduce(view)
    exp = torch.zeros(4, 6)
    exp[1:3, ::2] = sum(r + 1 for r in range(world))
    return same(base, exp)


check("all_reduce_noncontiguous_view", view_write)
check("all_reduce_0dim", lambda: same(_0d := (lambda t: (dist.all_reduce(t), t)[1])(
    torch.tensor(float(rank + 1), device=dev)), torch.tensor(float(sum(range(1, world + 1))))))
check("all_reduce_empty", lambda: dist.all_reduce(torch.zeros(0, 3, device=dev)))


def future_value():
    t = torch.ones(4, device=dev)
    w = dist.all_reduce(t, async_op=True)
    v = w.get_future().wait()
    w.wait()
    return same(v[0], torch.full((4,), float(world))) and w.is_completed()


check("async_work_future", future_value)


# ---- premul_sum (FSDP2's gradient divide): sum of factor * each rank's operand
def premul_sum(kind, factor):
    inputs = [make(torch.float32, (world * 4,), r) for r in range(world)]
    expected = sum(factor * x for x in inputs)
    mine = inputs[rank].to(dev)
    rop = R.PREMUL_SUM(torch.tensor(factor, device=dev) if kind == "tensor" else factor)
    if kind == "all_reduce":
        dist.all_reduce(mine, op=rop)
        return same(mine, expected, exact=False)
    out = torch.empty(4, device=dev)
    dist.reduce_scatter_tensor(out, mine, op=rop)
    return same(out, expected[rank * 4:(rank + 1) * 4], exact=False) and same(mine, inputs[rank])


check("premul_sum_all_reduce", lambda: premul_sum("all_reduce", 0.25))
check("premul_sum_reduce_scatter", lambda: premul_sum("reduce_scatter", 0.5))
check("premul_sum_tensor_factor", lambda: premul_sum("tensor", 1 / 3))


def set_timeout():
    from datetime import timedelta
    g = dist.distributed_c10d._get_default_group()
    g.set_timeout(timedelta(seconds=20))
    backend = g._get_backend(torch.device(dev))
    t = torch.ones(2, device=dev)
    dist.all_reduce(t)
    return backend.timeout == timedelta(seconds=20) and same(t, torch.full((2,), float(world)))


check("set_timeout", set_timeout)


def plain_tpu_dist_group_takes_cpu_tensors():
    g = dist.new_group(backend="tpu_dist")
    t = torch.ones(3)
    dist.all_reduce(t, group=g)
    return same(t, torch.full((3,), float(world)))


check("tpu_dist_group_cpu_tensor", plain_tpu_dist_group_takes_cpu_tensors)

# ---- bad input: the same clear error on every rank, and the group stays usable
def expect_error(fn, *needles):
    try:
        fn()
    except RuntimeError as e:
        msg = str(e)
        missing = [n for n in needles if n not in msg]
        return not missing or f"message lacks {missing}: {msg}"
    return "no error raised"


check("mismatched_shapes", lambda: expect_error(
    lambda: dist.all_reduce(torch.ones(4 + rank, device=dev)), "all_reduce", "ranks disagree",
    "rank 0: all_reduce(Float[4]", "rank 1: all_reduce(Float[5]"))
check("mismatched_dtypes", lambda: expect_error(
    lambda: dist.all_reduce(torch.ones(4, dtype=[torch.float32, torch.int32][rank % 2], device=dev)),
    "all_reduce", "ranks disagree", "Float", "Int"))
check("mismatched_collectives", lambda: expect_error(
    lambda: dist.all_reduce(torch.ones(4, device=dev)) if rank == 0 else dist.broadcast(torch.ones(4, device=dev), 0),
    "ranks disagree", "all_reduce", "broadcast"))
check("mismatched_roots", lambda: expect_error(
    lambda: dist.broadcast(torch.ones(4, device=dev), src=rank), "broadcast", "root=0", "root=1"))
check("mismatched_all_to_all_splits", lambda: expect_error(
    lambda: dist.all_to_all_single(torch.zeros(3, device=dev), torch.zeros(3, device=dev),
                                   [1, 2], [2, 1] if rank == 0 else [1, 2]),
    "all_to_all_single", "split sizes"))
check("one_rank_bad_output_size", lambda: expect_error(
    lambda: dist.all_gather_into_tensor(torch.zeros(world * 4 + (rank == 1), device=dev),
                                        torch.zeros(4, device=dev)),
    "all_gather_into_tensor", "rank 1"))


def still_usable():
    t = torch.ones(2, device=dev)
    dist.all_reduce(t)
    return same(t, torch.full((2,), float(world)))


check("usable_after_errors", still_usable)


def tpu_tensor_on_cpu_only_group():
    g = dist.new_group(backend="gloo")
    # torch's own message (the group has no backend for tpu); it names the
    # device but not the backend.
    return expect_error(lambda: dist.all_reduce(torch.ones(2, device=dev), group=g),
                        "No backend type associated with device type tpu")


check("tpu_tensor_on_gloo_group", tpu_tensor_on_cpu_only_group)

report(results)
dist.destroy_process_group()
