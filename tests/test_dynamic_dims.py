"""Dynamic dimensions (runtime/dynamic_dims.h): tensors padded along one
dimension to a bucket run one program per bucket instead of one per size, and
every result equals the CPU's (within the tolerance table) whatever way an op
reads them: whole under a rule of lowering/padded.cpp, as a box, or exact."""
import warnings

import pytest
import torch

import torch_tpu
from torch_tpu.dynamic import padding

SIZES = (9, 13, 20, 31, 33)  # buckets 16, 16, 32, 32, 64
every_mode = pytest.mark.parametrize("eager", ["strict", "debug", "defer_and_fuse"], indirect=True)


def compiled():
    return torch_tpu.metrics()["graphs_compiled"]


def dyn(x, dim=0):
    return torch_tpu.dynamic_dims(x.to("tpu"), dim)


def close(tpu, cpu):
    tpu = tpu.cpu()
    assert tpu.shape == cpu.shape and tpu.dtype == cpu.dtype
    rtol, atol = torch_tpu.tolerance(cpu.dtype)
    torch.testing.assert_close(tpu, cpu, rtol=rtol, atol=atol, equal_nan=True)


@every_mode
def test_marking_pads_to_the_bucket_above_the_size(eager):
    for n, bound in ((1, 16), (15, 16), (16, 32), (100, 128)):
        x = torch.randn(3, n)
        t = dyn(x, 1)
        assert padding(t) == (1, n, bound)
        assert t.shape == x.shape and t.is_contiguous()
        assert torch.equal(t.cpu(), x)


# One op and its CPU twin, on inputs with a padded first dimension.
OPS = {
    "add_bias": lambda x: x + torch.arange(8.0, device=x.device),
    "where": lambda x: torch.where(x > 0, x, x * 0.5),
    "sum_over": lambda x: x.sum(0),
    "sum_across": lambda x: x.sum(1),
    "amax_over": lambda x: x.amax(0),
    "amin_over": lambda x: x.amin(0),
    "any_over": lambda x: (x > 1.5).any(0),
    "all_over": lambda x: (x > -1.5).all(0),
    "softmax_over": lambda x: x.softmax(0),
    "log_softmax_over": lambda x: x.log_softmax(0),
    "softmax_across": lambda x: x.softmax(1),
    "mm_rows": lambda x: x @ torch.linspace(-1, 1, 64, device=x.device).reshape(8, 8),
    "addmm_rows": lambda x: torch.addmm(torch.ones(8, device=x.device), x,
                                        torch.linspace(-1, 1, 64, device=x.device).reshape(8, 8)),
    "cat_self": lambda x: torch.cat([x, x.exp()], 0),
    "last_row": lambda x: x[-1:] * 2,
    "last_rows_box": lambda x: x[-3:, 2:5].clone(),
    "cumsum_over": lambda x: x.cumsum(0),
    "mean_across": lambda x: x.mean(1, keepdim=True),
    "transpose_view": lambda x: x.t().contiguous(),
    "split_transpose_view": lambda x: (x.view(-1, 2, 4).transpose(0, 1) * 2).sum(2),
    "rotate_half": lambda x: torch.cat((-x[:, 4:], x[:, :4]), 1),
    "to_double": lambda x: x.double() * 3,
    "to_long": lambda x: (x * 4).long(),
    "mm_cols": lambda x: torch.linspace(-1, 1, 24, device=x.device).reshape(3, 8) @ x.t(),
    "mm_contract": lambda x: x.t() @ x.exp(),
    "bmm_rows": lambda x: torch.bmm(x.view(-1, 2, 4).transpose(0, 1),
                                    torch.linspace(-1, 1, 24, device=x.device).reshape(2, 4, 3)),
    "bmm_contract": lambda x: torch.bmm(x.view(-1, 2, 4).permute(1, 2, 0), x.view(-1, 2, 4).transpose(0, 1)),
    "embedding": lambda x: torch.nn.functional.embedding(
        (x * 10).long().abs() % 5, torch.linspace(-1, 1, 15, device=x.device).reshape(5, 3)),
    # No rule: read exact (one program per size), still right.
    "mean_over": lambda x: x.mean(0),
    "flatten_view": lambda x: x.view(-1) + 1,
    "cumsum_across": lambda x: x.cumsum(1),
}


@every_mode
@pytest.mark.parametrize("name", sorted(OPS))
def test_op_on_padded_input_matches_cpu(eager, name):
    f = OPS[name]
    for n in SIZES:
        x = torch.randn(n, 8, generator=torch.Generator().manual_seed(n))
        close(f(dyn(x)), f(x))


@every_mode
def test_results_of_ruled_ops_stay_padded(eager):
    x = torch.randn(20, 8)
    t = dyn(x)
    assert padding(t.tanh()) == (0, 20, 32)
    assert padding(t @ torch.randn(8, 3, device="tpu")) == (0, 20, 32)
    assert padding(torch.cat([t, t], 0)) == (0, 40, 64)
    assert padding(t.sum(0)) is None
    # Views that walk the padded dimension whole read the padded buffer.
    assert padding(t.view(20, 2, 4).transpose(0, 1) * 1) == (1, 20, 32)
    assert padding(t.t().contiguous()) == (1, 20, 32)
    assert padding(t[:, 2:6].exp()) == (0, 20, 32)
    assert padding(t.double()) == (0, 20, 32)
    assert padding(t.t() @ t) is None  # the padded contraction sums to a static result


def test_size_loop_compiles_one_program_per_op_and_bucket():
    """The loop of benchmarks/first_step.py: 12 sizes over 3 buckets."""
    w, b = torch.randn(64, 64), torch.randn(64)

    def f(x, w, b):
        return (torch.tanh(x @ w + b) * 0.5).softmax(-1).sum(0)

    wt, bt = w.to("tpu"), b.to("tpu")
    xs = [torch.randn(8 + 3 * i, 64) for i in range(12)]  # 8..41: buckets 16, 32, 64
    ts = [dyn(x) for x in xs]
    torch_tpu.flush()
    before = compiled()
    for x, t in zip(xs, ts):
        close(f(t, wt, bt), f(x, w, b))
    # 6 ops x 3 buckets at most (fewer when the cache already holds some).
    assert compiled() - before <= 18


@every_mode
def test_growing_cat_pads_itself_and_compiles_per_bucket(eager):
    """A tensor grown by cat (a KV cache) needs no marking: from its second
    size on, the cat's result is padded, and a bucket serves every size."""
    step = torch.randn(2, 1, 4)
    cpu = torch.randn(2, 3, 4)
    t = cpu.to("tpu")
    before = compiled()
    for i in range(40):
        cpu = torch.cat([cpu, step * i], 1)
        t = torch.cat([t, step.to("tpu") * i], 1)
        close(t.softmax(1).sum(-1), cpu.softmax(1).sum(-1))
    assert padding(t) == (1, 43, 64)
    assert torch.equal(t.cpu(), cpu)
    # Per bucket (16, 32, 64) a few cats, muls and the softmax+sum: far fewer
    # than one per size (40 sizes x 4 ops).
    assert compiled() - before < 60


def ahead():
    return torch_tpu.metrics()["graphs_compiled_ahead"]


def test_growing_tensor_compiles_its_next_bucket_ahead():
    """Strict mode compiles a growing tensor's next-bucket programs in the
    background once it is in the last quarter of its bucket: the cat that
    crosses into bucket 32 and the first one in it then miss no program."""
    step = torch.randn(3, 1, 7)  # shapes of its own: no program of it is cached yet
    cpu = torch.randn(3, 3, 7)
    t, s = cpu.to("tpu"), step.to("tpu")
    started = ahead()
    for _ in range(12):  # sizes 4..15; bucket 16's last quarter from 12 on
        cpu, t = torch.cat([cpu, step], 1), torch.cat([t, s], 1)
    assert padding(t) == (1, 15, 16)
    assert ahead() - started == 2  # the crossing cat and the next bucket's
    misses = torch_tpu.metrics()["cache_misses"]
    for _ in range(3):  # 16..18
        cpu, t = torch.cat([cpu, step], 1), torch.cat([t, s], 1)
    assert padding(t) == (1, 18, 32)
    assert torch_tpu.metrics()["cache_misses"] == misses
    assert torch.equal(t.cpu(), cpu)


def test_padded_tensor_that_keeps_its_size_compiles_nothing_ahead():
    x = torch.randn(15, 9)  # one short of its bucket's end, but not growing
    t = dyn(x)
    started = ahead()
    for _ in range(3):
        close(t.tanh(), x.tanh())
    assert ahead() == started


@every_mode
def test_in_place_writes_and_copies_of_a_padded_tensor(eager):
    x = torch.randn(20, 8)
    t = dyn(x)
    alias = t[2:5]
    t.add_(1)
    x.add_(1)
    close(t, x)
    close(alias, x[2:5])
    t[0] = 7.0
    x[0] = 7.0
    close(t, x)
    u = torch.empty(20, 8, device="tpu")
    u.copy_(dyn(x))
    close(u, x)
    close(dyn(x).to(torch.float64), x.double())
    assert dyn(x)[3, 4].item() == x[3, 4].item()


@every_mode
def test_attention_with_padded_keys_matches_cpu(eager):
    q = torch.randn(1, 4, 1, 16)
    for n in (9, 17, 30):
        k, v = torch.randn(1, 4, n, 16), torch.randn(1, 4, n, 16)
        out = torch.nn.functional.scaled_dot_product_attention(q.to("tpu"), dyn(k, 2), dyn(v, 2))
        close(out, torch.nn.functional.scaled_dot_product_attention(q, k, v))


@every_mode
@pytest.mark.parametrize("causal", [False, True])
def test_attention_with_padded_queries_matches_cpu(eager, causal):
    """Prefill: queries, keys and values padded alike along the sequence
    (causal: no valid query reaches a padded key), and queries padded alone."""
    for n in (9, 17, 30):
        q, k, v = (torch.randn(1, 4, n, 16, generator=torch.Generator().manual_seed(n + i)) for i in range(3))
        sdpa = torch.nn.functional.scaled_dot_product_attention
        out = sdpa(dyn(q, 2), dyn(k, 2), dyn(v, 2), is_causal=causal)
        assert padding(out) == (2, n, torch_tpu.dynamic.padding(dyn(q, 2))[2])
        close(out, sdpa(q, k, v, is_causal=causal))
        if not causal:
            close(sdpa(dyn(q, 2), k.to("tpu"), v.to("tpu")), sdpa(q, k, v))


def test_compile_reads_padded_inputs_exact():
    """A capture bakes its numbers: padded sizes must never be among them, so
    a compiled function called with padded tensors of several sizes gives the
    CPU's result every time."""
    w = torch.randn(8, 8)
    f = torch.compile(lambda x, w: torch.cat([x, x * 2], 0).tanh().sum(0) @ w, backend="tpu")
    for n in (9, 10, 12):
        x = torch.randn(n, 8)
        close(f(dyn(x), w.to("tpu")), torch.cat([x, x * 2], 0).tanh().sum(0) @ w)


def test_generate_with_the_dynamic_cache_matches_cpu_in_few_programs():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                   max_position_embeddings=128, pad_token_id=0, eos_token_id=1,
                                   bos_token_id=2)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).eval()
    prompt = torch.randint(3, 128, (1, 5), generator=torch.Generator().manual_seed(1))

    def run(device, tokens):
        m = model.to(device)
        with torch.no_grad():
            out = m.generate(prompt.to(device), attention_mask=torch.ones_like(prompt).to(device),
                             max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False)
        return out.cpu()

    ref = run("cpu", 30)
    before = compiled()
    assert torch.equal(run("tpu", 30), ref)
    first = compiled() - before
    # The cats are known to grow from the first step now: a few programs more.
    assert torch.equal(run("tpu", 30), ref)
    before = compiled()
    assert torch.equal(run("tpu", 30), ref)
    assert compiled() == before  # every program cached
    # Tokens 5..35 cross buckets 16 and 32: per bucket a few programs, not 8 per token.
    assert first < 8 * 30


def test_bad_arguments():
    t = torch.randn(4, 5, device="tpu")
    with pytest.raises(TypeError, match="tpu tensor"):
        torch_tpu.dynamic_dims(torch.randn(3), 0)
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch_tpu.dynamic_dims(t, 2)
    with pytest.raises(IndexError, match="0-dim"):
        torch_tpu.dynamic_dims(torch.tensor(1.0, device="tpu"), 0)
    with pytest.raises(NotImplementedError, match="one dynamic dimension"):
        torch_tpu.dynamic_dims(t, [0, 1])
    with pytest.raises(TypeError, match="an int"):
        torch_tpu.dynamic_dims(t, 0.5)
    with pytest.raises(ValueError, match="positive int"):
        torch_tpu.dynamic_dims(t, {0: 0})
    assert padding(torch_tpu.dynamic_dims(t, -1)) == (1, 5, 16)


def test_size_above_its_bound_stays_static_with_one_warning():
    t = torch.randn(40, 3, device="tpu")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        same = torch_tpu.dynamic_dims(t, {0: 32})
        torch_tpu.dynamic_dims(t, {0: 32})
    assert same is t and padding(same) is None
    assert len([w for w in seen if "above its bound 32" in str(w.message)]) == 1
    assert padding(torch_tpu.dynamic_dims(t, {0: 64})) == (0, 40, 64)
