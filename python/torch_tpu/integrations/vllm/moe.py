"""Mixture-of-experts layers (vLLM's FusedMoE) on `tpu`.

vLLM picks a FusedMoE layer's method by platform. An out-of-tree platform
gets `UnquantizedFusedMoEMethod` with no kernel at all (its "OOT" backend),
and vLLM's routers call CUDA or CPU kernels for top-k; so the platform
replaces the method through vLLM's own hook for that, `CustomOp.register_oot`
(`register()`, called before the model is built). Ours is *monolithic* in
vLLM's terms: it takes the router's logits and routes itself, so routing and
the experts are ordinary ops recorded into the step's captured program. Nothing
in it reads a value on the host: the experts a token picked select weights by
a mask, never by `nonzero` or a count brought back.

The experts are computed densely: every token goes through every expert as
two matmuls over all experts' weights side by side, and each expert's
activations are scaled by the token's routing weight for it (zero for the
experts it did not pick) before the down projection sums them. That costs
experts/top-k times the multiply-adds of the picked experts alone, but it is
two plain matmuls; `torch._grouped_mm` on the tokens sorted by expert (the
other way, `EXPERTS["grouped"]`) is no cheaper here, because torch_tpu lowers
it densely too (every group's product over all rows, csrc/lowering/matmul.cpp)
and on top it gathers, sorts and scatters the token copies
(benchmarks/moe_experts.py has the figures).

Shared experts (Qwen2-MoE, DeepSeek-V2) are vLLM's own modules, which its MoE
runner adds to this method's output; they are ordinary layers on tpu.

Expert parallelism (`enable_expert_parallel` with tensor parallelism and no
data parallelism) is vLLM's own layout, where no token moves: every worker
holds the step's tokens (tensor parallelism replicates the hidden states),
vLLM gives each worker whole experts (1/N of them, `layer.expert_map` from
a global expert id to the worker's local one, -1 for another worker's), the
router's logits cover all experts on every worker, and vLLM's MoE runner
all-reduces the workers' outputs after the method (the communicator's
in-program all-reduce). So the method routes over all experts, as one device
does, and keeps the weights of the picked experts it holds; another worker
adds the rest. vLLM's all-to-all dispatch and combine serve data parallelism,
which is refused (supported.py).
"""
import torch
import torch.nn.functional as F
from vllm.model_executor.layers.fused_moe.activation import MoEActivation
from vllm.model_executor.layers.fused_moe.unquantized_fused_moe_method import (
    UnquantizedFusedMoEMethod,
)


def route(router_logits, top_k, renormalize=True, scoring_func="softmax", num_expert_group=None,
          topk_group=None, correction_bias=None, scaling=1.0):
    """(weights float32 [T, top_k], expert ids int64 [T, top_k]) of each token,
    as vLLM's routers compute them: softmax or sigmoid scores; with
    `num_expert_group`, only the experts of the `topk_group` best groups (a
    group's score: its best expert's, or with a correction bias its two best
    biased ones'); a correction bias steers the choice, not the weights."""
    logits = router_logits.float()
    if scoring_func == "softmax":
        scores = logits.softmax(dim=-1)
    elif scoring_func == "sigmoid":
        scores = logits.sigmoid()
    else:
        raise NotImplementedError(f"vLLM on tpu: MoE scoring function {scoring_func!r} is not supported")
    choice = scores if correction_bias is None else scores + correction_bias.float()
    if num_expert_group is not None and num_expert_group > 1:
        tokens, experts = choice.shape
        groups = choice.view(tokens, num_expert_group, experts // num_expert_group)
        group_scores = (groups.max(dim=-1).values if correction_bias is None
                        else groups.topk(2, dim=-1).values.sum(dim=-1))
        best = group_scores.topk(topk_group, dim=-1).indices
        kept = (best[..., None] == torch.arange(num_expert_group, device=best.device)).any(dim=1)
        choice = choice.masked_fill(~kept[..., None].expand_as(groups).reshape(tokens, experts),
                                    float("-inf"))
    ids = choice.topk(top_k, dim=-1).indices
    weights = scores.gather(1, ids)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    if scaling != 1.0:
        weights = weights * scaling
    return weights, ids


def _silu_and_mul(h):
    gate, up = h.chunk(2, dim=-1)
    return F.silu(gate) * up


def dense_experts(x, w13, w2t, weights, ids):
    """sum over a token's picked experts e of weight_e * silu_and_mul(w13[e] @ x) @ w2t[e],
    computed for all experts at once (module docstring). w13 is vLLM's
    [experts, 2 x inner, hidden], w2t [experts, inner, hidden] (its w2 transposed)."""
    tokens, hidden = x.shape
    experts, inner, _ = w2t.shape
    act = _silu_and_mul(F.linear(x, w13.reshape(-1, hidden)).view(tokens, experts, 2 * inner))
    picked = ids[..., None] == torch.arange(experts, device=ids.device)            # [T, k, E]
    scale = (picked.to(weights.dtype) * weights[..., None]).sum(dim=1).to(act.dtype)  # [T, E]
    # A select, not only the product: an unpicked expert's inf must not leak in as nan.
    act = torch.where(picked.any(dim=1)[..., None], act * scale[..., None], act.new_zeros(()))
    return act.reshape(tokens, experts * inner) @ w2t.reshape(experts * inner, hidden)


def grouped_experts(x, w13, w2t, weights, ids):
    """The same sum through `torch._grouped_mm`: a copy of each token per
    picked expert, sorted by expert, each group multiplied by its expert."""
    flat = ids.reshape(-1)
    order = flat.argsort(stable=True)
    token = order // ids.shape[1]   # the token of each sorted copy
    counts = (flat[:, None] == torch.arange(w13.shape[0], device=flat.device)).sum(dim=0)
    offs = counts.cumsum(0).to(torch.int32)
    act = _silu_and_mul(torch._grouped_mm(x.index_select(0, token), w13.transpose(1, 2), offs))
    out = torch._grouped_mm(act, w2t, offs)
    out = out * weights.reshape(-1).index_select(0, order)[:, None].to(out.dtype)
    return torch.zeros_like(x).index_add(0, token, out)


EXPERTS = {"dense": dense_experts, "grouped": grouped_experts}


def refuse_untested(layer, moe_config) -> None:
    """Refuses, at engine start, what the methods of tpu have not been tested with."""
    used = (
        (f"activation {layer.activation.value!r} (tested: silu)", layer.activation != MoEActivation.SILU),
        ("expert biases", moe_config.has_bias),
        ("a custom routing function", layer.custom_routing_function is not None),
        ("router weights applied to the input", layer.apply_router_weight_on_input),
        (f"scoring function {layer.scoring_func!r}", layer.scoring_func not in ("softmax", "sigmoid")),
        ("SwiGLU limits", any(v is not None for v in (layer.swiglu_limit, layer.swiglu_alpha,
                                                      layer.swiglu_beta))),
    )
    found = [what for what, on in used if on]
    if found:
        raise NotImplementedError(f"vLLM on tpu: FusedMoE with {'; '.join(found)} is not supported: "
                                  "it has not been tested with the plugin (docs/vllm.md)")


def route_layer(layer, router_logits):
    """`route` with the layer's routing settings, the ids this worker's
    (expert parallelism: module docstring)."""
    grouped = layer.use_grouped_topk
    weights, ids = route(router_logits, layer.top_k, layer.renormalize, layer.scoring_func,
                         layer.num_expert_group if grouped else None, layer.topk_group if grouped else None,
                         layer.e_score_correction_bias, layer.routed_scaling_factor)
    if layer.expert_map is not None:
        # Global ids to this worker's local ones; -1, another worker's expert,
        # matches none of dense_experts' experts, so it adds nothing here.
        ids = layer.expert_map.long()[ids]
    return weights, ids


class OnTpu:
    """What the FusedMoE methods of tpu share: monolithic in vLLM's terms
    (they route themselves), no expert load balancing, and the refusal of
    what they have not been tested with when the layer is made."""

    @property
    def is_monolithic(self) -> bool:
        return True

    @property
    def supports_eplb(self) -> bool:
        return False

    def create_weights(self, layer, *args, **kwargs):
        refuse_untested(layer, self.moe)
        super().create_weights(layer, *args, **kwargs)


class TpuFusedMoEMethod(OnTpu, UnquantizedFusedMoEMethod):
    """vLLM's unquantized FusedMoE method on tpu: routing and experts as
    lowered ops (module docstring)."""

    def process_weights_after_loading(self, layer) -> None:
        super().process_weights_after_loading(layer)
        # w2 [experts, hidden, inner] as [experts, inner, hidden], once: the
        # down projection of all experts is then one matmul on a view of it
        # (read as loaded, the program transposed it every step: 6.1 against
        # 3.5 ms for 32 tokens of an 8-expert layer, hidden 256, inner 512).
        # As vLLM's XPU backend does, the parameter keeps its name.
        layer.w2_weight.data = layer.w2_weight.data.transpose(1, 2).contiguous()

    def apply_monolithic(self, layer, x, router_logits, input_ids=None):
        return dense_experts(x, layer.w13_weight, layer.w2_weight, *route_layer(layer, router_logits))


def register() -> None:
    """Makes vLLM build TpuFusedMoEMethod wherever it would build its
    unquantized method (once per process)."""
    from vllm.model_executor.custom_op import op_registry_oot
    if op_registry_oot.get(UnquantizedFusedMoEMethod.__name__) is not TpuFusedMoEMethod:
        UnquantizedFusedMoEMethod.register_oot(TpuFusedMoEMethod)
