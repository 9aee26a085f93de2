"""CPU references for vLLM's quantized linear layers: HF's model on the CPU
with every decoder linear layer replaced by the same quantization written out
here from its definition (scales from the weights' and activations' absolute
maxima, rounding by PyTorch's CPU casts), not from vLLM's code or the plugin's.

Where vLLM fuses layers (q/k/v into qkv_proj, gate/up into gate_up_proj), a
per-tensor weight scale is the fused weight's, so the reference groups them."""
import torch
from torch import nn

FP8 = torch.float8_e4m3fn
FP8_MAX = torch.finfo(FP8).max
MIN_SCALE = 1.0 / (FP8_MAX * 512.0)   # vLLM's floor of a dynamic scale
FUSED = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"), ("o_proj",), ("down_proj",))


def _fp8(x: torch.Tensor, scale: torch.Tensor, divide: bool) -> torch.Tensor:
    scaled = x / scale if divide else x * scale.reciprocal()
    return scaled.clamp(-FP8_MAX, FP8_MAX).to(FP8)


class Fp8Linear(nn.Module):
    """y = dequant(quant(x)) @ dequant(quant(W)).T, quantized as `method`:
    fp8_per_tensor: a weight scale per (fused) tensor, a dynamic scale per
    activation tensor; fp8_per_channel: a weight scale per output channel,
    a dynamic scale per token."""

    def __init__(self, linear: nn.Linear, method: str, weight_amax: torch.Tensor):
        super().__init__()
        w = linear.weight.detach().float()
        self.method = method
        if method == "fp8_per_tensor":
            self.w_scale = weight_amax.float() / FP8_MAX
            self.w_q = _fp8(w, self.w_scale, divide=False)
        elif method == "fp8_per_channel":
            self.w_scale = (w.abs().amax(dim=1, keepdim=True) / FP8_MAX).clamp(min=MIN_SCALE)
            self.w_q = _fp8(w, self.w_scale, divide=True)
        else:
            raise ValueError(f"no reference for {method!r}")

    def forward(self, x):
        x2 = x.reshape(-1, x.shape[-1]).float()
        per_token = self.method == "fp8_per_channel"
        amax = x2.abs().amax(dim=-1, keepdim=True) if per_token else x2.abs().max()
        x_scale = (amax / FP8_MAX).clamp(min=MIN_SCALE)
        x_q = _fp8(x2, x_scale, divide=False)
        if per_token:
            y = (x_q.float() @ self.w_q.float().t()) * x_scale * self.w_scale.t()
        else:
            y = (x_q.float() * x_scale) @ (self.w_q.float() * self.w_scale).t()
        return y.to(x.dtype).reshape(*x.shape[:-1], -1)


BLOCK = 128   # fp8_per_block: weight blocks of BLOCK x BLOCK, activation groups of BLOCK channels


def _per_block(x: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    """x [M, K] zero-padded to whole rows x cols blocks, viewed [M/rows, rows, K/cols, cols]."""
    m, k = x.shape
    padded = torch.zeros(-(-m // rows) * rows, -(-k // cols) * cols, dtype=x.dtype)
    padded[:m, :k] = x
    return padded.view(padded.shape[0] // rows, rows, padded.shape[1] // cols, cols)


def fp8_per_block(w: torch.Tensor):
    """(fp8 values, float32 scale of each value) of weights [N, K] quantized
    in BLOCK x BLOCK blocks: scale = max(|block|, 1e-4) / 448, the values w
    times the scale's reciprocal, rounded (vLLM's per_block_cast_to_fp8)."""
    n, k = w.shape
    blocks = _per_block(w.float(), BLOCK, BLOCK)
    scale = blocks.abs().amax(dim=(1, 3), keepdim=True).clamp(min=1e-4) / FP8_MAX
    values = (blocks * (1.0 / scale)).to(FP8)

    def whole(t):
        return t.reshape(blocks.shape[0] * BLOCK, -1)[:n, :k]
    return whole(values), whole(scale.expand(blocks.shape))


class Fp8BlockLinear(nn.Module):
    """fp8_per_block: y = dequant(q(x)) @ dequant(W_q).T, the weight in fp8
    with a scale per BLOCK x BLOCK block (fp8_per_block), each token's groups
    of BLOCK channels quantized by their own scale max(|group| / 448, vLLM's
    floor), x / scale rounded."""

    def __init__(self, values: torch.Tensor, scales: torch.Tensor):
        super().__init__()
        self.weight = values.float() * scales

    def forward(self, x):
        x2 = x.reshape(-1, x.shape[-1]).float()
        groups = _per_block(x2, 1, BLOCK)
        scale = (groups.abs().amax(dim=3, keepdim=True) / FP8_MAX).clamp(min=MIN_SCALE)
        x_q = (groups / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8)
        a = (x_q.float() * scale).reshape(x2.shape[0], -1)[:, : x2.shape[1]]
        return (a @ self.weight.t()).to(x.dtype).reshape(*x.shape[:-1], -1)


class W8A8Int8Linear(nn.Module):
    """A compressed-tensors W8A8-int8 layer: y = (q(x) @ W_q.T) * s_x * s_w with
    the checkpoint's int8 weight W_q and channel scales s_w, and each token x
    quantized to int8 by its own scale s_x = max|x| / 127: x * (127 / max|x|)
    rounded half to even, as vLLM's int8 kernels and their tests define it."""

    def __init__(self, weight_q: torch.Tensor, weight_scale: torch.Tensor):
        super().__init__()
        self.w_q, self.w_scale = weight_q.float(), weight_scale.float().reshape(-1, 1)

    def forward(self, x):
        x2 = x.reshape(-1, x.shape[-1]).float()
        amax = x2.abs().amax(dim=-1, keepdim=True)
        x_scale = amax / 127.0
        x_q = torch.where(amax > 0, x2 * (127.0 / amax), torch.zeros_like(x2)).round().clamp(-128, 127)
        y = (x_q.double() @ self.w_q.double().t()).float() * x_scale * self.w_scale.t()
        return y.to(x.dtype).reshape(*x.shape[:-1], -1)


def int8_per_channel(w: torch.Tensor):
    """(int8 values, float32 scales) of weights [..., out, in], symmetric, a
    scale per output channel: max|row| / 127, rounded in the weights' dtype."""
    scale = w.abs().amax(dim=-1) / 127
    return (w / scale[..., None]).round().clamp(-127, 127).to(torch.int8), scale.float()


class Int8WeightOnlyExperts(nn.Module):
    """HF's fused experts (gate_up_proj [E, 2I, H], down_proj [E, H, I]) with
    int8 weights, a scale per output channel; each token's picked experts run
    on the dequantized weights in float32, the activations unquantized."""

    def __init__(self, experts: nn.Module):
        super().__init__()
        self.act_fn = experts.act_fn
        self.gate_up = int8_per_channel(experts.gate_up_proj.detach())
        self.down = int8_per_channel(experts.down_proj.detach())

    def forward(self, hidden_states, top_k_index, top_k_weights):
        (gu_q, gu_s), (d_q, d_s) = self.gate_up, self.down
        out = torch.zeros(hidden_states.shape, dtype=torch.float32)
        for token, (experts, weights) in enumerate(zip(top_k_index.tolist(), top_k_weights.float())):
            x = hidden_states[token].float()
            for e, weight in zip(experts, weights):
                gate, up = ((gu_q[e].float() * gu_s[e][:, None]) @ x).chunk(2)
                out[token] += weight * ((d_q[e].float() * d_s[e][:, None]) @ (self.act_fn(gate) * up))
        return out.to(hidden_states.dtype)


def load_int8_moe(folder: str, dtype=torch.float16, attention: str = "sdpa") -> nn.Module:
    """HF's MoE model of `folder` in `dtype`, its experts' weights int8 per
    output channel (vLLM's int8_per_channel_weight_only: the experts only)."""
    model = load(folder, None, dtype, attention)
    for layer in model.model.layers:
        layer.mlp.experts = Int8WeightOnlyExperts(layer.mlp.experts)
    return model


# vLLM's fp8 KV cache formats ("fp8" is e4m3).
KV_CACHE_FP8 = {"fp8": torch.float8_e4m3fn, "fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}


def _through_fp8(x: torch.Tensor, fp8: torch.dtype, scale: float) -> torch.Tensor:
    """x as an fp8 KV cache gives it back: stored as x / scale, saturated at
    the format's largest value, read as that times scale."""
    limit = torch.finfo(fp8).max
    return ((x.float() / scale).clamp(-limit, limit).to(fp8).float() * scale).to(x.dtype)


def load_fp8_kv_cache(folder: str, kv_cache_dtype: str, dtype=torch.float32, attention: str = "sdpa",
                      scale: float = 1.0) -> nn.Module:
    """HF's model of `folder` whose attention sees every key and value (the
    new ones too, as vLLM reads them back from its cache) rounded through the
    fp8 format of `kv_cache_dtype`, with vLLM's default k/v scale 1.0."""
    import sys
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
    model = load(folder, None, dtype, attention)
    fp8 = KV_CACHE_FP8[kv_cache_dtype]
    module = sys.modules[type(model.model.layers[0].self_attn).__module__]
    inner = module.eager_attention_forward if attention == "eager" else AttentionInterface()[attention]

    def attend(layer, query, key, value, *args, **kwargs):
        return inner(layer, query, _through_fp8(key, fp8, scale), _through_fp8(value, fp8, scale), *args, **kwargs)

    name = f"{kv_cache_dtype}_kv_cache_{attention}_{model.config.model_type}"
    AttentionInterface.register(name, attend)
    AttentionMaskInterface.register(name, ALL_MASK_ATTENTION_FUNCTIONS[attention])   # the mask its attention takes
    model.set_attn_implementation(name)
    return model


def quantize_decoder(model: nn.Module, method: str) -> nn.Module:
    """`model`'s decoder linear layers (not the embeddings or the LM head,
    which vLLM's online methods leave unquantized) replaced by Fp8Linear."""
    for layer in model.model.layers:
        for block in (layer.self_attn, layer.mlp):
            for group in FUSED:
                linears = [getattr(block, name) for name in group if hasattr(block, name)]
                if not linears:
                    continue
                if method == "fp8_per_block":   # blocks of the fused weight
                    assert all(lin.bias is None for lin in linears)
                    values, scales = fp8_per_block(torch.cat([lin.weight.detach() for lin in linears]))
                    sizes = [lin.weight.shape[0] for lin in linears]
                    for name, v, sc in zip(group, values.split(sizes), scales.split(sizes)):
                        setattr(block, name, Fp8BlockLinear(v, sc))
                    continue
                amax = torch.stack([lin.weight.detach().abs().max() for lin in linears]).max()
                for name, lin in zip(group, linears):
                    setattr(block, name, Fp8Linear(lin, method, amax))
    return model


def load(folder: str, method, dtype=torch.float16, attention: str = "sdpa") -> nn.Module:
    """HF's model of `folder` on the CPU in `dtype`, quantized by `method`
    (None: as it is), with HF's `attention` implementation."""
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, attn_implementation=attention).eval()
    return model if method is None else quantize_decoder(model, method)


def load_w8a8(folder: str, checkpoint: str, dtype=torch.float16, attention: str = "sdpa") -> nn.Module:
    """HF's model of `folder` with its decoder linear layers those of the
    compressed-tensors W8A8-int8 `checkpoint` (its int8 weights and scales)."""
    from safetensors.torch import load_file
    model = load(folder, None, dtype, attention)
    tensors = load_file(f"{checkpoint}/model.safetensors")
    for name, module in list(model.named_modules()):
        for child, linear in list(module.named_children()):
            key = f"{name}.{child}.weight"
            if isinstance(linear, nn.Linear) and key in tensors and tensors[key].dtype == torch.int8:
                setattr(module, child, W8A8Int8Linear(tensors[key], tensors[key + "_scale"]))
    return model


class WeightOnlyLinear(nn.Module):
    """A weight-only quantized layer: y = x @ W.T in float32, W = (values -
    zeros) * scales, each scale and zero spanning K / groups consecutive input
    channels of an output channel (values [N, K], scales [N, groups], zeros
    like the scales or one number)."""

    def __init__(self, values: torch.Tensor, scales: torch.Tensor, zeros):
        super().__init__()
        self.values = values
        span = values.shape[1] // scales.shape[1]
        grouped = values.double().reshape(values.shape[0], -1, span)
        zeros = zeros.double()[..., None] if torch.is_tensor(zeros) else zeros
        self.weight = ((grouped - zeros) * scales.double()[..., None]).reshape(values.shape).float()

    def forward(self, x):
        y = x.reshape(-1, x.shape[-1]).float() @ self.weight.t()
        return y.to(x.dtype).reshape(*x.shape[:-1], -1)


def unpack(words: torch.Tensor, bits: int, dim: int, order=None) -> torch.Tensor:
    """The unsigned `bits`-bit values of int32 `words` packed along `dim`:
    a word's i-th field from its lowest bits is value `order[i]` of its
    32 / bits (in order unless given)."""
    per_word = 32 // bits
    order = list(range(per_word)) if order is None else list(order)
    w = words.to(torch.int64) % 2**32   # the word as unsigned
    fields = torch.stack([(w >> (bits * i)) % 2**bits for i in range(per_word)], dim=-1)
    placed = torch.empty_like(fields)
    placed[..., order] = fields
    placed = placed.movedim(dim, -2)
    return placed.reshape(*placed.shape[:-2], -1).movedim(-1, dim)


def _weight_only_layers(tensors: dict, config: dict, dtype) -> dict:
    """{layer name: WeightOnlyLinear} of a compressed-tensors WNA16, GPTQ or
    AWQ checkpoint's `tensors`, its scales rounded to `dtype` as the served
    model holds them; the formats as quantized_checkpoint.py's docstring
    states them."""
    method = config["quant_method"]
    layers = {}
    for key in tensors:
        if method == "compressed-tensors" and key.endswith(".weight_packed"):
            name = key.removesuffix(".weight_packed")
            args = config["config_groups"]["group_0"]["weights"]
            bits, offset = args["num_bits"], 2 ** (args["num_bits"] - 1)
            values = unpack(tensors[key], bits, 1)
            zeros = (unpack(tensors[name + ".weight_zero_point"], bits, 0) if not args["symmetric"]
                     else offset)
            scales = tensors[name + ".weight_scale"]
        elif method == "gptq" and key.endswith(".qweight"):
            name = key.removesuffix(".qweight")
            values = unpack(tensors[key], 4, 0).t()
            zeros = (unpack(tensors[name + ".qzeros"], 4, 1) + 1).t()   # v1: zero - 1 stored
            scales = tensors[name + ".scales"].t()
        elif method == "awq" and key.endswith(".qweight"):
            name = key.removesuffix(".qweight")
            order = (0, 2, 4, 6, 1, 3, 5, 7)
            values = unpack(tensors[key], 4, 1, order).t()
            zeros = unpack(tensors[name + ".qzeros"], 4, 1, order).t()
            scales = tensors[name + ".scales"].t()
        else:
            continue
        layers[name] = WeightOnlyLinear(values, scales.to(dtype).float(), zeros)
    return layers


def load_weight_only(folder: str, checkpoint: str, dtype=torch.float16, attention: str = "sdpa") -> nn.Module:
    """HF's model of `folder` with its decoder linear layers those of the
    weight-only quantized `checkpoint` (compressed-tensors WNA16, GPTQ, AWQ)."""
    import json
    from safetensors.torch import load_file
    model = load(folder, None, dtype, attention)
    config = json.load(open(f"{checkpoint}/config.json"))["quantization_config"]
    layers = _weight_only_layers(load_file(f"{checkpoint}/model.safetensors"), config, dtype)
    for name, layer in layers.items():
        parent, child = name.rsplit(".", 1)
        setattr(model.get_submodule(parent), child, layer)
    return model


def forced_logprobs(model: nn.Module, prompt_ids: list[list[int]], continuations: list[list[int]]):
    """Each prompt's log-probabilities [steps, vocab] before each token of its
    continuation, teacher-forced as vLLM runs a lone request: the prompt in
    one forward, then a token a step through the KV cache (so a per-tensor
    activation scale spans what vLLM's step holds)."""
    out = []
    with torch.no_grad():
        for ids, continuation in zip(prompt_ids, continuations):
            step = model(torch.tensor([ids]), use_cache=True)
            rows = [step.logits[0, -1]]
            for token in continuation[:-1]:
                step = model(torch.tensor([[token]]), past_key_values=step.past_key_values, use_cache=True)
                rows.append(step.logits[0, -1])
            out.append(torch.stack(rows).float().log_softmax(-1))
    return out
