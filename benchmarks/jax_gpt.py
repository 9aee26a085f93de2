"""The GPT-style decoder of benchmarks/gpt.py written in JAX (benchmark-only:
`pip install jax jaxlib`; torch_tpu does not use JAX). Same layers, same
initial weights (taken from a torch GPT's state_dict), same loss and the same
AdamW update as torch.optim.AdamW's defaults, so the jitted step does the same
work as the PyTorch one."""
import math

import jax
import jax.numpy as jnp
import numpy as np


def params_from_torch(model):
    """A pytree of jnp arrays from a torch GPT (benchmarks/gpt.py)."""
    return {k: jnp.asarray(v.detach().cpu().numpy()) for k, v in model.state_dict().items()
            if not k.endswith(".mask")}


def _layer_norm(x, w, b, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / jnp.sqrt(var + eps) * w + b


def _linear(p, name, x, bias=True):
    y = x @ p[name + ".weight"].T
    return y + p[name + ".bias"] if bias else y


def forward(p, idx, *, heads, layers):
    b, t = idx.shape
    x = p["tok.weight"][idx] + p["pos.weight"][jnp.arange(t)]
    d = x.shape[-1]
    mask = jnp.triu(jnp.full((t, t), -jnp.inf, dtype=x.dtype), 1)
    for i in range(layers):
        pre = f"blocks.{i}."
        h = _layer_norm(x, p[pre + "ln1.weight"], p[pre + "ln1.bias"])
        q, k, v = jnp.split(_linear(p, pre + "qkv", h), 3, axis=-1)
        q, k, v = (z.reshape(b, t, heads, d // heads).transpose(0, 2, 1, 3) for z in (q, k, v))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d // heads) + mask
        att = jax.nn.softmax(scores, axis=-1) @ v
        x = x + _linear(p, pre + "proj", att.transpose(0, 2, 1, 3).reshape(b, t, d))
        h = _layer_norm(x, p[pre + "ln2.weight"], p[pre + "ln2.bias"])
        x = x + _linear(p, pre + "fc2", jax.nn.gelu(_linear(p, pre + "fc1", h), approximate=False))
    x = _layer_norm(x, p["ln.weight"], p["ln.bias"])
    return _linear(p, "head", x, bias=False)


def loss(p, idx, targets, *, heads, layers):
    logits = forward(p, idx, heads=heads, layers=layers)
    logp = jax.nn.log_softmax(logits.reshape(-1, logits.shape[-1]), axis=-1)
    return -jnp.take_along_axis(logp, targets.reshape(-1, 1), axis=-1).mean()


def adamw_init(p):
    zeros = jax.tree_util.tree_map(jnp.zeros_like, p)
    return {"step": jnp.zeros((), jnp.float32), "m": zeros,
            "v": jax.tree_util.tree_map(jnp.zeros_like, p)}


def adamw_update(p, grads, state, lr=1e-4, b1=0.9, b2=0.999, eps=1e-8, wd=0.01):
    """torch.optim.AdamW (decoupled weight decay, bias correction)."""
    step = state["step"] + 1
    m = jax.tree_util.tree_map(lambda m, g: b1 * m + (1 - b1) * g, state["m"], grads)
    v = jax.tree_util.tree_map(lambda v, g: b2 * v + (1 - b2) * g * g, state["v"], grads)
    c1 = 1 - b1 ** step
    c2 = 1 - b2 ** step

    def upd(w, m, v):
        w = w * (1 - lr * wd)
        return w - lr * (m / c1) / (jnp.sqrt(v / c2) + eps)

    return jax.tree_util.tree_map(upd, p, m, v), {"step": step, "m": m, "v": v}


def make_train_step(heads, layers):
    """A jitted (params, opt_state, idx, targets) -> (params, opt_state, loss)."""

    def step(p, state, idx, targets):
        value, grads = jax.value_and_grad(loss)(p, idx, targets, heads=heads, layers=layers)
        p, state = adamw_update(p, grads, state)
        return p, state, value

    return jax.jit(step, donate_argnums=(0, 1))


def make_inference(heads, layers):
    return jax.jit(lambda p, idx: forward(p, idx, heads=heads, layers=layers))


def to_jax(t):
    return jnp.asarray(np.asarray(t.cpu().numpy()))
