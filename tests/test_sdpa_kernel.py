"""The fused SDPA platform kernel (csrc/kernels/sdpa.cpp: forward and backward handlers
for XLA's CPU plugin) against the CPU in float64 and against the composite lowering it
replaces (TORCH_TPU_KERNELS=composite, in a fresh interpreter): forward and every
gradient, causal, boolean and additive masks (broadcast padding masks included), GQA,
sizes that are no multiple of its 64-row tiles, one query, head dims 8..128, f32, bf16
and f16, dropout (the documented mask, the composite's), in strict, defer_and_fuse and torch.compile(backend="tpu"); the programs hold
the kernel's custom calls (the composite's, none); a Hugging Face tiny Llama trains
through it as on the CPU."""
import math
import os
import tempfile

import pytest
import torch
import torch.nn.functional as F

import torch_tpu
from torch_tpu.kernels import platform as platform_kernels

A = torch.ops.aten
FLOATS = [torch.float32, torch.bfloat16, torch.float16]
# assert_close's float32 default is for one rounding; an attention row sums
# hundreds of products in another order than the float64 reference.
TOL = {torch.float32: dict(rtol=1e-4, atol=1e-4), torch.bfloat16: dict(rtol=3e-2, atol=3e-2),
       torch.float16: dict(rtol=5e-3, atol=5e-3)}

# (B, Hq, Hk, L, S, E, Ev): square, GQA, L and S no multiple of 64 and unequal, one
# query, head dims 8 and 128, Ev != E.
SHAPES = [
    (1, 2, 2, 64, 64, 16, 16),
    (2, 4, 2, 70, 70, 32, 32),
    (1, 6, 2, 33, 130, 8, 8),
    (2, 2, 1, 1, 1, 64, 64),
    (1, 2, 2, 1, 77, 64, 64),
    (1, 2, 1, 129, 65, 128, 128),
    (2, 3, 3, 40, 50, 24, 12),
]


def randn(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


def inputs(shape, dtype, seed=0):
    B, Hq, Hk, L, S, E, Ev = shape
    return (randn(B, Hq, L, E, dtype=dtype, seed=seed), randn(B, Hk, S, E, dtype=dtype, seed=seed + 1),
            randn(B, Hk, S, Ev, dtype=dtype, seed=seed + 2), randn(B, Hq, L, Ev, dtype=dtype, seed=seed + 3))


def make_mask(kind, shape, dtype):
    """None, or a mask of `kind`: bool [L, S], additive [B, Hq, L, S], or a padding
    mask [B, 1, 1, S] (additive, as Hugging Face builds it, finfo.min on padding)."""
    B, Hq, Hk, L, S, E, Ev = shape
    g = torch.Generator().manual_seed(7)
    if kind == "bool":
        m = torch.rand(L, S, generator=g) > 0.3
        m[:, 0] = True
        return m
    if kind == "additive":
        return torch.randn(B, Hq, L, S, generator=g).to(dtype)
    if kind == "padding":
        m = torch.zeros(B, 1, 1, S)
        m[..., S - max(1, S // 4):] = torch.finfo(torch.float32).min
        m[..., 0] = 0
        return m.to(dtype)
    return None


def attend(q, k, v, mask, causal, scale):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=scale,
                                          enable_gqa=q.shape[1] != k.shape[1])


def forward_backward(q, k, v, up, mask, causal, scale, fn=attend):
    leaves = [t.detach().clone().requires_grad_() for t in (q, k, v)]
    out = fn(*leaves, mask, causal, scale)
    out.backward(up)
    return [out.detach()] + [t.grad for t in leaves]


def reference(q, k, v, up, mask, causal, scale):
    """PyTorch's math backend on the CPU in float64."""
    m = mask.double() if mask is not None and mask.is_floating_point() else mask
    return forward_backward(q.double(), k.double(), v.double(), up.double(), m, causal, scale)


def check(got, want, dtype):
    for name, g, w in zip(("out", "dq", "dk", "dv"), got, want):
        torch.testing.assert_close(g.cpu(), w.to(dtype), **TOL[dtype], msg=lambda m: f"{name}: {m}")


def on_tpu(*tensors):
    return [None if t is None else t.to("tpu") for t in tensors]


def test_the_kernel_runs_on_the_cpu_plugin():
    rows = {row["name"]: row for row in platform_kernels.table()}
    for name in ("sdpa_forward", "sdpa_backward"):
        assert rows[name]["platforms"] == ["Host"] and rows[name]["runs"], rows[name]
        assert platform_kernels.target(name) == f"torch_tpu_{name}"


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("kind", ["none", "causal", "bool", "additive", "padding"])
def test_forward_and_gradients_match_float64(shape, kind):
    q, k, v, up = inputs(shape, torch.float32)
    mask, causal = make_mask(kind, shape, torch.float32), kind == "causal"
    want = reference(q, k, v, up, mask, causal, None)
    got = forward_backward(*on_tpu(q, k, v, up, mask), causal, None)
    check(got, want, torch.float32)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("kind", ["causal", "padding"])
def test_dtypes(dtype, kind):
    shape = (2, 4, 2, 70, 70, 32, 32)
    q, k, v, up = inputs(shape, dtype)
    mask, causal = make_mask(kind, shape, dtype), kind == "causal"
    want = reference(q, k, v, up, mask, causal, 0.3)
    got = forward_backward(*on_tpu(q, k, v, up, mask), causal, 0.3)
    assert all(t.dtype == dtype for t in got)
    check(got, want, dtype)


def fused(q, k, v, mask, causal, scale):
    """The fused op itself, which F.scaled_dot_product_attention reaches on tpu with its
    boolean masks turned additive: here a boolean mask reaches the kernel as given."""
    return A._scaled_dot_product_fused_attention_overrideable(q, k, v, mask, 0.0, causal, False, scale=scale)[0]


def test_boolean_mask_of_the_fused_op_and_rows_that_see_nothing():
    shape = (1, 2, 2, 65, 65, 16, 16)
    q, k, v, up = inputs(shape, torch.float32)
    mask = make_mask("bool", shape, torch.float32)
    mask[3] = False  # a row that sees nothing: zero output and gradients, as the CPU's safe softmax
    want = reference(q, k, v, up, mask, False, None)
    assert want[0][:, :, 3].abs().max() == 0
    got = forward_backward(*on_tpu(q, k, v, up, mask), False, None, fn=fused)
    check(got, want, torch.float32)


def test_logsumexp_is_the_rows():
    shape = (1, 2, 2, 70, 70, 16, 16)
    q, k, v, _ = inputs(shape, torch.float32)
    lse = A._scaled_dot_product_fused_attention_overrideable(*on_tpu(q, k, v), None, 0.0, True, False)[1]
    s = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(16)
    s = s.masked_fill(torch.ones(70, 70, dtype=torch.bool).triu(1), -math.inf)
    torch.testing.assert_close(lse.cpu().double(), torch.logsumexp(s, -1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["defer_and_fuse", "compile"])
@pytest.mark.parametrize("kind", ["causal", "padding"])
def test_defer_and_fuse_and_compile(mode, kind):
    shape = (2, 4, 2, 70, 70, 32, 32)
    q, k, v, up = inputs(shape, torch.float32)
    mask, causal = make_mask(kind, shape, torch.float32), kind == "causal"
    want = reference(q, k, v, up, mask, causal, None)
    tq, tk, tv, tup, tm = on_tpu(q, k, v, up, mask)
    if mode == "compile":
        torch._dynamo.reset()
        step = torch.compile(lambda a, b, c, m: attend(a, b, c, m, causal, None), backend="tpu")
        got = forward_backward(tq, tk, tv, tup, tm, causal, None, fn=lambda a, b, c, m, *_: step(a, b, c, m))
    else:
        with torch_tpu.eager_mode("defer_and_fuse"):
            got = forward_backward(tq, tk, tv, tup, tm, causal, None)
    check(got, want, torch.float32)


def dropout_keep(seed, offset, p, shape):
    """The documented dropout mask (lowering/attention.cpp's keep_mask), drawn in numpy:
    splitmix64 of key + (index + 1) * gamma over each score's flat index, key =
    mix(seed ^ mix(offset)); kept where the top 24 bits as a fraction are >= p."""
    import numpy as np

    def mix(z):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))

    word = lambda t: np.array([int(t)], dtype=np.int64).view(np.uint64)
    key = mix(word(seed) ^ mix(word(offset)))
    index = np.arange(math.prod(shape), dtype=np.uint64)
    u = (mix(key + (index + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(40)).astype(np.float32)
    return torch.from_numpy(u * np.float32(2.0 ** -24) >= np.float32(p)).reshape(shape)


def dropped_attention(q, k, v, keep, p, causal):
    """Attention with a given dropout mask, by hand: softmax, kept entries / (1 - p), times v."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), -math.inf)
    return (torch.softmax(s, -1) * keep / (1 - p)) @ v


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [SHAPES[1], SHAPES[2]])
def test_dropout_draws_the_documented_mask_in_the_kernel(shape, causal):
    """With dropout_p > 0 the kernel runs too: its forward and every gradient equal, in
    float64 on the CPU, attention with the mask drawn from the op's (philox_seed,
    philox_offset) as documented -- the mask the composite draws."""
    p = 0.3
    q, k, v, up = inputs(shape, torch.float32)
    torch.tpu.manual_seed(5)
    res = A._scaled_dot_product_fused_attention_overrideable(*on_tpu(q, k, v), None, p, causal, False)
    seed, offset = res[6].cpu().item(), res[7].cpu().item()
    torch.tpu.manual_seed(5)  # the same draw again, through F.scaled_dot_product_attention's autograd
    got = forward_backward(*on_tpu(q, k, v, up), None, causal, None,
                           fn=lambda a, b, c, m, cz, sc: F.scaled_dot_product_attention(
                               a, b, c, dropout_p=p, is_causal=cz, enable_gqa=a.shape[1] != b.shape[1]))
    torch.testing.assert_close(got[0].cpu(), res[0].cpu())
    B, Hq, Hk, L, S, E, Ev = shape
    keep = dropout_keep(seed, offset, p, (B, Hq, L, S))
    assert 0.6 < keep.float().mean() < 0.8
    want = forward_backward(q.double(), k.double(), v.double(), up.double(), None, causal, None,
                            fn=lambda a, b, c, *_: dropped_attention(a, b, c, keep, p, causal))
    check(got, want, torch.float32)


def test_dropout_one_gives_zeros_and_the_mask_changes_with_the_seed():
    q, k, v, up = inputs(SHAPES[1], torch.float32)
    out = F.scaled_dot_product_attention(*on_tpu(q, k, v), dropout_p=1.0, enable_gqa=True)
    assert out.cpu().abs().max() == 0
    draws = []
    for seed in (0, 1):
        torch.tpu.manual_seed(seed)
        draws.append(F.scaled_dot_product_attention(*on_tpu(q, k, v), dropout_p=0.5, enable_gqa=True).cpu())
    assert not torch.allclose(draws[0], draws[1], atol=1e-3)
    assert not torch.allclose(draws[0], F.scaled_dot_product_attention(q, k, v, enable_gqa=True), atol=1e-3)


SUBPROCESS = """
import sys, torch, torch.nn.functional as F, torch_tpu
sys.path.insert(0, {tests!r})
from test_sdpa_kernel import SHAPES, forward_backward, inputs, make_mask, on_tpu
results = {{}}
for i, shape in enumerate(SHAPES[:3]):
    for kind in ("causal", "padding"):
        q, k, v, up = inputs(shape, torch.float32)
        got = forward_backward(*on_tpu(q, k, v, up, make_mask(kind, shape, torch.float32)), kind == "causal", None)
        results[(i, kind)] = [t.cpu() for t in got]
torch.save(results, {path!r})
print("ok")
"""


def run_cases(run_python, **env):
    """SHAPES[:3] x (causal, padding) in a fresh interpreter with the programs printed:
    the results and how many forward and backward kernel calls the programs hold."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "results.pt")
        code = SUBPROCESS.format(tests=os.path.dirname(os.path.abspath(__file__)), path=path)
        r = run_python(code, timeout=600, TORCH_TPU_DUMP_HLO="1", TORCH_TPU_CACHE_DIR=None, **env)
        assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-4000:]
        calls = tuple(r.stderr.count(f'call_target_name = "torch_tpu_sdpa_{p}"') for p in ("forward", "backward"))
        return torch.load(path), calls


def test_kernel_equals_composite_and_composite_emits_no_kernel(run_python):
    kernel, kernel_calls = run_cases(run_python)
    composite, composite_calls = run_cases(run_python, TORCH_TPU_KERNELS="composite")
    assert kernel_calls == (6, 6) and composite_calls == (0, 0)
    for key, got in kernel.items():
        i, kind = key
        q, k, v, up = inputs(SHAPES[i], torch.float32)
        want = reference(q, k, v, up, make_mask(kind, SHAPES[i], torch.float32), kind == "causal", None)
        check(got, want, torch.float32)
        check(composite[key], want, torch.float32)
        check(got, composite[key], torch.float32)


DROPOUT_SUBPROCESS = """
import sys, torch, torch_tpu
sys.path.insert(0, {tests!r})
from test_sdpa_kernel import SHAPES, dropout_results
torch.save(dropout_results(), {path!r})
print("ok")
"""


def dropout_results():
    """SHAPES[1], causal and not, dropout 0.3 from seed 5: output and gradients."""
    q, k, v, up = inputs(SHAPES[1], torch.float32)
    results = {}
    for causal in (False, True):
        torch.tpu.manual_seed(5)
        results[causal] = [t.cpu() for t in forward_backward(
            *on_tpu(q, k, v, up), None, causal, None,
            fn=lambda a, b, c, m, cz, sc: F.scaled_dot_product_attention(a, b, c, dropout_p=0.3, is_causal=cz,
                                                                         enable_gqa=True))]
    return results


def test_dropout_kernel_equals_composite(run_python):
    """The composite (TORCH_TPU_KERNELS=composite, a fresh interpreter) draws the same mask."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "results.pt")
        code = DROPOUT_SUBPROCESS.format(tests=os.path.dirname(os.path.abspath(__file__)), path=path)
        r = run_python(code, timeout=600, TORCH_TPU_KERNELS="composite", TORCH_TPU_CACHE_DIR=None)
        assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-4000:]
        composite = torch.load(path)
    for causal, got in dropout_results().items():
        check(got, composite[causal], torch.float32)


@pytest.mark.parametrize("bad, match", [("mask", "the mask does not broadcast"),
                                        ("dropout", "a dropout probability in \\[0, 1\\]")])
def test_a_failing_handler_raises_naming_the_op(bad, match):
    """Operands the handler refuses (a mask that broadcasts to nothing, a dropout
    probability past 1) fail the op with the handler's message, and the process goes on."""
    import numpy as np
    from torch_tpu.kernels.ffi import ffi_op
    op = ffi_op(f"test_sdpa_kernel::forward_{bad}", platform_kernels.target("sdpa_forward"),
                lambda q, k, v, m, key: [(torch.float32, q[1]), (torch.float32, q[1][:3])],
                attributes={"scale": np.float32(0.25), "causal": False,
                            "dropout": np.float32(1.5 if bad == "dropout" else 0.0), "rescale": np.float32(1.0)},
                nargs=5)
    q = torch.randn(1, 2, 8, 16).to("tpu")
    mask = torch.zeros(1, 1, 3, 5) if bad == "mask" else torch.zeros(0, 0, 0, 0)
    key = torch.zeros((), dtype=torch.uint64)
    with pytest.raises(RuntimeError, match="sdpa_forward: .*" + match):
        op(q, q, q, mask.to("tpu"), key.to("tpu"))[0].cpu()
    assert (torch.ones(2).to("tpu") + 1).cpu().tolist() == [2.0, 2.0]


def test_hf_tiny_llama_trains_through_the_kernel_as_on_the_cpu():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                                   attn_implementation="sdpa")
    model = transformers.LlamaForCausalLM(cfg)
    ids = torch.randint(0, 128, (2, 80))
    attention = torch.ones(2, 80, dtype=torch.long)
    attention[1, :13] = 0  # left padding
    cpu = model.double()
    loss_cpu = cpu(input_ids=ids, attention_mask=attention, labels=ids).loss
    loss_cpu.backward()
    grads_cpu = {n: p.grad.clone() for n, p in cpu.named_parameters()}
    cpu.zero_grad()
    tpu = model.float().to("tpu")
    loss = tpu(input_ids=ids.to("tpu"), attention_mask=attention.to("tpu"), labels=ids.to("tpu")).loss
    loss.backward()
    torch.testing.assert_close(loss.cpu().double(), loss_cpu.detach().double(), rtol=1e-4, atol=1e-4)
    for n, p in tpu.named_parameters():
        torch.testing.assert_close(p.grad.cpu().double(), grads_cpu[n], rtol=1e-3, atol=1e-4, msg=lambda m: f"{n}: {m}")


def test_defer_and_fuse_and_compile_programs_hold_the_kernel(run_python):
    code = """
import torch, torch.nn.functional as F, torch_tpu
q, k, v = (torch.randn(1, 2, 70, 16, device="tpu", requires_grad=True) for _ in range(3))
with torch_tpu.eager_mode("defer_and_fuse"):
    F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
    q.grad.cpu()
f = torch.compile(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True), backend="tpu")
f(q, k, v).sum().backward()
print(q.grad.cpu().sum(), "ok")
"""
    r = run_python(code, timeout=600, TORCH_TPU_DUMP_HLO="1", TORCH_TPU_CACHE_DIR=None)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-4000:]
    assert [r.stderr.count(f'call_target_name = "torch_tpu_sdpa_{p}"') for p in ("forward", "backward")] == [2, 2]


@pytest.mark.parametrize("mask_shape", [(2, 1, 1, 5, 6), (1, 3, 2, 1, 6), (3, 1, 1, 6), (6,)])
def test_masks_broadcast_over_some_batch_dims(mask_shape):
    """Two batch dims, flattened into one for the kernel: a mask that broadcasts over
    some of them is widened to all of them, one over the rest stays in place."""
    q, k, v = randn(2, 3, 2, 5, 8), randn(2, 3, 2, 6, 8, seed=1), randn(2, 3, 2, 6, 8, seed=2)
    up = randn(2, 3, 2, 5, 8, seed=3)
    mask = randn(*mask_shape, seed=4)
    want = reference(q, k, v, up, mask, False, None)
    got = forward_backward(*on_tpu(q, k, v, up, mask), False, None)
    check(got, want, torch.float32)
