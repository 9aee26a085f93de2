"""Greedy sampling on `tpu` for vLLM's steps.

Every step's program ends with the argmax of its sampled rows' logits
(`greedy_token_ids`), beside the logits themselves: one program per bucket
whichever way the step is sampled. When nothing of the step needs more than
that argmax (`device_greedy`), only the token ids come to the host and vLLM
gets them as its sampler's output (`greedy_output`); any other step leaves
them unread and samples the logits on the host, through vLLM's sampler.

vLLM's sampler, on an all-greedy batch without logprobs, takes the argmax of
the float32 logits after its logits processors; the argmax on `tpu` breaks
ties at the lowest index, as torch.argmax on the CPU does. A processor that
can change the argmax (vLLM's "non-argmax-invariant" ones) is harmless only
while no request uses it: vLLM's built-in min-tokens and logit-bias
processors say so by their empty state; any other processor keeps the host
path.
"""
import torch
from vllm.v1.outputs import SamplerOutput
from vllm.v1.sample.logits_processor.builtin import (
    LogitBiasLogitsProcessor,
    MinTokensLogitsProcessor,
)

# vllm_config.additional_config's key that turns greedy sampling on the
# device off (benchmarks/serving.py --host-sampling, to compare).
OPTION = "torch_tpu_device_sampling"


def enabled(vllm_config) -> bool:
    option = (vllm_config.additional_config or {}).get(OPTION, True)
    if not isinstance(option, bool):
        raise ValueError(f"vLLM on tpu: additional_config[{OPTION!r}] must be true or false, "
                         f"got {option!r}")
    return option


def greedy_token_ids(logits: torch.Tensor) -> torch.Tensor:
    """Each row's argmax (the step's program computes it on `tpu`)."""
    return logits.argmax(dim=-1)


def _idle_processor(processor) -> bool:
    if isinstance(processor, MinTokensLogitsProcessor):
        return not processor.min_toks
    if isinstance(processor, LogitBiasLogitsProcessor):
        return not processor.biases
    return False


def _thinking_budget(meta) -> bool:
    holder = meta.thinking_budget_state_holder
    return holder is not None and holder.has_tracked_requests()


def device_greedy(meta, num_prompt_logprobs, grammar_output, spec_decode_metadata) -> bool:
    """Whether the step's argmax is what vLLM's sampler would give: every
    request greedy, and nothing asked of the logits beyond their argmax.
    `meta` is vLLM's SamplingMetadata of the step, `num_prompt_logprobs` the
    runner's requests that want prompt logprobs."""
    return (meta.all_greedy
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


def greedy_output(token_ids: torch.Tensor) -> SamplerOutput:
    """vLLM's sampler output for the step's greedy tokens (host, one row each)."""
    return SamplerOutput(sampled_token_ids=token_ids.to(torch.int32).unsqueeze(-1),
                         logprobs_tensors=None)
