"""nn.LSTM, nn.GRU, nn.RNN and their cells on tpu against the CPU, in every
eager mode and under torch.compile(backend="tpu"): the same module weights
run on both, and outputs, final states, input and initial-state gradients
and every parameter gradient are compared.

Every tpu path is covered (csrc/aten/recurrent.cpp says which runs when):
without gradients the whole stack as one lowered op (a device loop per
layer and direction); with gradients, dropout or under torch.compile one
torch_tpu::rnn_layer per layer and direction and its backward loop; under
autocast, for packed sequences and for the cells PyTorch's composite
per-step path (the fused cells and their backward ops). Bad inputs raise on
tpu the exception the CPU raises."""
import collections
import contextlib
import copy
import functools
import re

import pytest
import torch
import torch.nn as nn
import torch_tpu
from torch.nn.utils.rnn import pack_padded_sequence, pack_sequence, pad_packed_sequence
from torch.utils._python_dispatch import TorchDispatchMode
from torch_tpu import dynamo as tpu_dynamo
from torch_tpu.validate.compare import OpRecorder

I, H, B, T, PROJ = 3, 4, 2, 3, 2
MODES = ("strict", "debug", "defer_and_fuse", "compile")


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def close(got, want):
    assert got.device.type == "tpu" and got.shape == want.shape and got.dtype == want.dtype
    rtol, atol = torch_tpu.tolerance(want.dtype)
    torch.testing.assert_close(got.cpu(), want, rtol=rtol, atol=atol)


def flat(value):
    """The tensors of a module's result ((out, h) or (out, (h, c)) or h)."""
    if isinstance(value, torch.Tensor):
        return [value]
    return [t for v in value for t in flat(v)]


def pair(module, mode):
    """(CPU module, tpu module with the same weights, tpu callable for mode)."""
    tpu = copy.deepcopy(module).to("tpu")
    return module, tpu, torch.compile(tpu, backend="tpu") if mode == "compile" else tpu


@contextlib.contextmanager
def run_mode(mode, captured=True):
    """The eager mode; "compile" also lets Dynamo trace nn.RNN/GRU/LSTM (by
    default it leaves them to eager, on every backend) and, where `captured`,
    checks that the tpu backend captured programs."""
    if mode != "compile":
        with torch_tpu.eager_mode(mode):
            yield
        return
    with torch_tpu.eager_mode("strict"), torch._dynamo.config.patch(allow_rnn=True):
        yield
    if captured:
        stats = tpu_dynamo.compile_stats()
        assert stats["captures"] > 0 and stats["eager_graphs"] == 0, stats


def leaf(t, device):
    return t.detach().to(device).requires_grad_()


def check_forward_backward(cpu_mod, tpu_mod, tpu_call, mode, inputs, captured=True):
    """inputs: CPU tensors; each becomes a leaf on both devices. Compares the
    results, the inputs' gradients and the parameters' gradients; then the
    same forward without gradients (the device-loop path)."""
    cpu_in = [leaf(t, "cpu") for t in inputs]
    tpu_in = [leaf(t, "tpu") for t in inputs]
    want = flat(cpu_mod(*cpu_in))
    with run_mode(mode, captured):
        got = flat(tpu_call(*tpu_in))
        # One scalar over every result so that each gets a gradient.
        weights = [torch.randn(w.shape, generator=torch.Generator().manual_seed(k)) for k, w in enumerate(want)]
        sum(((w * x).sum() for w, x in zip(weights, want))).backward()
        sum(((w.to("tpu") * x).sum() for w, x in zip(weights, got))).backward()
        for g, w in zip(got, want):
            close(g, w)
        for g, w in zip(tpu_in, cpu_in):
            close(g.grad, w.grad)
        for (name, p), q in zip(cpu_mod.named_parameters(), tpu_mod.parameters()):
            assert q.grad is not None, name
            close(q.grad, p.grad)
        with torch.no_grad():
            want = flat(cpu_mod(*inputs))
            got = flat(tpu_call(*[t.to("tpu") for t in inputs]))
        for g, w in zip(got, want):
            close(g, w)


def _gen(seed):
    return torch.Generator().manual_seed(seed)


# (id, module factory, whether initial states are given, input shape)
LAYERS = [
    ("lstm_2_layers_bidir_proj_batch_first_h0",
     lambda: nn.LSTM(I, H, num_layers=2, bidirectional=True, proj_size=PROJ, batch_first=True), True, (B, T, I)),
    ("lstm", lambda: nn.LSTM(I, H), False, (T, B, I)),
    ("gru_2_layers_h0", lambda: nn.GRU(I, H, num_layers=2), True, (T, B, I)),
    ("gru_no_bias_unbatched", lambda: nn.GRU(I, H, bias=False), False, (T, I)),
    ("rnn_tanh_batch_first", lambda: nn.RNN(I, H, num_layers=2, batch_first=True), False, (B, T, I)),
    ("rnn_relu_bidir_h0", lambda: nn.RNN(I, H, nonlinearity="relu", bidirectional=True), True, (T, B, I)),
]


def initial_states(module, batched, seed):
    dirs = 2 if module.bidirectional else 1
    out = module.proj_size or module.hidden_size
    lead = (module.num_layers * dirs,) + ((B,) if batched else ())
    h0 = torch.randn(*lead, out, generator=_gen(seed))
    if isinstance(module, nn.LSTM):
        return [(h0, torch.randn(*lead, module.hidden_size, generator=_gen(seed + 1)))]
    return [h0]


class WithStates(nn.Module):
    """module(x, (h0, c0)) with the states as tensors (leaves of their own)."""

    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, x, *states):
        return self.module(x, states if len(states) == 2 else states[0])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", LAYERS, ids=[c[0] for c in LAYERS])
def test_layers(case, mode):
    _, factory, given, shape = case
    torch.manual_seed(0)
    module = factory()
    x = torch.randn(*shape, generator=_gen(1))
    inputs = [x]
    if given:
        module = WithStates(module)
        states = initial_states(module.module, len(shape) == 3, 2)[0]
        inputs += list(states) if isinstance(states, tuple) else [states]
    check_forward_backward(*pair(module, mode), mode, inputs)


CELLS = [
    ("lstm_cell", lambda: nn.LSTMCell(I, H), 2),
    ("lstm_cell_no_bias", lambda: nn.LSTMCell(I, H, bias=False), 2),
    ("gru_cell", lambda: nn.GRUCell(I, H), 1),
    ("gru_cell_no_bias", lambda: nn.GRUCell(I, H, bias=False), 1),
    ("rnn_cell_tanh", lambda: nn.RNNCell(I, H), 1),
    ("rnn_cell_relu", lambda: nn.RNNCell(I, H, nonlinearity="relu"), 1),
]


class CellWithStates(nn.Module):
    def __init__(self, cell):
        super().__init__()
        self.cell = cell

    def forward(self, x, *states):
        return self.cell(x, states if len(states) == 2 else states[0])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("given", [False, True], ids=["no_state", "state"])
@pytest.mark.parametrize("case", CELLS, ids=[c[0] for c in CELLS])
def test_cells(case, given, mode):
    _, factory, n_states = case
    torch.manual_seed(0)
    module = factory()
    inputs = [torch.randn(B, I, generator=_gen(1))]
    if given:
        module = CellWithStates(module)
        inputs += [torch.randn(B, H, generator=_gen(2 + k)) for k in range(n_states)]
    # torch 2.13's meta function of _thnn_fused_lstm_cell reads the biases'
    # devices even when there are none: Dynamo cannot trace LSTMCell(bias=False)
    # on any device but the CPU and runs that frame eagerly.
    captured = case[0] != "lstm_cell_no_bias"
    check_forward_backward(*pair(module, mode), mode, inputs, captured)


class Packed(nn.Module):
    """A recurrent module over a PackedSequence of mixed lengths, padded back."""

    def __init__(self, module, lengths, enforce_sorted):
        super().__init__()
        self.module, self.lengths, self.enforce_sorted = module, lengths, enforce_sorted

    def forward(self, x):
        packed = pack_padded_sequence(x, self.lengths, enforce_sorted=self.enforce_sorted)
        out, state = self.module(packed)
        return pad_packed_sequence(out)[0], state


PACKED = [
    ("lstm_bidir_unsorted", lambda: nn.LSTM(I, H, bidirectional=True), [1, 3], False),
    ("gru_2_layers_sorted", lambda: nn.GRU(I, H, num_layers=2), [3, 1], True),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", PACKED, ids=[c[0] for c in PACKED])
def test_packed_sequences(case, mode):
    _, factory, lengths, enforce_sorted = case
    torch.manual_seed(0)
    module = Packed(factory(), torch.tensor(lengths), enforce_sorted)
    x = torch.randn(max(lengths), len(lengths), I, generator=_gen(1))
    # Dynamo does not trace pack_padded_sequence and pad_packed_sequence (on
    # any backend): under compile these run eagerly.
    check_forward_backward(*pair(module, mode), mode, [x], captured=False)


def test_pack_sequence_list():
    """pack_sequence over a list of tpu tensors of different lengths."""
    torch.manual_seed(0)
    module = nn.GRU(I, H)
    seqs = [torch.randn(n, I, generator=_gen(n)) for n in (4, 2, 3)]
    tpu = copy.deepcopy(module).to("tpu")
    out, h = module(pack_sequence(seqs, enforce_sorted=False))
    got, gh = tpu(pack_sequence([s.to("tpu") for s in seqs], enforce_sorted=False))
    close(pad_packed_sequence(got)[0], pad_packed_sequence(out)[0])
    close(gh, h)


@pytest.mark.parametrize("cell", ["lstm_proj", "gru", "rnn_relu"])
def test_double_backward(cell):
    """create_graph=True through the layer loops (a gradient penalty): the
    second derivatives match the CPU's."""
    torch.manual_seed(0)
    module = {"lstm_proj": lambda: nn.LSTM(I, H, proj_size=PROJ, bidirectional=True),
              "gru": lambda: nn.GRU(I, H, num_layers=2),
              "rnn_relu": lambda: nn.RNN(I, H, nonlinearity="relu")}[cell]()
    tpu = copy.deepcopy(module).to("tpu")
    x = torch.randn(T, B, I, generator=_gen(1))
    xc, xt = leaf(x, "cpu"), leaf(x, "tpu")
    for m, xv in ((module, xc), (tpu, xt)):
        out = m(xv)[0]
        g, = torch.autograd.grad(out.square().sum(), xv, create_graph=True)
        (g.square().sum() + out.sum()).backward()
    close(xt.grad, xc.grad)
    for p, q in zip(module.parameters(), tpu.parameters()):
        close(q.grad, p.grad)


# ---- dropout between layers

def _dropout_lstm():
    torch.manual_seed(0)
    return nn.LSTM(I, H, num_layers=2, dropout=0.5, batch_first=True).to("tpu").train()


@pytest.mark.parametrize("mode", MODES[:3])
def test_dropout_zero_in_training_matches_cpu(mode):
    torch.manual_seed(0)
    module = nn.GRU(I, H, num_layers=2, dropout=0.0).train()
    check_forward_backward(*pair(module, mode), mode, [torch.randn(T, B, I, generator=_gen(1))])


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("mode", MODES[:3])
def test_dropout_draws_in_training(mode, grad):
    module = _dropout_lstm()
    x = torch.randn(B, T, I, generator=_gen(1)).to("tpu")
    with run_mode(mode), torch.set_grad_enabled(grad):
        torch.manual_seed(7)
        first = module(x)[0].cpu()
        torch.manual_seed(7)
        again = module(x)[0].cpu()
        other = module(x)[0].cpu()  # the generator moved on
        module.eval()
        plain = module(x)[0].cpu()
    torch.testing.assert_close(first, again, rtol=0, atol=0)
    assert not torch.equal(first, other)
    assert not torch.equal(first, plain)
    # eval (no dropout) is the CPU's result
    cpu = copy.deepcopy(module).cpu().eval()
    with torch.no_grad():
        torch.testing.assert_close(plain, cpu(x.cpu())[0], rtol=1.3e-6, atol=1e-5)


# ---- which path runs

class OpCounter(TorchDispatchMode):
    """Counts the ATen (and torch_tpu) operator calls a run makes."""

    def __init__(self):
        super().__init__()
        self.calls = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls[func._schema.name] += 1
        return func(*args, **(kwargs or {}))


def test_device_loop_is_one_op_whatever_the_length():
    """Without gradients a 2-layer LSTM is one aten::lstm op (each layer a
    device while loop), whatever the sequence length."""
    torch.manual_seed(0)
    module = nn.LSTM(I, H, num_layers=2).to("tpu")
    h0 = torch.zeros(2, B, H, device="tpu")
    for steps in (3, 9):
        x = torch.randn(steps, B, I).to("tpu")
        counter = OpCounter()
        with torch.no_grad(), counter:
            out = module(x, (h0, h0))[0]
        assert counter.calls == {"aten::lstm": 1}, counter.calls
        assert out.shape == (steps, B, H)


def test_gradients_take_the_layer_loops():
    """With gradients each layer and direction is one torch_tpu::rnn_layer
    (a device loop) and its backward one rnn_layer_backward: the ops of
    forward and backward do not depend on the sequence length."""
    torch.manual_seed(0)
    module = nn.GRU(I, H, num_layers=2, bidirectional=True).to("tpu")
    calls = []
    for steps in (3, 9):
        module.zero_grad(set_to_none=True)  # both runs store fresh gradients
        counter = OpCounter()
        with counter:
            module(torch.randn(steps, B, I).to("tpu"))[0].sum().backward()
        assert counter.calls["torch_tpu::rnn_layer"] == counter.calls["torch_tpu::rnn_layer_backward"] == 4
        assert "aten::_thnn_fused_gru_cell" not in counter.calls
        calls.append(counter.calls)
    assert calls[0] == calls[1], calls


@pytest.mark.parametrize("mode", MODES[:3])
@pytest.mark.parametrize("op", ["lstm", "gru"])
def test_per_step_composite_path(op, mode):
    """PyTorch's composite aten::lstm/gru (the path autocast takes): the fused
    cells and their backward ops, step by step."""
    torch.manual_seed(0)
    module = (nn.LSTM if op == "lstm" else nn.GRU)(I, H, num_layers=2, bidirectional=True)
    tpu = copy.deepcopy(module).to("tpu")
    x = torch.randn(T, B, I, generator=_gen(1))
    h = initial_states(module, True, 2)[0]
    overload = getattr(torch.ops.aten, op).input
    # The C++ composite kernel itself (decompose() would take PyTorch's Python
    # decomposition, which has no fused cells).
    composite = functools.partial(overload._op_dk, torch._C.DispatchKey.CompositeImplicitAutograd)

    def run(m, x, h):
        return composite(x, h, m._flat_weights, True, 2, 0.0, True, True, False)

    xc, xt = leaf(x, "cpu"), leaf(x, "tpu")
    hc = [leaf(t, "cpu") for t in (h if op == "lstm" else (h,))]
    ht = [leaf(t, "tpu") for t in (h if op == "lstm" else (h,))]
    with run_mode(mode):
        want = run(module, xc, hc if op == "lstm" else hc[0])
        rec = OpRecorder()
        with rec:
            got = run(tpu, xt, ht if op == "lstm" else ht[0])
            sum(g.sum() for g in got).backward()
        sum(w.sum() for w in want).backward()
        assert f"aten::_thnn_fused_{op}_cell" in rec.ops, sorted(rec.ops)
        for g, w in zip(got, want):
            close(g, w)
        for g, w in zip([xt] + ht, [xc] + hc):
            close(g.grad, w.grad)
        for p, q in zip(module.parameters(), tpu.parameters()):
            close(q.grad, p.grad)


def test_autocast_takes_the_per_step_path():
    """Under autocast the cells run in bfloat16 as CUDA's autocast runs them."""
    torch.manual_seed(0)
    module = nn.LSTM(I, H).to("tpu")
    with torch.autocast("tpu"), torch.no_grad():
        rec = OpRecorder()
        with rec:
            out = module(torch.randn(T, B, I).to("tpu"))[0]
    assert "aten::_thnn_fused_lstm_cell" in rec.ops and out.dtype == torch.bfloat16


def test_bfloat16_device_loop():
    """bfloat16 weights and input: the loop computes each step in float32 and
    rounds the state per step; compared with the CPU's float32 result."""
    torch.manual_seed(0)
    module = nn.LSTM(I, H, num_layers=2)
    x = torch.randn(T, B, I, generator=_gen(1))
    tpu = copy.deepcopy(module).to("tpu", torch.bfloat16)
    with torch.no_grad():
        want = module.to(torch.bfloat16).float()(x.bfloat16().float())[0]
        got = tpu(x.to("tpu", torch.bfloat16))[0]
    assert got.dtype == torch.bfloat16
    rtol, atol = torch_tpu.tolerance(torch.bfloat16)
    torch.testing.assert_close(got.cpu().float(), want, rtol=rtol, atol=atol)


# ---- bad inputs: the CPU's exception type and message (PyTorch's Python or
# its composite kernels raise most of them before any tpu op runs), or where
# a tpu lowering raises, a message of its own naming the problem

def _lstm(**kw):
    torch.manual_seed(0)
    return nn.LSTM(I, H, **kw)


def _vf_lstm(d, h_batch):
    """torch._VF.lstm called directly (no module checks) with initial states
    of the wrong batch size; without gradients on tpu this reaches the
    device-loop lowering. The CPU's oneDNN kernel accepts such states without
    a word (and returns states of their batch size); its reference path, run
    here, raises."""
    m = _lstm().to(d)
    x = torch.randn(T, B, I).to(d)
    h = torch.zeros(1, h_batch, H).to(d)
    with torch.no_grad(), torch.backends.mkldnn.flags(enabled=False):
        return torch._VF.lstm(x, (h, h), m._flat_weights, True, 1, 0.0, False, False, False)


def _gru_h0_double(d, grad):
    with torch.set_grad_enabled(grad):
        return nn.GRU(I, H).to(d)(torch.randn(T, B, I).to(d), torch.zeros(1, B, H, dtype=torch.float64).to(d))


BAD = [
    ("input_4d", lambda d: _lstm().to(d)(torch.randn(1, T, B, I).to(d))),
    ("input_size", lambda d: _lstm().to(d)(torch.randn(T, B, I + 1).to(d))),
    ("input_dtype", lambda d: _lstm().to(d)(torch.randn(T, B, I, dtype=torch.float64).to(d))),
    ("h0_shape", lambda d: _lstm().to(d)(torch.randn(T, B, I).to(d),
                                         (torch.zeros(1, B + 1, H).to(d), torch.zeros(1, B, H).to(d)))),
    ("c0_shape", lambda d: _lstm().to(d)(torch.randn(T, B, I).to(d),
                                         (torch.zeros(1, B, H).to(d), torch.zeros(1, B, H + 1).to(d)))),
    ("h0_layers", lambda d: nn.GRU(I, H, num_layers=2).to(d)(torch.randn(T, B, I).to(d),
                                                           torch.zeros(1, B, H).to(d))),
    ("proj_h0_size", lambda d: _lstm(proj_size=PROJ).to(d)(torch.randn(T, B, I).to(d),
                                                           (torch.zeros(1, B, H).to(d), torch.zeros(1, B, H).to(d)))),
    ("unbatched_with_batched_h0", lambda d: nn.GRU(I, H).to(d)(torch.randn(T, I).to(d), torch.zeros(1, B, H).to(d))),
    ("lstm_h0_not_tuple", lambda d: _lstm().to(d)(torch.randn(T, B, I).to(d), torch.zeros(1, B, H).to(d))),
    ("unsorted_enforce_sorted", lambda d: _lstm().to(d)(
        pack_padded_sequence(torch.randn(T, 3, I).to(d), torch.tensor([2, 5, 3]), enforce_sorted=True))),
    ("zero_length", lambda d: pack_padded_sequence(torch.randn(T, 2, I).to(d), torch.tensor([5, 0]))),
    ("cell_input_3d", lambda d: nn.LSTMCell(I, H).to(d)(torch.randn(1, B, I).to(d))),
    ("cell_input_size", lambda d: nn.GRUCell(I, H).to(d)(torch.randn(B, I + 1).to(d))),
    ("cell_hidden_batch", lambda d: nn.RNNCell(I, H).to(d)(torch.randn(B, I).to(d), torch.zeros(B + 1, H).to(d))),
    ("cell_hidden_size", lambda d: nn.LSTMCell(I, H).to(d)(torch.randn(B, I).to(d),
                                                           (torch.zeros(B, H + 1).to(d), torch.zeros(B, H).to(d)))),
    ("h0_dtype_no_grad", lambda d: _gru_h0_double(d, False), r"Double"),
    ("h0_dtype_grad", lambda d: _gru_h0_double(d, True), r"(?i)double"),
    ("vf_lstm_h0_batch", lambda d: _vf_lstm(d, B + 1), r"lstm: expected hidden states of size \[1, 2, \*\]"),
    ("dropout_out_of_range", lambda d: nn.LSTM(I, H, num_layers=2, dropout=1.5)),
]


@pytest.mark.parametrize("mode", MODES[:3])
@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_bad_inputs_raise_as_on_cpu(case, mode):
    fn, own_message = case[1], case[2] if len(case) > 2 else None
    with pytest.raises(Exception) as cpu_error:
        fn("cpu")
    with run_mode(mode), pytest.raises(Exception) as tpu_error:
        fn("tpu")
        torch.tpu.synchronize()
    assert type(tpu_error.value) is type(cpu_error.value), (cpu_error.value, tpu_error.value)
    if own_message:
        assert re.search(own_message, str(tpu_error.value)), tpu_error.value
    else:
        assert str(tpu_error.value) == str(cpu_error.value)
