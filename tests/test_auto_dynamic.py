"""Automatic dynamic dimensions (runtime/auto_dynamic.h): where tensors are
copied to tpu, a dimension whose size varies at the same Python line is padded
to its bucket from then on, without marking, and results stay the CPU's."""
import os
import subprocess
import sys

import pytest
import torch

import torch_tpu
from torch_tpu.dynamic import padding


@pytest.fixture(autouse=True)
def fresh_places():
    torch_tpu._C._reset_auto_dynamic()
    before = torch_tpu.dynamic.config(automatic=True)
    yield
    torch_tpu.dynamic.config(**before)


def copy(x):
    return x.to("tpu")  # the one place of most tests here


def made_dynamic():
    return torch_tpu.metrics().get("dims_made_dynamic", 0)


def test_a_second_size_in_one_dimension_makes_it_dynamic():
    before = made_dynamic()
    xs = [torch.randn(2, n) for n in (5, 7, 20, 7)]
    ts = [copy(x) for x in xs]
    assert [padding(t) for t in ts] == [None, (1, 7, 16), (1, 20, 32), (1, 7, 16)]
    assert made_dynamic() == before + 1
    for x, t in zip(xs, ts):
        assert torch.equal(t.cpu(), x)
        torch.testing.assert_close((t.exp() * 2).softmax(1).cpu(), (x.exp() * 2).softmax(1))


def test_sizes_changing_in_two_dimensions_at_once_stay_static():
    ts = [copy(torch.randn(n, n + 1)) for n in (3, 4, 6)]
    assert [padding(t) for t in ts] == [None, None, None]


def test_places_are_told_apart_by_line_dtype_and_rank():
    a = [torch.randn(2, n).to("tpu") for n in (5, 6)]
    b = torch.randn(2, 9).to("tpu")  # another line: its first copy
    c = [copy(torch.arange(n).view(1, n)) for n in (5, 6)]  # int64 here, float32 there
    d = [copy(torch.randn(2, n)) for n in (5,)]
    assert padding(a[1]) == (1, 6, 16) and padding(b) is None
    assert padding(c[0]) is None and padding(c[1]) == (1, 6, 16)
    assert padding(d[0]) is None  # a float32 rank 2 at this place: its first copy


def test_config_turns_it_off_and_on():
    assert torch_tpu.dynamic.config(automatic=False) == {"automatic": True}
    assert [padding(copy(torch.randn(2, n))) for n in (5, 6, 7)] == [None] * 3
    torch_tpu.dynamic.config(automatic=True)
    assert padding(copy(torch.randn(2, 8))) is None  # the place starts over from here
    assert padding(copy(torch.randn(2, 9))) == (1, 9, 16)
    with pytest.raises(TypeError, match="automatic is a bool"):
        torch_tpu.dynamic.config(automatic=1)


def test_mark_static_keeps_a_dimension_static():
    xs = [torch.randn(2, n) for n in (5, 6, 7)]
    torch_tpu.dynamic.mark_static(xs[2], 1)
    ts = [copy(x) for x in xs]
    assert [padding(t) for t in ts] == [None, (1, 6, 16), None]
    assert padding(torch_tpu.dynamic.mark_static(ts[1], 1)) is None
    assert torch.equal(ts[1].cpu(), xs[1])
    torch._dynamo.mark_static(xs[1], 1)  # dynamo's own mark is honoured too
    assert padding(copy(xs[1])) is None
    with pytest.raises(IndexError, match="out of range"):
        torch_tpu.dynamic.mark_static(xs[0], 2)
    with pytest.raises(TypeError, match="a dimension is an int"):
        torch_tpu.dynamic.mark_static(xs[0], "1")


def test_unrelated_tensors_sharing_a_place_stay_right():
    """A wrong guess costs time, never a value: every op on these tensors
    (padded or not, whatever came before at their place) equals the CPU's."""
    w = torch.randn(7, 3)
    for shape in ((4, 7), (5, 7), (5, 2), (9, 7), (3, 7), (6, 1)):
        x = torch.randn(*shape)
        t = copy(x)
        cols = shape[1]
        torch.testing.assert_close(t.sum(0).cpu(), x.sum(0))
        torch.testing.assert_close(t.mean(0).cpu(), x.mean(0))
        torch.testing.assert_close(t.cumsum(0).cpu(), x.cumsum(0))
        torch.testing.assert_close(t.t().cpu(), x.t())
        if cols == 7:
            torch.testing.assert_close((t @ w.to("tpu")).cpu(), x @ w)


@pytest.mark.parametrize("setting", ["env", "log"])
def test_environment_and_log(setting):
    code = ("import torch, torch_tpu\n"
            "ts = [torch.randn(2, n).to('tpu') for n in (5, 6)]\n"
            "print(torch_tpu.dynamic.padding(ts[1]), torch_tpu.dynamic.config())\n")
    env = dict(os.environ, **({"TORCH_TPU_AUTO_DYNAMIC": "0"} if setting == "env" else {"TORCH_TPU_LOG": "compile"}))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    if setting == "env":
        assert r.stdout.strip() == "None {'automatic': False}"
    else:
        assert r.stdout.strip() == "(1, 6, 16) {'automatic': True}"
        assert ("dimension 1 of the rank-2 f32 tensors copied to tpu:0 at <string>:2 is dynamic from now on "
                "(size 5, then 6)") in r.stderr


def test_generate_over_prompt_lengths_matches_cpu_in_few_programs():
    """Each prompt has its own length and nothing is marked: from the second
    length on, the prompt's copy is padded and the model's ops run per bucket."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                   max_position_embeddings=128, pad_token_id=0, eos_token_id=1,
                                   bos_token_id=2)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).eval()
    tpu_model = transformers.LlamaForCausalLM(cfg).eval()
    tpu_model.load_state_dict(model.state_dict())
    tpu_model.to("tpu")

    def run(m, device, n):
        prompt = torch.randint(3, 128, (1, n), generator=torch.Generator().manual_seed(n))
        with torch.no_grad():
            out = m.generate(prompt.to(device), attention_mask=torch.ones_like(prompt).to(device),
                             max_new_tokens=4, min_new_tokens=4, do_sample=False)
        return out.cpu()

    compiled = []
    for n in range(3, 12):  # bucket 16 from the second length on
        before = torch_tpu.metrics()["graphs_compiled"]
        assert torch.equal(run(tpu_model, "tpu", n), run(model, "cpu", n)), n
        compiled.append(torch_tpu.metrics()["graphs_compiled"] - before)
    # The lengths after the first two reuse their bucket's programs: those of
    # the prompt's pass and the first tokens. (Before, ~50 per new length.)
    assert sum(compiled[3:]) <= 10, compiled


def test_ops_needing_the_exact_size_read_it_exact():
    """A view with literal sizes, nonzero, a Python branch on a value and a
    host copy of an auto-padded tensor: each sees exactly the tensor's values."""
    for n in (6, 10, 12):
        x = torch.arange(2.0 * n).view(2, n) - n
        t = copy(x)
        if n > 6:
            assert padding(t) == (1, n, 16)
        assert torch.equal(t.view(2, 2, n // 2).cpu(), x.view(2, 2, n // 2))
        assert torch.equal(t.reshape(-1).cpu(), x.reshape(-1))
        assert torch.equal(torch.nonzero(t > 0).cpu(), torch.nonzero(x > 0))
        assert bool(t.sum() > 0) == bool(x.sum() > 0)
        assert t.tolist() == x.tolist()
        assert torch.equal(t[:, n // 2:].cpu(), x[:, n // 2:])
