"""Custom kernels inside a model: an RMSNorm written in JAX and a softmax written
in Pallas (torch_tpu.pallas.jax_op), used by a small transformer block that
trains for a few steps on `tpu`. The same block in pure PyTorch trains on the
CPU from the same weights; the script prints both loss curves and the largest
difference, then times the training step on tpu with the JAX RMSNorm and with
PyTorch's rms_norm (the Pallas softmax in both), and pure PyTorch on tpu,
side by side in one run (`--mode`: an eager mode, or `compile` for
torch.compile(backend="tpu") of the block).

Pallas kernels lower to Mosaic on a TPU; on other plugins (the CPU plugin
here) they run in Pallas' interpret mode, so their speed here says nothing
about a TPU.
"""
import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import torch
import torch.nn as nn
import torch.nn.functional as F
from jax.experimental import pallas as pl

import torch_tpu
from torch_tpu.pallas import jax_op

EPS = 1e-6


# ---- the kernels, in JAX

def rms_norm_jax(x, w):
    x32 = x.astype(jnp.float32)
    scale = jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + EPS)
    return (x32 * scale).astype(x.dtype) * w


def softmax_kernel(x_ref, o_ref):
    x = x_ref[...]
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    o_ref[...] = e / jnp.sum(e, axis=-1, keepdims=True)


def softmax_pallas(x):
    rows = 16 if x.shape[0] % 16 == 0 else x.shape[0]
    spec = pl.BlockSpec((rows, x.shape[1]), lambda i: (i, 0))
    return pl.pallas_call(softmax_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                          grid=(x.shape[0] // rows,), in_specs=[spec], out_specs=spec)(x)


def softmax_backward(x, g):
    # A pallas_call has no automatic transpose: its gradient is given in JAX.
    y = jax.nn.softmax(x, axis=-1)
    return (y * (g - jnp.sum(g * y, axis=-1, keepdims=True)),)


rms_norm_op = jax_op("example::rms_norm", rms_norm_jax)  # backward: jax.vjp
softmax_op = jax_op("example::softmax", softmax_pallas, backward=softmax_backward)


# ---- the model

def torch_rms_norm(x, w):
    return F.rms_norm(x, (x.shape[-1],), w, EPS)


def jax_rms_norm(x, w):
    return rms_norm_op(x, w)


def pallas_softmax(s):
    return softmax_op(s.reshape(-1, s.shape[-1])).reshape(s.shape)


def torch_softmax(s):
    return torch.softmax(s, dim=-1)


class Block(nn.Module):
    def __init__(self, d=64, heads=4, seq=32):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.Parameter(torch.ones(d))
        self.norm2 = nn.Parameter(torch.ones(d))
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.up = nn.Linear(d, 4 * d)
        self.down = nn.Linear(4 * d, d)
        self.register_buffer("mask", torch.full((seq, seq), float("-inf")).triu(1))
        self.rms_norm = torch_rms_norm
        self.softmax = torch_softmax

    def forward(self, x):
        b, t, d = x.shape
        h = self.rms_norm(x, self.norm1)
        q, k, v = self.qkv(h).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        att = self.softmax(q @ k.transpose(-1, -2) * (d // self.heads) ** -0.5 + self.mask)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.rms_norm(x, self.norm2))))


def make_block(state, device, rms_norm, softmax, compile_it=False):
    block = Block()
    block.load_state_dict(state)
    block.rms_norm, block.softmax = rms_norm, softmax
    block = block.to(device)
    return torch.compile(block, backend="tpu") if compile_it else block


def train_step(block, opt, x, y):
    opt.zero_grad()
    loss = F.mse_loss(block(x), y)
    loss.backward()
    opt.step()
    return loss


def losses(block, x, y, steps):
    opt = torch.optim.SGD(block.parameters(), lr=0.05)
    return [train_step(block, opt, x, y).item() for _ in range(steps)]


def steps_per_second(variants, x, y, steps, rounds):
    """Interleaved rounds of `steps` steps per variant; the median per variant."""
    timed = {name: [] for name in variants}
    opts = {name: torch.optim.SGD(b.parameters(), lr=0.05) for name, b in variants.items()}
    for name, block in variants.items():  # untimed: traces, compiles, warms the caches
        for _ in range(2):
            train_step(block, opts[name], x, y)
        torch.tpu.synchronize()
    for _ in range(rounds):
        for name, block in variants.items():
            start = time.perf_counter()
            for _ in range(steps):
                loss = train_step(block, opts[name], x, y)
            loss.item()
            timed[name].append(steps / (time.perf_counter() - start))
    return {name: statistics.median(v) for name, v in timed.items()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=8, help="training steps compared with the CPU")
    parser.add_argument("--mode", default="defer_and_fuse",
                        choices=["strict", "defer_and_fuse", "compile"],
                        help="an eager mode, or torch.compile(backend='tpu') of the block")
    parser.add_argument("--bench-steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    plat = torch_tpu.platform()
    print(f"tpu platform: {plat['platform_name']} via {plat['plugin_reason']}; JAX {jax.__version__}; "
          f"eager mode {args.mode}")
    torch.manual_seed(0)
    state = Block().state_dict()
    x, y = torch.randn(4, 32, 64), torch.randn(4, 32, 64)
    compiled = args.mode == "compile"
    torch_tpu.set_eager_mode("strict" if compiled else args.mode)

    cpu = losses(make_block(state, "cpu", torch_rms_norm, torch_softmax), x, y, args.steps)
    tpu = losses(make_block(state, "tpu", jax_rms_norm, pallas_softmax, compiled), x.to("tpu"),
                 y.to("tpu"), args.steps)
    print("step  cpu (PyTorch)  tpu (JAX RMSNorm + Pallas softmax)")
    for i, (a, b) in enumerate(zip(cpu, tpu)):
        print(f"{i:4d}  {a:13.6f}  {b:13.6f}")
    diff = max(abs(a - b) for a, b in zip(cpu, tpu))
    print(f"max |loss difference|: {diff:.2e}")

    variants = {
        "JAX rms_norm + Pallas softmax": make_block(state, "tpu", jax_rms_norm, pallas_softmax,
                                                    compiled),
        "torch rms_norm + Pallas softmax": make_block(state, "tpu", torch_rms_norm, pallas_softmax,
                                                      compiled),
        "torch rms_norm + torch softmax": make_block(state, "tpu", torch_rms_norm, torch_softmax,
                                                     compiled),
    }
    rates = steps_per_second(variants, x.to("tpu"), y.to("tpu"), args.bench_steps, args.rounds)
    base = rates["torch rms_norm + Pallas softmax"]
    print(f"training steps/s on tpu ({args.mode}, median of {args.rounds} interleaved rounds of "
          f"{args.bench_steps} steps):")
    for name, r in rates.items():
        print(f"  {name:32s} {r:8.1f} steps/s   {r / base:5.2f}x of torch rms_norm + Pallas softmax")
    if diff > 1e-4:
        raise SystemExit(f"tpu and cpu losses differ by {diff:.2e}")


if __name__ == "__main__":
    main()
