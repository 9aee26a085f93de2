"""Sampling on `tpu` for vLLM's steps.

Every step's program ends with each sampled row's token (`token_ids`), beside
the logits. The rows' sampling parameters are inputs of the program
(`step_inputs`), so one program serves any mix of greedy and random
requests; a step whose rows are all greedy passes none (`greedy_inputs`) and
runs a second program of the bucket that only takes the argmax: the random
rows' sort and filtering cost milliseconds a step that greedy serving would
pay for nothing. The warm-up compiles both. When nothing of the
step needs more than those tokens (`on_device`), only the token ids come to
the host and vLLM gets them as its sampler's output (`output`); any other
step leaves them unread and samples the logits on the host, through vLLM's
sampler.

The tokens follow vLLM's sampler: a row whose temperature is below vLLM's
epsilon takes the argmax of its logits (ties at the lowest index, as
torch.argmax on the CPU); any other row divides its float32 logits by its
temperature, masks the tokens below min-p times the likeliest one's
probability, then those outside its top-k and its top-p (on the logits
sorted ascending, as vLLM's PyTorch top-k/top-p: a value threshold, so ties
at the cut stay in), and draws from the rest with the Gumbel-max trick:
argmax(logits + Gumbel noise) is a draw from their softmax.

The noise is counter-based, one 64-bit key a row: SplitMix64's output for
the key's stream at each token index, 23 bits of it a uniform in (0, 1).
A request with a seed keys its row by (seed, the position of the token it
samples), so its tokens depend on nothing else: not the batch around it,
not its row, not whether an earlier step of the batch was sampled on the
host (vLLM's per-request generator is not used, and not advanced). A
request without one keys its row from torch_tpu's Philox generator,
drawn inside the program: a fresh key every launch, repeatable under
torch.manual_seed.

A processor that can change the argmax (vLLM's "non-argmax-invariant"
ones) is harmless only while no request uses it: vLLM's built-in min-tokens
and logit-bias processors say so by their empty state; any other processor
keeps the host path. Of the argmax-invariant processors, which matter only
to random rows, min-p is done here; any other keeps a step with random rows
on the host.
"""
import numpy as np
import torch
from vllm.v1.outputs import SamplerOutput
from vllm.v1.sample.logits_processor.builtin import (
    LogitBiasLogitsProcessor,
    MinPLogitsProcessor,
    MinTokensLogitsProcessor,
)

# vllm_config.additional_config's key that turns sampling on the device off
# (benchmarks/serving.py --host-sampling, to compare).
OPTION = "torch_tpu_device_sampling"

# vLLM's sampler's: a temperature below it is greedy.
_SAMPLING_EPS = 1e-5

# The columns of the step's two parameter inputs, one row per sampled row.
FLOAT_PARAMS = ("temperature", "top_p", "min_p")
INT_PARAMS = ("top_k", "seeded", "seed", "position")

_U64 = 1 << 64
# SplitMix64's constants, as the int64 values of their bits.
_GOLDEN = 0x9E3779B97F4A7C15 - _U64
_MIX1 = 0xBF58476D1CE4E5B9 - _U64
_MIX2 = 0x94D049BB133111EB - _U64


def enabled(vllm_config) -> bool:
    option = (vllm_config.additional_config or {}).get(OPTION, True)
    if not isinstance(option, bool):
        raise ValueError(f"vLLM on tpu: additional_config[{OPTION!r}] must be true or false, "
                         f"got {option!r}")
    return option


def _int64(value: int) -> int:
    """The int64 whose bits are `value` modulo 2**64 (a seed may be any int)."""
    value %= _U64
    return value - _U64 if value >= 1 << 63 else value


def step_inputs(batch, requests: dict, num_scheduled: dict, rows: int):
    """The step's sampling parameters as two host tensors of `rows` rows
    (FLOAT_PARAMS float32, INT_PARAMS int64): the batch's requests first,
    in vLLM's row order, then padding rows, which are greedy. `batch` is
    vLLM's InputBatch, `requests` the runner's request states by id and
    `num_scheduled` the step's token count of each request."""
    n = batch.num_reqs
    floats, ints = placeholder_inputs(rows, batch.vocab_size)
    floats[:n, 0] = torch.from_numpy(batch.temperature_cpu[:n])
    floats[:n, 1] = torch.from_numpy(batch.top_p_cpu[:n])
    min_p = _min_p(batch)
    if min_p is not None:
        floats[:n, 2] = torch.from_numpy(min_p[:n])
    if bool((floats[:n, 0] < _SAMPLING_EPS).all()):
        return greedy_inputs()
    ints[:n, 0] = torch.from_numpy(batch.top_k_cpu[:n].astype(np.int64))
    for row in batch.generators:   # the rows of the requests with a seed
        req_id = batch.req_ids[row]
        # The position of the token the step samples for the request.
        position = int(batch.num_computed_tokens_cpu[row]) + num_scheduled[req_id]
        ints[row, 1:] = torch.tensor([1, _int64(requests[req_id].sampling_params.seed), position])
    return floats, ints


def placeholder_inputs(rows: int, vocab: int):
    """Parameters of `rows` greedy rows without top-k, top-p or min-p (the
    warm-up's steps; a step's padding rows)."""
    floats = torch.zeros(rows, len(FLOAT_PARAMS), dtype=torch.float32)
    floats[:, 1] = 1.0
    ints = torch.zeros(rows, len(INT_PARAMS), dtype=torch.int64)
    ints[:, 0] = vocab
    return floats, ints


def greedy_inputs():
    """The parameters of a step whose rows are all greedy: none (0 rows)."""
    return (torch.zeros(0, len(FLOAT_PARAMS), dtype=torch.float32),
            torch.zeros(0, len(INT_PARAMS), dtype=torch.int64))


def _min_p(batch):
    for processor in batch.logitsprocs.argmax_invariant:
        if isinstance(processor, MinPLogitsProcessor):
            return processor.min_p_cpu
    return None


def _shift_right(z: torch.Tensor, bits: int) -> torch.Tensor:
    # A logical shift of int64 bits (`>>` on int64 is arithmetic).
    return (z >> bits) & ((1 << (64 - bits)) - 1)


def _mix64(z: torch.Tensor) -> torch.Tensor:
    """SplitMix64's finalizer (a bijection of 64 bits), in int64 arithmetic,
    which wraps."""
    z = (z ^ _shift_right(z, 30)) * _MIX1
    z = (z ^ _shift_right(z, 27)) * _MIX2
    return z ^ _shift_right(z, 31)


def row_keys(ints: torch.Tensor) -> torch.Tensor:
    """Each row's key: (seed, position) hashed for a seeded row, a draw of
    torch_tpu's generator for any other."""
    _, seeded, seed, position = ints.unbind(1)
    drawn = torch.randint(-(1 << 63), (1 << 63) - 1, seeded.shape, dtype=torch.int64,
                          device=ints.device)
    return torch.where(seeded != 0, _mix64(_mix64(seed) + position * _GOLDEN), drawn)


def uniform_noise(keys: torch.Tensor, vocab: int) -> torch.Tensor:
    """A float32 uniform in (0, 1) per (row, token): the top 23 bits of
    SplitMix64's output at the token's index in the stream of the row's key,
    centred in its interval so that neither 0 nor 1 occurs (k + 1/2 is exact
    in float32's 24 bits)."""
    steps = torch.arange(1, vocab + 1, dtype=torch.int64, device=keys.device) * _GOLDEN
    bits = _shift_right(_mix64(keys[:, None] + steps), 41)
    return (bits.to(torch.float32) + 0.5) * (2.0 ** -23)


def filtered_logits(logits: torch.Tensor, floats: torch.Tensor, ints: torch.Tensor) -> torch.Tensor:
    """The float32 logits a random row draws from: divided by the row's
    temperature, then min-p, top-k and top-p masked to -inf (module
    docstring)."""
    temperature, top_p, min_p = floats.unbind(1)
    top_k = ints[:, 0]
    x = logits.float() / torch.where(temperature < _SAMPLING_EPS, 1.0, temperature)[:, None]
    probs = x.softmax(dim=-1)
    x = x.masked_fill(probs < probs.amax(dim=-1, keepdim=True) * min_p[:, None], float("-inf"))
    ascending = x.sort(dim=-1).values
    kth = ascending.gather(1, (x.shape[1] - top_k)[:, None])
    ascending = ascending.masked_fill(ascending < kth, float("-inf"))
    cumulative = ascending.softmax(dim=-1).cumsum(dim=-1)
    # top-p drops the ascending prefix whose mass is at most 1 - p, never the last token.
    dropped = (cumulative[:, :-1] <= (1 - top_p)[:, None]).sum(dim=-1)
    threshold = ascending.gather(1, dropped[:, None])
    return x.masked_fill(x < threshold, float("-inf"))


def token_ids(logits: torch.Tensor, floats: torch.Tensor, ints: torch.Tensor) -> torch.Tensor:
    """Each row's token (the step's program computes them on `tpu`): the
    argmax for a greedy row, a draw for any other."""
    greedy = logits.argmax(dim=-1)
    if floats.shape[0] == 0:   # greedy_inputs: every row greedy
        return greedy
    x = filtered_logits(logits, floats, ints)
    gumbel = -torch.log(-torch.log(uniform_noise(row_keys(ints), x.shape[1])))
    drawn = (x + gumbel).argmax(dim=-1)
    return torch.where(floats[:, 0] < _SAMPLING_EPS, greedy, drawn)


def _idle_processor(processor) -> bool:
    if isinstance(processor, MinTokensLogitsProcessor):
        return not processor.min_toks
    if isinstance(processor, LogitBiasLogitsProcessor):
        return not processor.biases
    return False


def _thinking_budget(meta) -> bool:
    holder = meta.thinking_budget_state_holder
    return holder is not None and holder.has_tracked_requests()


def on_device(meta, num_prompt_logprobs, grammar_output, spec_decode_metadata) -> bool:
    """Whether the program's tokens are what vLLM's sampler would draw:
    nothing asked of the logits beyond the temperature, top-k, top-p and
    min-p the program applies. `meta` is vLLM's SamplingMetadata of the
    step, `num_prompt_logprobs` the runner's requests that want prompt
    logprobs."""
    return ((meta.all_greedy
             or all(isinstance(p, MinPLogitsProcessor) for p in meta.logitsprocs.argmax_invariant))
            and meta.max_num_logprobs is None
            and not meta.logprob_token_ids
            and not num_prompt_logprobs
            and meta.no_penalties
            and meta.allowed_token_ids_mask is None
            and not meta.bad_words_token_ids
            and not _thinking_budget(meta)
            and all(_idle_processor(p) for p in meta.logitsprocs.non_argmax_invariant)
            and grammar_output is None
            and spec_decode_metadata is None)


def output(token_ids: torch.Tensor) -> SamplerOutput:
    """vLLM's sampler output for the step's tokens (host, one row each)."""
    return SamplerOutput(sampled_token_ids=token_ids.to(torch.int32).unsqueeze(-1),
                         logprobs_tensors=None)
