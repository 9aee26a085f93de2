"""Out-of-range indices: debug mode raises IndexError at the op, as the CPU
does; strict and defer_and_fuse check on the device by default and raise when
a value next leaves the device; with TORCH_TPU_CHECK_INDICES=0 they follow
XLA (reads clamp, writes drop)."""
import copy

import pytest
import torch
import torch.nn.functional as F

import torch_tpu

# The eleven out-of-range cases of issue 18 (index 5 into size 3), each as
# f(x, idx) over device tensors.
BAD = {
    "index": lambda x, i: x[i],
    "gather": lambda x, i: x.gather(0, i),
    "index_select": lambda x, i: x.index_select(0, i),
    "embedding": lambda x, i: F.embedding(i, x[:, None]),
    "take": lambda x, i: x.take(i),
    "cross_entropy": lambda x, i: F.cross_entropy(x[None, :], i),
    "one_hot": lambda x, i: F.one_hot(i, 3),
    "scatter_": lambda x, i: x.clone().scatter_(0, i, 1.0),
    "index_add_": lambda x, i: x.clone().index_add_(0, i, torch.ones(1, device=x.device)),
    "setitem": lambda x, i: x.clone().index_put_((i,), torch.tensor(7.0, device=x.device)),
    "index_copy_": lambda x, i: x.clone().index_copy_(0, i, torch.ones(1, device=x.device)),
}

# In range, including what the CPU allows beyond [0, size): negative indices
# where it wraps them, and cross_entropy's ignore_index.
GOOD = {
    "index": (lambda x, i: x[i], [2, -3]),
    "gather": (lambda x, i: x.gather(0, i), [0, 2]),
    "index_select": (lambda x, i: x.index_select(0, i), [2, 1]),
    "embedding": (lambda x, i: F.embedding(i, x[:, None]), [1, 2]),
    "take": (lambda x, i: x.take(i), [-1, 0]),
    "cross_entropy": (lambda x, i: F.cross_entropy(x[None, :].expand(2, 3), i), [2, -100]),
    "one_hot": (lambda x, i: F.one_hot(i, 3), [0, 2]),
    "scatter_": (lambda x, i: x.clone().scatter_(0, i, 1.0), [2, 0]),
    "index_add_": (lambda x, i: x.clone().index_add_(0, i, torch.ones(2, device=x.device)), [2, 2]),
    "setitem": (lambda x, i: x.clone().index_put_((i,), torch.tensor(7.0, device=x.device)), [-1, 0]),
    "index_copy_": (lambda x, i: x.clone().index_copy_(0, i, torch.ones(2, device=x.device)), [0, 1]),
    "index_fill_": (lambda x, i: x.clone().index_fill_(0, i, 4.0), [-1, 1]),
    "put_": (lambda x, i: x.clone().put_(i, torch.ones(2, device=x.device)), [-3, 2]),
}


def inputs(device):
    return torch.tensor([0.5, -1.0, 2.0], device=device)


@pytest.mark.parametrize("case", sorted(BAD))
def test_debug_mode_raises_index_error(case):
    with torch_tpu.eager_mode("debug"):
        with pytest.raises(IndexError, match="out of bounds"):
            BAD[case](inputs("tpu"), torch.tensor([5], device="tpu"))
    with pytest.raises((IndexError, RuntimeError)):  # the CPU refuses it too
        BAD[case](inputs("cpu"), torch.tensor([5]))


@pytest.mark.parametrize("case", sorted(GOOD))
def test_debug_mode_allows_what_the_cpu_allows(case):
    f, idx = GOOD[case]
    with torch_tpu.eager_mode("debug"):
        got = f(inputs("tpu"), torch.tensor(idx, device="tpu")).cpu()
    torch.testing.assert_close(got, f(inputs("cpu"), torch.tensor(idx)))


UNCHECKED = """
import torch, torch_tpu
x = torch.tensor([0.5, -1.0, 2.0])
got = x.to("tpu").index_select(0, torch.tensor([5], device="tpu")).cpu()
torch.testing.assert_close(got, x[[2]])  # index clamped to the last row
print("CLAMPED-OK")
"""


def test_checks_off_clamp_reads_as_documented(run_python):
    r = run_python(UNCHECKED, TORCH_TPU_CHECK_INDICES="0")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "CLAMPED-OK" in r.stdout


CHECKED = """
import sys, torch, torch_tpu
sys.path.insert(0, {tests!r})
from test_index_checks import BAD, GOOD, inputs
torch_tpu.set_eager_mode({mode!r})
for name, f in sorted(BAD.items()):
    x = inputs("tpu")
    r = f(x, torch.tensor([5], device="tpu"))
    after = (x * 2).sum()  # work issued after the bad op, before any read
    try:
        r.cpu()
        print("SILENT", name)
    except IndexError as e:
        assert "TORCH_TPU_CHECK_INDICES" in str(e) and "test_index_checks.py:" in str(e), str(e)
        try:
            r.cpu()  # the op's result stays poisoned
            print("SILENT-AGAIN", name)
        except RuntimeError:
            pass
    assert after.item() == 3.0, name  # the runtime stays usable
for name, (f, idx) in sorted(GOOD.items()):
    got = f(inputs("tpu"), torch.tensor(idx, device="tpu")).cpu()
    torch.testing.assert_close(got, f(inputs("cpu"), torch.tensor(idx)))
# A bad index found at synchronize, as a CUDA device-side assert is.
torch.tensor([1.0, 2.0], device="tpu").gather(0, torch.tensor([9], device="tpu"))
try:
    torch.tpu.synchronize()
    print("SILENT synchronize")
except IndexError:
    pass
print("CHECKED-OK")
"""


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_check_indices_raises_on_the_next_read(run_python, mode):
    import os
    code = CHECKED.format(tests=os.path.dirname(__file__), mode=mode)
    r = run_python(code, TORCH_TPU_CHECK_INDICES=None)  # on by default
    assert r.returncode == 0, r.stderr[-3000:]
    assert "SILENT" not in r.stdout, r.stdout
    assert "CHECKED-OK" in r.stdout


# Checks chain across programs (one state read answers for many ops): the
# first failure in the chain is the one named, a good check after it does
# not hide it, and once it has been raised the next bad index is found again.
# The checks after the failure, up to the read, did not count: their ops'
# results are poisoned (as CUDA's device-side assert fails all later work);
# results from before it are good.
CHAIN = """
import torch, torch_tpu
torch_tpu.set_eager_mode({mode!r})
x = torch.arange(6.0, device="tpu")
good, bad = torch.tensor([1, 2], device="tpu"), torch.tensor([9], device="tpu")
def named(f, error=IndexError):
    try:
        f()
    except error as e:
        return type(e).__name__ + " " + str(e)
    return "SILENT"
a = x.index_select(0, good)
b = x.gather(0, bad)                       # LINE-GATHER
c = x.index_select(0, good).expand(3, 2).gather(0, good[None].expand(3, 2) % 3)
print("first:", named(lambda: c.cpu()))
print("poisoned:", named(lambda: b.cpu(), RuntimeError))
print("clean:", a.cpu().tolist())
print("unchecked:", named(lambda: c.cpu(), RuntimeError))
d = x.index_select(0, bad)                 # LINE-SELECT
print("again:", named(lambda: x.sum().item()))
print("after:", x.index_select(0, good).cpu().tolist())
"""


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_chained_checks_name_the_first_failure(run_python, mode):
    r = run_python(CHAIN.format(mode=mode), TORCH_TPU_CHECK_INDICES=None)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = dict(line.split(": ", 1) for line in r.stdout.splitlines() if ": " in line)
    code = CHAIN.splitlines()
    at = {m: next(i for i, c in enumerate(code, 1) if m in c) for m in ("LINE-GATHER", "LINE-SELECT")}
    assert "aten::gather" in lines["first"], lines
    assert f"<string>:{at['LINE-GATHER']}" in lines["first"], lines
    assert "gather" in lines["poisoned"], lines
    assert lines["clean"] == "[1.0, 2.0]", lines
    assert "not checked" in lines["unchecked"] and "aten::gather" in lines["unchecked"], lines
    assert "aten::index_select" in lines["again"], lines
    assert f"<string>:{at['LINE-SELECT']}" in lines["again"], lines
    assert lines["after"] == "[1.0, 2.0]", lines


# An index read twice is checked once (buffers never change value); the
# check answers for both ops: both results are poisoned, and once the failure
# has been raised the same index is checked again at its next use.
SHARED = """
import torch, torch_tpu
torch_tpu.set_eager_mode({mode!r})
x = torch.arange(6.0, device="tpu")
bad = torch.tensor([9], device="tpu")
a = x.index_select(0, bad)                 # LINE-FIRST
b = x.index_select(0, bad) * 2
outcomes = []
for t in (b, a):
    try:
        t.cpu()
        outcomes.append("SILENT")
    except (IndexError, RuntimeError) as e:
        outcomes.append(type(e).__name__ + " " + str(e))
print("second:", outcomes[0])
print("first:", outcomes[1])
c = x.index_select(0, bad)                 # LINE-AGAIN
try:
    c.cpu()
    print("again: SILENT")
except IndexError as e:
    print("again:", e)
"""


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_an_index_checked_once_answers_for_every_op_that_reads_it(run_python, mode):
    r = run_python(SHARED.format(mode=mode), TORCH_TPU_CHECK_INDICES=None)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = dict(line.split(": ", 1) for line in r.stdout.splitlines() if ": " in line)
    at = {m: next(i for i, c in enumerate(SHARED.splitlines(), 1) if m in c)
          for m in ("LINE-FIRST", "LINE-AGAIN")}
    assert lines["second"].startswith("IndexError"), lines
    assert f"<string>:{at['LINE-FIRST']}" in lines["second"], lines
    assert "SILENT" not in lines["first"], lines
    assert "aten::index_select" in lines["again"], lines
    assert f"<string>:{at['LINE-AGAIN']}" in lines["again"], lines


# defer_and_fuse: a graph whose checks chain from a failed graph's state is
# still pending when the failure is read; once it runs, its checks did not
# count, so its checked ops' results are poisoned then, never returned unchecked.
PENDING = """
import torch, torch_tpu
torch_tpu.set_eager_mode("defer_and_fuse")
x = torch.arange(6.0, device="tpu")
bad = torch.tensor([9], device="tpu")
first = x.gather(0, bad)
torch_tpu.flush()                          # the failed check's graph runs
later = x.gather(0, torch.tensor([7], device="tpu")) + 1   # recorded, not run
try:
    first.cpu()
    print("first: SILENT")
except IndexError as e:
    print("first:", e)
try:
    print("later: SILENT", later.cpu().tolist())
except IndexError as e:
    print("later:", e)
print("fresh:", x.index_select(0, torch.tensor([1], device="tpu")).cpu().tolist())
"""


def test_a_graph_chained_after_a_failure_is_poisoned_when_it_runs(run_python):
    r = run_python(PENDING, TORCH_TPU_CHECK_INDICES=None)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = dict(line.split(": ", 1) for line in r.stdout.splitlines() if ": " in line)
    assert "aten::gather" in lines["first"], lines
    assert "SILENT" not in lines["later"] and "not checked" in lines["later"], lines
    assert lines["fresh"] == "[1.0]", lines


# An op that raises for another reason (an index into an empty dimension)
# after its index check was recorded: that check fails on the device, but
# its failure is not the one to tell, and it must not stop the checks after
# it -- the good op that follows keeps its result.
DROPPED = """
import torch, torch_tpu
torch_tpu.set_eager_mode("{mode}")
for n in range(1, 4):
    try:
        torch.index_select(torch.empty(0, n, device="tpu"), 0, torch.tensor([0], device="tpu"))
        print("raised: NO")
    except RuntimeError as e:
        print("raised:", "dim should be positive" in str(e))
    x = torch.zeros(5, n, device="tpu")
    y = x.index_put((torch.tensor([1, 3], device="tpu"),), torch.ones(2, n, device="tpu"))
    print("after:", y.cpu().sum().item(), 2 * n)
"""


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_a_raising_ops_failed_check_does_not_stop_later_checks(run_python, mode):
    r = run_python(DROPPED.format(mode=mode), TORCH_TPU_CHECK_INDICES=None)
    assert r.returncode == 0, r.stderr[-3000:]
    raised = [line for line in r.stdout.splitlines() if line.startswith("raised:")]
    after = [line.split()[1:] for line in r.stdout.splitlines() if line.startswith("after:")]
    assert raised == ["raised: True"] * 3, r.stdout
    assert len(after) == 3 and all(float(got) == float(want) for got, want in after), r.stdout


# The device check compares `index - lo` as unsigned against the range's
# width: values at the integer type's limits, where that subtraction wraps,
# against the CPU's verdict.
LIMITS = """
import torch, torch_tpu
torch_tpu.set_eager_mode("{mode}")
x = torch.arange(3.0)
cases = [("index", torch.int32, v) for v in (-4, -3, 2, 3, 2**31 - 1, -2**31)]
cases += [("index_select", torch.int32, v) for v in (-1, 0, 2, 3, 2**31 - 1)]
cases += [("index", torch.int64, v) for v in (2**63 - 1, -2**63, -3)]
cases += [("embedding", torch.int32, v) for v in (299, 300, -1)]
table = torch.arange(300.0)[:, None]
for op, dtype, v in cases:
    i = torch.tensor([v], dtype=dtype)
    f = {{"index": lambda t, j: t[j], "index_select": lambda t, j: t.index_select(0, j),
         "embedding": lambda t, j: torch.nn.functional.embedding(j, table.to(t.device))}}[op]
    try:
        want = f(x, i).tolist()
    except IndexError:
        want = "IndexError"
    try:
        got = f(x.to("tpu"), i.to("tpu")).cpu().tolist()
    except IndexError:
        got = "IndexError"
    print("case:", op, dtype, v, want == got, want, got)
"""


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_checks_at_the_integer_limits_agree_with_the_cpu(run_python, mode):
    r = run_python(LIMITS.format(mode=mode), TORCH_TPU_CHECK_INDICES=None)
    assert r.returncode == 0, r.stderr[-3000:]
    cases = [line for line in r.stdout.splitlines() if line.startswith("case:")]
    assert len(cases) == 17, r.stdout
    assert all(line.split()[4] == "True" for line in cases), "\n".join(cases)
    assert sum("IndexError" in line for line in cases) >= 9, "\n".join(cases)


# Strict's checks wait for the next read and run there as one program: the
# check still reads the index the op read (an in-place write to the index
# after the op makes a new buffer, and the waiting check holds the old one),
# and more checks than wait at once (64) run in several programs with the
# failure still named. The reference is the CPU, which raises at the op.
WAITING = """
import torch, torch_tpu
torch_tpu.set_eager_mode("strict")
x = torch.arange(6.0, device="tpu")
i = torch.tensor([9], device="tpu")
y = x.index_select(0, i)                   # LINE-WRITTEN
i.sub_(9)                                  # now in range: too late for y
try:
    print("written: SILENT", y.cpu().tolist())
except IndexError as e:
    print("written:", e)
print("index now:", x.index_select(0, i).cpu().tolist())
xc = torch.arange(6.0)
got, want = [], []
for k in range(150):
    k_idx = torch.tensor([k % 6, (k * 5) % 6])
    got.append(x.gather(0, k_idx.to("tpu")))
    want.append(xc.gather(0, k_idx))
    if k == 100:
        bad = x.gather(0, torch.tensor([6], device="tpu"))  # LINE-MANY
try:
    torch.tpu.synchronize()
    print("many: SILENT")
except IndexError as e:
    print("many:", e)
print("values:", all(torch.equal(g.cpu(), w) for g, w in zip(got[:100], want)))
"""


def test_strict_checks_wait_for_the_read_and_read_the_index_the_op_read(run_python):
    r = run_python(WAITING, TORCH_TPU_CHECK_INDICES=None)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = dict(line.split(": ", 1) for line in r.stdout.splitlines() if ": " in line)
    at = {m: next(i for i, c in enumerate(WAITING.splitlines(), 1) if m in c)
          for m in ("LINE-WRITTEN", "LINE-MANY")}
    assert "aten::index_select" in lines["written"], lines
    assert f"<string>:{at['LINE-WRITTEN']}" in lines["written"], lines
    assert lines["index now"] == "[0.0]", lines
    assert "aten::gather" in lines["many"], lines
    assert f"<string>:{at['LINE-MANY']}" in lines["many"], lines
    assert lines["values"] == "True", lines


class PositionLM(torch.nn.Module):
    """Each forward embeds `arange`'s positions: a fresh index checked every
    step, beside the batch's tokens and targets, reused step after step."""

    def __init__(self, vocab=11, seq=6, d=8):
        super().__init__()
        self.tok, self.pos = torch.nn.Embedding(vocab, d), torch.nn.Embedding(seq, d)
        self.head = torch.nn.Linear(d, vocab)

    def forward(self, idx, tgt):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        return F.cross_entropy(self.head(torch.tanh(x)).flatten(0, 1), tgt.flatten())


def train(model, opt, idx, tgt, steps):
    for _ in range(steps):
        opt.zero_grad(set_to_none=True)
        loss = model(idx, tgt)
        loss.backward()
        opt.step()
    return loss.item()


def test_checks_leave_a_training_loops_program_the_same_whatever_its_reads():
    # The chain's first check after a read takes a state as every later one
    # does, and the fresh positions' checks do not push the batch's out of
    # what was checked lately: so the steady step is one program, whether a
    # read came just before it or many steps ago.
    torch.manual_seed(0)
    model = PositionLM()
    idx, tgt = torch.randint(0, 11, (3, 6)), torch.randint(0, 11, (3, 6))
    ref = copy.deepcopy(model)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=0.05)
    tpu_model = model.to("tpu")
    opt = torch.optim.AdamW(tpu_model.parameters(), lr=0.05)
    idx_t, tgt_t = idx.to("tpu"), tgt.to("tpu")
    misses, losses, want = [], [], []
    with torch_tpu.eager_mode("defer_and_fuse"):
        for block in (3, 1, 4, 1, 9, 2, 12):  # the first two compile the first and steady steps
            before = torch_tpu._C._counters().get("misses", 0)
            losses.append(train(tpu_model, opt, idx_t, tgt_t, block))  # .item() reads
            misses.append(torch_tpu._C._counters().get("misses", 0) - before)
            want.append(train(ref, ref_opt, idx, tgt, block))
    assert misses[0] > 0 and misses[2:] == [0] * 5, misses  # the counter is there: the first block compiled
    assert losses == pytest.approx(want, rel=1e-4, abs=1e-5)
