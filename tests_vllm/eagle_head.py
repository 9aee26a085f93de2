"""A tiny EAGLE draft head for a tiny Llama, in the checkpoint format vLLM
0.32 loads as `EagleLlamaForCausalLM` (SafeAILab's EAGLE-1 layout): a Llama
config of one decoder layer, and the weights `fc.weight` [hidden, 2 x hidden]
(the token's embedding and the target's hidden state, side by side, to the
layer's input) and `layers.0.*` without `input_layernorm` (the first layer
has none); the embedding and `lm_head` are the target's, shared by vLLM.

No trained head can be made here. A random one would almost never be
accepted, which would leave the verification's accepting path untried; so
the head is random but close to passing the target's hidden state through
(fc's hidden-state half near the identity, the layer's writes to the
residual small). vLLM's EAGLE head applies no final norm and the target's
hidden state is after its own, so the head then proposes about what the
target predicted at the previous position: the last token again, which
these random tiny models often produce (a greedy run of repeats), so some
drafts are accepted and most are not."""
import json
import os

import torch


def build(target: str, root: str, seed: int = 0, noise: float = 0.02) -> str:
    """The folder of an EAGLE head for the model in `target`, under `root`."""
    from safetensors.torch import save_file
    out = os.path.join(root, f"{os.path.basename(target)}-eagle")
    if os.path.exists(os.path.join(out, "done")):
        return out
    os.makedirs(out, exist_ok=True)
    config = json.load(open(os.path.join(target, "config.json")))
    if config["architectures"] != ["LlamaForCausalLM"]:
        raise ValueError(f"an EAGLE head here is for a Llama, not {config['architectures']}")
    config = {**config, "num_hidden_layers": 1}
    json.dump(config, open(os.path.join(out, "config.json"), "w"), indent=1)

    g = torch.Generator().manual_seed(seed)
    hidden, inner = config["hidden_size"], config["intermediate_size"]
    head_dim = config.get("head_dim") or hidden // config["num_attention_heads"]
    q, kv = config["num_attention_heads"] * head_dim, config["num_key_value_heads"] * head_dim

    def rand(*shape):
        return torch.randn(*shape, generator=g) * noise

    weights = {
        "fc.weight": torch.cat([rand(hidden, hidden), torch.eye(hidden) + rand(hidden, hidden)], dim=1),
        "layers.0.self_attn.q_proj.weight": rand(q, hidden),
        "layers.0.self_attn.k_proj.weight": rand(kv, hidden),
        "layers.0.self_attn.v_proj.weight": rand(kv, hidden),
        "layers.0.self_attn.o_proj.weight": rand(hidden, q),
        "layers.0.post_attention_layernorm.weight": torch.ones(hidden),
        "layers.0.mlp.gate_proj.weight": rand(inner, hidden),
        "layers.0.mlp.up_proj.weight": rand(inner, hidden),
        "layers.0.mlp.down_proj.weight": rand(hidden, inner),
    }
    save_file({k: v.contiguous() for k, v in weights.items()}, os.path.join(out, "model.safetensors"))
    open(os.path.join(out, "done"), "w").write(json.dumps({"target": target, "seed": seed}))
    return out
