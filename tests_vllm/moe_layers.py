"""A mixture-of-experts layer with random weights and routing, and its float64
reference, for tests_vllm/test_moe.py and benchmarks/moe_experts.py."""
import torch


def random_layer(tokens, hidden, inner, experts, top_k, generator):
    """(x, w13, w2t, weights, ids) on the CPU: vLLM's gate-and-up weights
    [experts, 2 x inner, hidden], the down weights as the plugin stores them
    (transposed once after loading: [experts, inner, hidden]), and each
    token's top_k routing weights and experts."""
    g = generator
    x = torch.randn(tokens, hidden, generator=g)
    w13 = torch.randn(experts, 2 * inner, hidden, generator=g) / hidden ** 0.5
    w2t = torch.randn(experts, inner, hidden, generator=g) / inner ** 0.5
    weights, ids = torch.randn(tokens, experts, generator=g).softmax(-1).topk(top_k, dim=-1)
    return x, w13, w2t, weights, ids


def reference(x, w13, w2t, weights, ids):
    """float64 loop over each token's picked experts."""
    x, w13, w2t, weights = (t.double() for t in (x, w13, w2t, weights))
    out = torch.zeros_like(x)
    for t in range(x.shape[0]):
        for j, e in enumerate(ids[t].tolist()):
            gate, up = (w13[e] @ x[t]).chunk(2)
            out[t] += weights[t, j] * ((torch.nn.functional.silu(gate) * up) @ w2t[e])
    return out
