"""Written-out attention becomes `scaled_dot_product_attention` in Dynamo's graphs.

Models that spell attention out (`softmax(q @ k.transpose(-2, -1) / c + mask) @ v`)
would run it as a score tensor of L x S per head, its softmax's reductions and
elementwise passes, and a second product; Inductor rewrites such graphs into its
CPU flash-attention kernel (torch/_inductor/fx_passes/fuse_attention.py). This
pass does the same on the graph Dynamo hands the `tpu` backend, before
AOTAutograd: AOTAutograd then traces SDPA as it traces a model that calls it,
so the forward and the backward both run the fused SDPA kernel
(csrc/kernels/sdpa.cpp) through the ops `aten::_scaled_dot_product_*` lower to.

The chain matched, each intermediate used only by the next (a score or a
probability that the model reads elsewhere keeps the chain written out):

    s = q @ k.transpose(-2, -1)         `@`, torch.matmul, .matmul; either order of dims
    s = s * c  |  s / c  |  c * s       c a Python number (no scale: 1)
    s = s + mask  |  s.masked_fill(cond, -inf)    or no mask
    p = s.softmax(-1)                   the method, torch.softmax, F.softmax; no dtype change
    p = p.to(p.dtype); p = F.dropout(p, p=0.0 or training=False)    optional, as Hugging Face's
    out = p @ v                                                       eager attention writes them

q, k and v of one float dtype and rank (>= 3), with equal batch and head dims,
and at least MIN_KEYS keys (below, the written-out graph is as fast).
Active dropout between the softmax and the product is not matched (the
kernel draws its own mask, so the values would differ from the written-out
graph's draw).

A mask is rewritten only when it is causal (query i sees keys 0..i), into
`is_causal=True`: then every row sees a key and the fused softmax equals the
written-out one everywhere (over a row that sees nothing SDPA gives 0 where
the written-out softmax gives NaN; such masks stay written out). A mask is
a value: usually a module buffer, i.e. a graph input. Its value is read once
per input tensor (the first call that passes it) and trusted while that
tensor keeps its identity and version counter (an in-place write bumps it);
a call whose mask is then not causal runs the graph as written, compiled
when first needed. A mask that needs a gradient is never rewritten (the
fused op gives none). Graphs with symbolic sizes are left as they are.
"""
from __future__ import annotations

import copy
import math
import operator
import weakref

import torch
import torch.nn.functional as F
from torch.fx.node import map_arg

from .. import _C
from ..kernels import platform

_MATMUL = ((operator.matmul, torch.matmul), ("matmul",))
_TRANSPOSE = ((torch.transpose,), ("transpose",))
_MUL = ((operator.mul, torch.mul), ("mul",))
_DIV = ((operator.truediv, torch.div), ("div",))
_ADD = ((operator.add, torch.add), ("add",))
_MASKED_FILL = ((torch.masked_fill,), ("masked_fill",))
_SOFTMAX = ((torch.softmax, F.softmax), ("softmax",))
_FLOATS = (torch.float32, torch.bfloat16, torch.float16)
_MAX_READS = 8  # of mask values by one graph


# Keys per query row from which the rewrite is made: below, the written-out
# graph (its products on the GEMM kernel, its softmax fused by XLA) beats the
# SDPA kernel's tiles or ties with them. On a CPU without AVX-512,
# `python3 benchmarks/compile.py --attention 128,256,512` (causal forward and
# backward, 32 heads of 64; load 10-18, 2026-12-06) gave the fused form
# 0.97-2.01x the written-out form's time at 128 keys (four runs), 0.64-1.08x at
# 256, 0.75x at 512. On an AMD Zen 5 (AVX-512, 2026-12-07, load 3.4-4.6) the
# same sweep gave 0.73-1.02x at 128 (five runs), and the GPT training step of
# `benchmarks/compile.py --sizes issue` (128 keys) ran 1.04-1.14x the speed
# fused (four pairs of processes, the same loss).
MIN_KEYS = 128 if _C._host_cpu()["avx512f"] else 256


def _is(node, kinds) -> bool:
    functions, methods = kinds
    if not isinstance(node, torch.fx.Node):
        return False
    return ((node.op == "call_function" and node.target in functions)
            or (node.op == "call_method" and node.target in methods))


def _val(node):
    return node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None


def _only_user(node, user) -> bool:
    return isinstance(node, torch.fx.Node) and list(node.users) == [user]


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x != 0


class Match:
    """One written-out attention: its operands, scale, mask and the nodes it replaces."""

    def __init__(self, out, q, k, v, scale, mask, mask_kind, chain):
        self.out, self.q, self.k, self.v = out, q, k, v
        self.scale, self.mask, self.mask_kind = scale, mask, mask_kind  # kind: None, "add", "fill"
        self.chain = chain  # the replaced nodes, last first


def _softmax_input(p):
    """The softmax's input when `p` is a softmax over the last dim with no dtype change."""
    if not _is(p, _SOFTMAX) or not p.args:
        return None
    s = p.args[0]
    dim = p.kwargs.get("dim", p.args[1] if len(p.args) > 1 else None)
    dtype_at = 3 if p.target is F.softmax else 2
    dtype = p.kwargs.get("dtype", p.args[dtype_at] if len(p.args) > dtype_at else None)
    val = _val(s)
    if val is None or not isinstance(dim, int) or dim not in (-1, val.dim() - 1):
        return None
    return s if dtype in (None, val.dtype) else None


def _identity_input(node):
    """x when `node` returns x unchanged: x.to(its own dtype), or dropout
    with p = 0 or training=False (Hugging Face's eager attention in eval)."""
    if not isinstance(node, torch.fx.Node) or not node.args:
        return None
    x, val = node.args[0], _val(node.args[0])
    if not isinstance(val, torch.Tensor):
        return None
    if node.op == "call_method" and node.target == "to" and not node.kwargs and len(node.args) == 2:
        return x if node.args[1] == val.dtype else None
    if node.op == "call_function" and node.target is F.dropout and len(node.args) == 1:
        p, training = node.kwargs.get("p", 0.5), node.kwargs.get("training", True)
        inplace = node.kwargs.get("inplace", False)
        return x if (p == 0 or training is False) and not inplace else None
    return None


def _split_mask(s, chain):
    """(scores before the mask, mask node, kind) or None for a form not matched."""
    if _is(s, _ADD) and len(s.args) == 2 and not s.kwargs:
        a, b = s.args
        # The scores are the operand that comes from a product or a scale.
        if _is(a, _MATMUL) or _is(a, _MUL) or _is(a, _DIV):
            scores, mask = a, b
        else:
            scores, mask = b, a
        if not isinstance(mask, torch.fx.Node) or not isinstance(_val(mask), torch.Tensor):
            return None
        chain.append(s)
        return scores, mask, "add"
    if _is(s, _MASKED_FILL) and len(s.args) == 3 and not s.kwargs:
        scores, cond, value = s.args
        if not (isinstance(value, float) and value == -math.inf):
            return None
        cond_val = _val(cond)
        if not isinstance(cond_val, torch.Tensor) or cond_val.dtype != torch.bool:
            return None
        chain.append(s)
        return scores, cond, "fill"
    return s, None, None


def _split_scale(s, chain):
    """(the product, scale) or None."""
    if _is(s, _DIV) and len(s.args) == 2 and not s.kwargs and _number(s.args[1]):
        chain.append(s)
        return s.args[0], 1.0 / s.args[1]
    if _is(s, _MUL) and len(s.args) == 2 and not s.kwargs:
        a, b = s.args
        if _number(b) or _number(a):
            chain.append(s)
            return (a, float(b)) if _number(b) else (b, float(a))
    return s, 1.0


def _transposed_key(kt):
    """k when `kt` is k with its last two dims swapped."""
    if not _is(kt, _TRANSPOSE) or len(kt.args) != 3 or kt.kwargs:
        return None
    k, d0, d1 = kt.args
    val = _val(k)
    if val is None or not isinstance(d0, int) or not isinstance(d1, int):
        return None
    r = val.dim()
    return k if {d0 % r, d1 % r} == {r - 2, r - 1} else None


def _fits(q, k, v) -> bool:
    """q [..., L, E], k [..., S, E], v [..., S, Ev]: one float dtype, tpu, same leading dims, static
    sizes, S >= MIN_KEYS."""
    vals = [_val(x) for x in (q, k, v)]
    if not all(isinstance(t, torch.Tensor) for t in vals):
        return False
    qv, kv, vv = vals
    if qv.dim() < 3 or not (qv.dim() == kv.dim() == vv.dim()):
        return False
    if qv.dtype not in _FLOATS or not (qv.dtype == kv.dtype == vv.dtype):
        return False
    if any(t.device.type != "tpu" for t in vals):
        return False
    if any(not isinstance(d, int) for t in vals for d in t.shape):
        return False
    return (qv.shape[:-2] == kv.shape[:-2] == vv.shape[:-2] and qv.shape[-1] == kv.shape[-1]
            and kv.shape[-2] == vv.shape[-2] and kv.shape[-2] >= MIN_KEYS)


def match(out) -> Match | None:
    """The written-out attention ending at `out` (the product with v), or None."""
    if not _is(out, _MATMUL) or len(out.args) != 2 or out.kwargs:
        return None
    p, v = out.args
    if not _only_user(p, out):
        return None
    chain = [out]
    while _identity_input(p) is not None:  # Hugging Face's .to(dtype) and inactive dropout
        chain.append(p)
        p = _identity_input(p)
        if not _only_user(p, chain[-1]):
            return None
    chain.append(p)
    s = _softmax_input(p)
    if s is None or not _only_user(s, p):
        return None
    split = _split_mask(s, chain)
    if split is None:
        return None
    s, mask, kind = split
    if not _only_user(s, chain[-1]):
        return None
    s, scale = _split_scale(s, chain)
    if not _is(s, _MATMUL) or len(s.args) != 2 or s.kwargs or not _only_user(s, chain[-1]):
        return None
    chain.append(s)
    q, kt = s.args
    k = _transposed_key(kt)
    if k is None or not _only_user(kt, s):
        return None
    chain.append(kt)
    if not _fits(q, k, v):
        return None
    if mask is not None:
        mv = _val(mask)
        if mv.requires_grad or mv.device.type != "tpu" or mv.dim() < 2:
            return None
        if kind == "add" and mv.dtype != _val(q).dtype:
            return None
        if any(not isinstance(d, int) for d in mv.shape):
            return None
    return Match(out, q, k, v, scale, mask, kind, chain)


# ---------------------------------------------------------------- masks

def _mask_inputs(gm, mask):
    """The placeholders a mask is computed from (their indices), or None when
    the mask is not a pure function of inputs and constants."""
    placeholders = {n: i for i, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder")}
    found, seen, todo = set(), set(), [mask]
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        if node.op == "placeholder":
            if not isinstance(_val(node), torch.Tensor):
                return None
            found.add(placeholders[node])
        elif node.op in ("call_function", "call_method"):
            if isinstance(node.target, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in node.target.tags:
                return None
            todo.extend(node.all_input_nodes)
        elif node.op != "get_attr":
            return None
    return sorted(found)


def _evaluate(gm, node, args, memo):
    """The value of `node` computed from the graph's real inputs `args`."""
    if node in memo:
        return memo[node]
    if node.op == "placeholder":
        index = [n for n in gm.graph.nodes if n.op == "placeholder"].index(node)
        value = args[index]
    elif node.op == "get_attr":
        value = gm
        for part in node.target.split("."):
            value = getattr(value, part)
    else:
        fetch = lambda n: _evaluate(gm, n, args, memo)  # noqa: E731
        a, kw = map_arg(node.args, fetch), map_arg(node.kwargs, fetch)
        value = node.target(*a, **kw) if node.op == "call_function" else getattr(a[0], node.target)(*a[1:], **kw)
    memo[node] = value
    return value


def is_causal(value, kind, rows, cols) -> bool:
    """Whether a mask of `kind` ("add": 0 / -inf added to the scores; "fill":
    True where the score is replaced by -inf) lets query i see exactly keys
    0..i, over every leading index it broadcasts to."""
    if value.dim() < 2 or tuple(value.shape[-2:]) != (rows, cols):
        return False
    value = value.detach().cpu()
    above = torch.ones(rows, cols, dtype=torch.bool).triu(1)
    if kind == "fill":
        expected = above
    else:
        expected = torch.zeros(rows, cols, dtype=value.dtype).masked_fill(above, -math.inf)
    return bool(torch.equal(value, expected.expand_as(value)))


# ---------------------------------------------------------------- the pass

def _rewrite(gm, m: Match) -> None:
    graph = gm.graph
    qv = _val(m.q)
    kwargs = {"is_causal": m.mask is not None}
    if m.scale != 1.0 / math.sqrt(qv.shape[-1]):
        kwargs["scale"] = m.scale
    with graph.inserting_before(m.out):
        fused = graph.call_function(F.scaled_dot_product_attention, (m.q, m.k, m.v), kwargs)
    fused.meta.update(m.out.meta)
    m.out.replace_all_uses_with(fused)
    for node in m.chain:  # last first: each has no user left
        graph.erase_node(node)


def _masks_are_causal(gm, matches, args) -> bool:
    memo = {}
    with torch.no_grad():
        return all(is_causal(_evaluate(gm, m.mask, args, memo), m.mask_kind,
                             _val(m.q).shape[-2], _val(m.k).shape[-2])
                   for m in matches if m.mask is not None)


def _find(gm) -> list:
    """The written-out attentions of a Dynamo graph."""
    if platform.target("sdpa_forward") is None or platform.target("sdpa_backward") is None:
        return []  # TORCH_TPU_KERNELS=composite, or no handler: the graph stays as written
    found = []
    for node in gm.graph.nodes:
        m = match(node)
        if m is not None and (m.mask is None or _mask_inputs(gm, m.mask) is not None):
            found.append(m)
    return found


class MaskGuard:
    """Which compiled graph a call runs: the rewritten one while every mask's
    inputs are tensors whose values were found causal (by identity and
    version counter), else the graph as written (compiled on first need)."""

    def __init__(self, gm, matches, fused, compile_plain):
        self.gm = gm
        self.masks = [m.mask for m in matches if m.mask is not None]
        self.matches = matches
        self.inputs = sorted({i for m in self.masks for i in _mask_inputs(gm, m)})
        self.fused = fused
        self.compile_plain = compile_plain
        self.plain = None
        self.seen: dict[int, tuple] = {}  # id(tensor) -> (weakref, version, causal)
        self.reads = 0

    def note(self, args, causal: bool) -> None:
        for i in self.inputs:
            t = args[i]
            self.seen[id(t)] = (weakref.ref(t), t._version, causal)

    def _verdict(self, args):
        """True/False when every mask input's tensor is known, else None."""
        verdict = True
        for i in self.inputs:
            t = args[i]
            known = self.seen.get(id(t))
            if known is None or known[0]() is not t or known[1] != t._version:
                return None
            verdict = verdict and known[2]
        return verdict

    def __call__(self, *args):
        verdict = self._verdict(args)
        if verdict is None:
            # A mask made from tensors that change every call (not a buffer)
            # would cost a host read each call: past a few, run as written.
            self.reads += 1
            verdict = self.reads <= _MAX_READS and _masks_are_causal(self.gm, self.matches, args)
            self.note(args, verdict)
        if verdict:
            return self.fused(*args)
        if self.plain is None:
            self.plain = self.compile_plain(list(args))
        return self.plain(*args)


def rewrite_and_compile(gm, example_inputs, compile_fn):
    """(compile_fn(gm, example_inputs) on `gm` with its written-out attentions
    rewritten, how many were). Those without a mask always are; those with
    masks when every mask is causal in `example_inputs`, behind a MaskGuard."""
    if any(not isinstance(x, (torch.Tensor, int, float, bool)) for x in example_inputs):
        return compile_fn(gm, example_inputs), 0  # symbolic sizes, or inputs AOTAutograd flattens
    found = _find(gm)
    masked = [m for m in found if m.mask is not None]
    for m in found:
        if m.mask is None:
            _rewrite(gm, m)
    if not masked or not _masks_are_causal(gm, masked, example_inputs):
        return compile_fn(gm, example_inputs), len(found) - len(masked)
    plain = torch.fx.GraphModule(gm, copy.deepcopy(gm.graph))
    plain.meta.update(gm.meta)
    for m in masked:
        _rewrite(gm, m)
    guard = MaskGuard(gm, masked, compile_fn(gm, example_inputs), lambda args: compile_fn(plain, args))
    guard.note(example_inputs, True)
    return torch._dynamo.disable(guard, reason="runs a compiled graph"), len(found)
