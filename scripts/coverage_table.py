"""Generates docs/coverage.md: which ATen operators the tpu backend handles.

    python3 scripts/coverage_table.py           # print the table
    python3 scripts/coverage_table.py --write   # write docs/coverage.md
    python3 scripts/coverage_table.py --check   # exit 1 when docs/coverage.md is stale

Part 1, Core ATen: every aten overload tagged torch.Tag.core on the installed
torch. Part 2, beyond Core ATen: every aten overload with a kernel of its own
on the CPU (a CPU or CompositeExplicitAutograd(NonFunctional) kernel, not
CompositeImplicitAutograd, which never reaches a backend): the operators a
CPU user's calls end in. How each is handled is read from the dispatcher
(tests/opinfo/claims.py), not kept by hand: a StableHLO lowering (torch_tpu.lowered_ops(), through the
functional, in-place or out= route), a hand-written kernel in csrc/aten/, a
view (a CompositeExplicitAutograd kernel that only makes metadata over the
same storage), another composite kernel (runs on tpu when the ops it calls
do), a CompositeImplicitAutograd decomposition, or missing. In part 2 a
missing op is "fallback-only" when TORCH_TPU_CPU_FALLBACK=1 can run it (dense
tensors in and out) and "missing" when not even the fallback can (its
tensors are sparse, quantized, nested or mkldnn, which tpu tensors never are);
each has a reason from REASONS.
tests/opinfo/test_coverage_table.py fails when the checked-in table is stale.
"""
from __future__ import annotations

import argparse
import functools
import os
import sys
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "opinfo"))
OUT = os.path.join(ROOT, "docs", "coverage.md")

import torch  # noqa: E402
import torch_tpu  # noqa: E402,F401

from claims import classify  # noqa: E402

ORDER = ["lowered", "native", "view", "metadata", "composite", "decomposed", "missing"]
# Part 2 has no CompositeImplicitAutograd ops (decomposed, metadata) and splits missing in two.
ORDER2 = ["lowered", "native", "view", "composite", "fallback-only", "missing"]
MEANING = {
    "lowered": "a StableHLO lowering in csrc/lowering (`torch_tpu.lowered_ops()`), reached through the "
               "functional op or its in-place / out= form (csrc/aten/op_kernel.cpp)",
    "native": "a kernel written by hand in csrc/aten/ (copies, factories, resize_, data-dependent shapes...)",
    "view": "a view: ATen's CompositeExplicitAutograd kernel only makes new sizes/strides over the same "
            "storage; reading it is lowered by the runtime (slices, reshapes, transposes)",
    "metadata": "sym_size, sym_stride, sym_numel...: read the tensor's metadata on the host, no device work",
    "composite": "no tpu kernel of its own: ATen's CompositeExplicitAutograd kernel runs on tpu by calling "
                 "other ops (works when they are handled)",
    "decomposed": "CompositeImplicitAutograd: decomposed into other ops before reaching the backend",
    "missing": "no kernel: NotImplementedError (or CPU fallback with TORCH_TPU_CPU_FALLBACK=1)",
}
MEANING2 = dict(MEANING)
MEANING2["fallback-only"] = ("no tpu kernel: NotImplementedError, or with TORCH_TPU_CPU_FALLBACK=1 it runs on "
                             "the CPU (dense tensors copied to the host and back, one warning per op)")
MEANING2["missing"] = ("no tpu kernel, and the CPU fallback cannot run it either: its tensors are sparse, "
                       "quantized, nested or mkldnn, layouts a tpu tensor never has, or it is ATen's out= "
                       "wrapper of an op with no CPU kernel")

# Where users reach an op from: the Python module its native function is bound in.
AREAS = [
    ("torch.special", torch._C._special),
    ("torch.fft", torch._C._fft),
    ("torch.linalg", torch._C._linalg),
    ("torch.sparse", torch._C._sparse),
    ("torch.nested", torch._C._nested),
]
# Public APIs that reach an internal (or differently named) op, checked by calling them on tpu.
REACHED_FROM = {
    "_ctc_loss": "F.ctc_loss",
    "_histogramdd_bin_edges": "torch.histogramdd",
    "_histogramdd_from_bin_cts": "torch.histogramdd",
    "_histogramdd_from_bin_tensors": "torch.histogramdd",
    "_linalg_det": "torch.linalg.det",
    "_linalg_eigh": "torch.linalg.eigh",
    "_linalg_eigvals": "torch.linalg.eigvals",
    "_linalg_slogdet": "torch.linalg.slogdet, torch.logdet",
    "_linalg_solve_ex": "torch.linalg.solve",
    "_linalg_svd": "torch.linalg.svd, pinv, matrix_norm(ord=2), torch.norm('nuc')",
    "_native_multi_head_attention": "nn.MultiheadAttention (eval fast path)",
    "_sample_dirichlet": "torch.distributions.Dirichlet",
    "_standard_gamma": "torch.distributions.Gamma",
    "_transformer_encoder_layer_fwd": "nn.TransformerEncoderLayer (eval fast path)",
    "embedding_renorm_": "F.embedding(max_norm=...)",
    "igamma": "torch.special.gammainc",
    "igammac": "torch.special.gammaincc",
    "multilabel_margin_loss_forward": "F.multilabel_margin_loss",
    "rrelu_with_noise": "F.rrelu(training=True)",
}

# Why an op without a tpu kernel has none, keyed by operator name without the
# overload (a trailing "*" matches a prefix). Unknown is "not yet lowered".
CPU_ONLY = "a CPU-specific kernel or helper: tpu lowers the op that reaches it on the CPU"
FACTOR = ("a matrix factorization (LU, LDL, QR, eig, SVD): no StableHLO op; needs a solver custom call "
          "(LAPACK on the host) or an iterative HLO algorithm")
FAKE_QUANT = "quantization-aware training (fake quantize, dense in and out): not yet lowered"
MKLDNN = "mkldnn layout (CPU only)"
NESTED = "nested tensor layout"
QUANTIZED = "quantized tensors (tpu tensors are never quantized)"
SAMPLER = "rejection sampling (gamma, Poisson, binomial): not yet lowered (needs a while loop per element)"
SPARSE = "sparse layout (tpu tensors are dense)"
TEST_OP = "PyTorch's own test operator"
REASONS = {
    "_add_relu*": "fused add + relu of the JIT fusion passes: not yet lowered",
    "_addmm_activation": "fused addmm + relu/gelu (inductor's CUDA epilogue): not yet lowered",
    "_aminmax": "deprecated alias of aminmax (lowered): not routed",
    "_convert_weight_to_int4pack_for_cpu": CPU_ONLY,
    "_cummax_helper": CPU_ONLY,
    "_cummin_helper": CPU_ONLY,
    "_dyn_quant_*": CPU_ONLY,
    "_empty_affine_quantized": QUANTIZED,
    "_empty_per_channel_affine_quantized": QUANTIZED,
    "_fake_quantize_*": FAKE_QUANT,
    "_foobar": TEST_OP,
    "_fused_moving_avg_obs_fq_helper": FAKE_QUANT,
    "_fused_sdp_choice": "picks a CPU/CUDA attention kernel; tpu's SDPA goes to its fused lowering without it",
    "_linalg_det": FACTOR,
    "_linalg_eigh": FACTOR,
    "_linalg_eigvals": FACTOR,
    "_linalg_slogdet": FACTOR,
    "_linalg_solve_ex": FACTOR,
    "_linalg_svd": FACTOR,
    "_logcumsumexp": CPU_ONLY,
    "_make_per_channel_quantized_tensor": QUANTIZED,
    "_make_per_tensor_quantized_tensor": QUANTIZED,
    "_masked_softmax*": "the CPU/CUDA MultiheadAttention fast path's softmax: tpu's fast path "
                        "(csrc/aten/transformer.cpp) does without it",
    "_mkldnn_*": MKLDNN,
    "_nested_compute_contiguous_strides_offsets": "nested tensor metadata helper (dense in and out)",
    "_nested_from_padded": NESTED,
    "_nested_tensor_from_mask*": NESTED,
    "_nested_view_from_buffer": NESTED,
    "_scaled_dot_product_flash_attention_for_cpu*": CPU_ONLY,
    "_slow_conv2d_*": CPU_ONLY,
    "_spdiags": SPARSE,
    "_test_*": TEST_OP,
    "_to_sparse*": SPARSE,
    "_transform_bias_rescale_qkv": "the CPU/CUDA MultiheadAttention fast path's projection step: tpu's "
                                   "fast path (csrc/aten/transformer.cpp) does without it",
    "_weight_int4pack_mm_for_cpu": CPU_ONLY,
    "binomial": SAMPLER,
    "cholesky": "not yet lowered: the CPU raises on a matrix that is not positive-definite, which "
                "needs a host sync (torch.linalg.cholesky, on linalg_cholesky_ex, is lowered)",
    "dequantize": QUANTIZED,
    "fake_quantize_*": FAKE_QUANT,
    "from_file": "reads a host file: the CPU fallback is the natural implementation",
    "geqrf": FACTOR,
    "linalg_eig": FACTOR,
    "linalg_eigvals": FACTOR,
    "linalg_householder_product": "not yet lowered (a loop of Householder reflections)",
    "linalg_inv_ex": FACTOR,
    "linalg_ldl_*": FACTOR,
    "linalg_lstsq": FACTOR,
    "linalg_lu*": FACTOR,
    "linalg_matrix_exp": "not yet lowered (Pade approximation with scaling and squaring)",
    "linalg_qr": FACTOR,
    "lu_unpack": "not yet lowered (a permutation and tril/triu of linalg_lu_factor's result)",
    "mkldnn_*": MKLDNN,
    "mkldnn_rnn_layer*": CPU_ONLY,
    "ormqr": FACTOR,
    "poisson": SAMPLER,
    "quantize_*": QUANTIZED,
    "quantized_*": QUANTIZED,
    "rrelu_with_noise": "out= form of an op that also writes `noise`: not routed (F.rrelu and nn.RReLU call "
                        "the functional form, which is lowered)",
    "slow_conv*": CPU_ONLY,
    "sspaddmm": SPARSE,
    "to_mkldnn": MKLDNN,
}
NO_CPU_KERNEL = "the op it wraps has no CPU kernel either (CUDA, cuDNN or oneDNN tensors only)"
# Reasons that the CPU fallback cannot get around either.
NO_FALLBACK = {MKLDNN, NESTED, NO_CPU_KERNEL, QUANTIZED, SPARSE}
NOT_YET = "not yet lowered"


def _op(name: str):
    base, _, overload = name[6:].partition(".")
    packet = getattr(torch.ops.aten, base, None)
    return getattr(packet, overload or "default", None) if packet is not None else None


def aten_overloads():
    """Every aten overload known to the dispatcher (TorchScript-only schemas left out), sorted."""
    names = set()
    for schema in torch._C._jit_get_all_schemas():
        if not schema.name.startswith("aten::"):
            continue
        name = schema.name + ("." + schema.overload_name if schema.overload_name else "")
        try:
            torch._C._dispatch_has_kernel_for_dispatch_key(name, "CPU")
        except RuntimeError:
            continue
        names.add(name)
    return sorted(names)


@functools.lru_cache(maxsize=None)
def _known() -> frozenset:
    return frozenset(aten_overloads())


def core_ops():
    out = []
    for name in aten_overloads():
        op = _op(name)
        if op is not None and torch.Tag.core in op.tags:
            out.append(name)
    return out


def _runs_on_cpu(name: str) -> bool:
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    return any(has(name, key) for key in
               ("CPU", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional"))


def cpu_ops():
    """Overloads with a kernel of their own on the CPU: a CPU or CompositeExplicitAutograd(NonFunctional)
    kernel, and no CompositeImplicitAutograd one (those decompose before any backend sees them)."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    return [n for n in aten_overloads() if _runs_on_cpu(n) and not has(n, "CompositeImplicitAutograd")]


def _is_view(name: str) -> bool:
    rets = _op(name)._schema.returns
    return bool(rets) and all(r.alias_info is not None and not r.alias_info.is_write for r in rets)


# What the composite kernels of core ops call on tpu (ATen's CompositeExplicitAutograd code).
CALLS = {
    "aten::_to_copy": "empty_strided + copy_ (csrc/aten/copy.cpp)",
    "aten::clone": "empty_like / empty_strided + copy_ (csrc/aten/copy.cpp)",
    "aten::copy": "clone + copy_ (csrc/aten/copy.cpp)",
    "aten::full": "empty + fill_ (lowered aten::fill.Scalar)",
    "aten::full_like": "empty_like + fill_ (lowered aten::fill.Scalar)",
    "aten::rand": "empty + uniform_ (lowered aten::uniform)",
    "aten::randn": "empty + normal_ (lowered aten::normal_functional)",
    "aten::randperm": "randperm.generator (lowered)",
}


def status(name: str) -> tuple[str, str]:
    """claims.classify, with views told apart from other composite kernels."""
    kind, how = classify(name)
    if kind == "composite" and _is_view(name):
        return "view", "view (metadata only) over the same storage"
    if kind == "composite" and name in CALLS:
        return kind, "composite: " + CALLS[name]
    return kind, how


def _is_out(name: str) -> bool:
    return any(a.kwarg_only and a.alias_info is not None and a.alias_info.is_write
               for a in _op(name)._schema.arguments)


def _functional_twin(name: str):
    """The functional overload an out= overload wraps, when it is named the way ATen names the
    out= wrappers it generates: `X.out` for `X`, `X.Y_out` for `X.Y`."""
    if not _is_out(name):
        return None
    stem, _, overload = name.partition(".")
    if overload == "out":
        twin = stem
    elif overload.endswith("_out"):
        twin = f"{stem}.{overload[:-4]}"
    else:
        return None
    return twin if twin in _known() else None


def rows():
    return [(name, *status(name)) for name in core_ops()]


def _base(name: str) -> str:
    return name[6:].partition(".")[0]


def reason(name: str) -> str:
    base = _base(name)
    if base in REASONS:
        return REASONS[base]
    prefixes = [k for k in REASONS if k.endswith("*") and base.startswith(k[:-1])]
    if prefixes:
        return REASONS[max(prefixes, key=len)]
    return NOT_YET


def reached_from(name: str) -> str:
    base = _base(name)
    if base in REACHED_FROM:
        where = [REACHED_FROM[base]]
    else:
        where = [area for area, module in AREAS if hasattr(module, base)]
        if hasattr(torch.nn.functional, base):
            where.insert(0, "torch.nn.functional")
        elif hasattr(torch._C._nn, base) and not base.startswith("_"):
            # Bound in the module behind torch.nn.functional, called by F's Python code.
            where.insert(0, "torch._C._nn")
    if hasattr(torch, base) and not base.startswith("_"):
        where.append("torch")
    if hasattr(torch.Tensor, base) and (base.startswith("__") or not base.startswith("_")):
        where.append("Tensor")
    return ", ".join(where) if where else "internal"


def area(reached: str) -> str:
    """The section an op is listed under: its first public entry point."""
    first = reached.split(", ")[0]
    if first.startswith(("F.", "nn.", "torch._C._nn")):
        return "torch.nn.functional"
    for name in AREA_ORDER:
        if first.startswith(name):
            return name
    return "internal" if first == "internal" else "torch / Tensor"


AREA_ORDER = ["torch.nn.functional", "torch.special", "torch.fft", "torch.linalg", "torch.sparse",
              "torch.nested", "torch / Tensor", "internal"]


def rows2():
    """(name, status, reached from, how or why) for every operator of part 2, sorted by name."""
    out = []
    handled_bases = set()
    classified = [(name, *status(name)) for name in cpu_ops()]
    for name, kind, _ in classified:
        # A composite kernel does not count: an out= wrapper calls the functional op.
        if kind in ("lowered", "native", "view"):
            handled_bases.add(_base(name).rstrip("_"))
    for name, kind, how in classified:
        twin = _functional_twin(name) if kind == "composite" else None
        if twin is not None and status(twin)[0] == "missing":
            # ATen's generated out= wrapper only calls the functional op, which tpu lacks.
            kind, via = "missing", f"out= wrapper of `{twin}`, which has no tpu kernel: "
        else:
            via = ""
        if kind == "missing":
            why = reason(name)
            if via and not _runs_on_cpu(twin):
                why = NO_CPU_KERNEL
            elif why == NOT_YET and not via and _base(name).rstrip("_") in handled_bases:
                why = "not yet routed: another overload of the op is handled"
            elif why == NOT_YET and not via and _is_out(name):
                why = "out= form: not yet routed"
            kind = "missing" if why in NO_FALLBACK else "fallback-only"
            how = via + why
        out.append((name, kind, reached_from(name), how))
    return out


def _part1() -> list[str]:
    rs = rows()
    c = Counter(k for _, k, _ in rs)
    handled = sum(c[k] for k in ("lowered", "native", "view", "metadata", "decomposed"))
    lines = [
        "## Part 1: Core ATen",
        "",
        f"Core ATen operators (`torch.Tag.core`, torch {torch.__version__.split('+')[0]}): **{len(rs)}**. "
        f"Handled by a tpu kernel, a view or a decomposition: **{handled}** "
        f"({100 * handled / max(len(rs), 1):.1f}%); composite kernels that depend on the ops they call: "
        f"{c['composite']}; missing: **{c['missing']}**.",
        "",
        "| how | count | meaning |",
        "|---|---|---|",
    ]
    for k in ORDER:
        lines.append(f"| {k} | {c[k]} | {MEANING[k]} |")
    lines += ["", "| operator | status | how |", "|---|---|---|"]
    for name, kind, how in rs:
        lines.append(f"| `{name}` | {kind} | {how} |")
    return lines


def _part2() -> list[str]:
    rs = rows2()
    c = Counter(k for _, k, _, _ in rs)
    handled = sum(c[k] for k in ("lowered", "native", "view"))
    lines = [
        "## Part 2: every ATen operator with a CPU kernel",
        "",
        f"Every aten overload with a CPU or CompositeExplicitAutograd(NonFunctional) kernel and no "
        f"CompositeImplicitAutograd one (torch {torch.__version__.split('+')[0]}): **{len(rs)}**, Core ATen "
        f"included. Handled by a tpu kernel or a view: **{handled}** ({100 * handled / max(len(rs), 1):.1f}%); "
        f"composite: {c['composite']}; fallback-only: **{c['fallback-only']}**; missing: **{c['missing']}**.",
        "",
        "| status | count | meaning |",
        "|---|---|---|",
    ]
    for k in ORDER2:
        lines.append(f"| {k} | {c[k]} | {MEANING2[k]} |")
    by_area = {a: Counter() for a in AREA_ORDER}
    for _, kind, reached, _ in rs:
        by_area[area(reached)][kind] += 1
    lines += ["", "By where users reach them (the first public entry point; *internal*: only other ops "
              "call it):", "",
              "| reached from | " + " | ".join(ORDER2) + " |",
              "|---|" + "---|" * len(ORDER2)]
    for a in AREA_ORDER:
        if by_area[a]:
            lines.append(f"| {a} | " + " | ".join(str(by_area[a][k]) for k in ORDER2) + " |")

    def key(r):
        return (AREA_ORDER.index(area(r[2])), r[0])

    lines += ["", "### Not handled on tpu (fallback-only and missing)", "",
              "Sorted by where users reach them, then by name. *reason* says why there is no tpu kernel.", "",
              "| operator | status | reached from | reason |", "|---|---|---|---|"]
    for name, kind, reached, how in sorted((r for r in rs if r[1] in ("fallback-only", "missing")), key=key):
        lines.append(f"| `{name}` | {kind} | {reached} | {how} |")
    lines += ["", "### Handled on tpu", "",
              "| operator | status | reached from | how |", "|---|---|---|---|"]
    for name, kind, reached, how in sorted((r for r in rs if r[1] not in ("fallback-only", "missing")),
                                           key=key):
        lines.append(f"| `{name}` | {kind} | {reached} | {how} |")
    return lines


def render() -> str:
    lines = [
        "# ATen coverage",
        "",
        "Generated by `python3 scripts/coverage_table.py --write` (`make coverage-table`); "
        "`tests/opinfo/test_coverage_table.py` fails when it is stale. Do not edit by hand.",
        "",
        "Whether a handled op is also *correct* is the OpInfo harness's job "
        "(`make opinfo-report`, `make opinfo-full`; tests/opinfo/).",
        "",
    ]
    lines += _part1() + [""] + _part2()
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    text = render()
    if a.check:
        current = open(OUT).read() if os.path.exists(OUT) else ""
        if current != text:
            print(f"{OUT} is stale: run `python3 scripts/coverage_table.py --write`", file=sys.stderr)
            return 1
        return 0
    if a.write:
        os.makedirs(os.path.dirname(OUT), exist_ok=True)
        with open(OUT, "w") as f:
            f.write(text)
        print(f"wrote {OUT}")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
