"""LoRA adapters in vLLM on `tpu`: the punica wrapper the captured step runs,
the adapters' weights as inputs of the step's program, and the checks an
adapter passes before it is served.

vLLM's LoRA layers add each token's adapter to a base layer's output through
the platform's "punica wrapper", from per-step metadata: each token's adapter
slot (-1: none). GPU kernels gather each token's own adapter; vLLM's CPU
wrapper runs torch ops with data-dependent shapes (unique_consecutive,
repeat_interleave) and reads the metadata on the host. A step here is one
captured program (worker.py), so `TpuPunicaWrapper` computes every slot for
every token and masks: x times all slots' A side by side (one matmul, max_loras
x rank wide), zeroed outside the token's slot, times all slots' B. That is
max_loras times the multiply-adds of each token's own adapter (small beside
the base layer at ranks of 8-64), with no gather and no shape that depends on
the batch, so one program serves any mix of adapters and none.

What the program reads per step are its inputs: the slots of the step's tokens
(padded with -1 to the token bucket) and, for embedding adapters, their rows'
offsets in the stacked embedding table; and the adapters' stacked weights,
which would otherwise be constants held as captured. vLLM writes an adapter
into its slot one sliced copy at a time, a program per slot and rank; here
`activate_adapter` writes into host copies and each stacked tensor is
uploaded whole, a transfer and no program, so a new adapter compiles nothing.

The adapters served are those whose rank fits max_lora_rank and whose targets
the tests cover (`TESTED_TARGETS`); `check_adapter` refuses any other before
it reaches a step, naming it: in the front end (a request's or
/v1/load_lora_adapter's error, a 400) and in the worker (add_lora).
"""
import functools
import os

import torch
from vllm.exceptions import LoRAAdapterNotFoundError, VLLMValidationError
from vllm.lora.punica_wrapper.punica_base import PunicaWrapperBase

# The modules whose adapters give HF + PEFT's tokens (tests_vllm/test_lora.py).
# lm_head is not among them: its adapter would also have to apply to the
# logits of prompt logprobs, which are computed outside the step.
TESTED_TARGETS = ("down_proj", "embed_tokens", "gate_proj", "k_proj", "o_proj", "q_proj",
                  "up_proj", "v_proj")

# vLLM's LoRA layers whose punica calls TpuPunicaWrapper implements, and the
# attributes where they keep their stacked weights.
_LAYERS = ("ColumnParallelLinearWithLoRA", "LogitsProcessorWithLoRA",
           "MergedColumnParallelLinearWithLoRA", "MergedQKVParallelLinearWithLoRA",
           "QKVParallelLinearWithLoRA", "ReplicatedLinearWithLoRA", "RowParallelLinearWithLoRA",
           "VocabParallelEmbeddingWithLoRA")
_STACKED = ("lora_a_stacked", "lora_b_stacked")


def _describe(lora_request) -> str:
    return f"LoRA adapter {lora_request.lora_name!r} ({lora_request.lora_path})"


def _targets(path: str) -> set[str]:
    """The module names (last component) an adapter's weights adapt."""
    from vllm.lora.utils import is_base_embedding_weights, parse_fine_tuned_lora_name
    tensors = os.path.join(path, "adapter_model.safetensors")
    if os.path.isfile(tensors):
        import safetensors
        with safetensors.safe_open(tensors, framework="pt") as f:
            names = list(f.keys())
    else:
        names = []
        for file in ("adapter_model.bin", "adapter_model.pt"):
            if os.path.isfile(os.path.join(path, file)):
                names = list(torch.load(os.path.join(path, file), map_location="cpu", weights_only=True))
                break
    return {parse_fine_tuned_lora_name(n)[0].rsplit(".", 1)[-1] for n in names
            if not is_base_embedding_weights(n) and "base_layer" not in n}


@functools.lru_cache(maxsize=256)
def _check_cached(name: str, lora_path: str, max_rank: int, mtime: float) -> None:
    from vllm.lora.peft_helper import PEFTHelper

    helper = PEFTHelper.from_local_dir(lora_path, None)
    problems = []
    rank = max([helper.r, *helper.rank_pattern.values()])
    if rank > max_rank:
        problems.append(f"its rank {rank} is greater than max_lora_rank {max_rank}")
    if helper.bias != "none":
        problems.append(f"its bias {helper.bias!r} is not supported")
    untested = sorted(_targets(lora_path) - set(TESTED_TARGETS))
    if untested:
        problems.append(f"it adapts {', '.join(untested)}, which vLLM on tpu does not serve "
                        f"(tested: {', '.join(TESTED_TARGETS)})")
    if problems:
        raise VLLMValidationError(f"{name}: {'; '.join(problems)}", parameter="lora")


def check_adapter(lora_request, lora_config) -> None:
    """Refuses an adapter that vLLM on tpu would not serve right, naming it
    and why (a VLLMValidationError: a 400 from the server), or one that is
    not there (vLLM's LoRAAdapterNotFoundError: a 404)."""
    from vllm.lora.utils import get_adapter_absolute_path

    path = get_adapter_absolute_path(lora_request.lora_path)
    config = os.path.join(path, "adapter_config.json")
    if not os.path.isfile(config):
        raise LoRAAdapterNotFoundError(lora_request.lora_name, lora_request.lora_path)
    _check_cached(_describe(lora_request), path, lora_config.max_lora_rank, os.path.getmtime(config))


def install_front_end_checks() -> None:
    """Checks each adapter where vLLM's front end takes it: a generation
    request's (InputProcessor._validate_lora: the request fails, a 400 from
    the server, before the engine sees it) and /v1/load_lora_adapter's
    (vLLM answers a failed load with a 500; a refused adapter is a 400)."""
    from vllm.v1.engine.input_processor import InputProcessor
    if getattr(InputProcessor._validate_lora, "_tpu_checked", False):
        return
    validate = InputProcessor._validate_lora

    def _validate_lora(self, lora_request):
        validate(self, lora_request)
        if lora_request is not None:
            check_adapter(lora_request, self.lora_config)

    _validate_lora._tpu_checked = True
    InputProcessor._validate_lora = _validate_lora

    from vllm.entrypoints.openai.models.serving import OpenAIServingModels
    from vllm.entrypoints.serve.exception_handling.error_response import create_error_response
    from vllm.lora.request import LoRARequest
    load = OpenAIServingModels.load_lora_adapter

    async def load_lora_adapter(self, request, base_model_name=None):
        if request.lora_name and request.lora_path:
            try:
                check_adapter(LoRARequest(request.lora_name, 1, request.lora_path),
                              self.engine_client.vllm_config.lora_config)
            except (LoRAAdapterNotFoundError, VLLMValidationError) as e:
                return create_error_response(e)
        return await load(self, request, base_model_name)

    OpenAIServingModels.load_lora_adapter = load_lora_adapter


class TpuPunicaWrapper(PunicaWrapperBase):
    """vLLM's punica interface for a captured step: each token's slot is a
    step input (`step_inputs`), and every slot is computed and masked (module
    docstring). Adapters on lm_head are refused when loaded (TESTED_TARGETS),
    so the logits get none."""

    def __init__(self, max_num_batched_tokens: int, max_batches: int, device, **kwargs):
        # vLLM's index buffers, on the runner's device (the host); unused here.
        super().__init__(max_num_batched_tokens, max_batches, "cpu")
        self._host_slots = torch.empty(0, dtype=torch.long)   # this mapping's tokens' slots
        self._vocab_size = 0
        self._slots = None                 # the step's input: each token's slot, -1 padded
        self._embeddings_indices = None    # the step's input: each token's row offset (vLLM's name)

    def update_metadata(self, mapping, lora_index_to_id, max_loras, vocab_size, **kwargs):
        slot_of = {lora_id: i for i, lora_id in enumerate(lora_index_to_id) if lora_id is not None}
        self._host_slots = torch.tensor([slot_of[i] if i > 0 else -1 for i in mapping.index_mapping],
                                        dtype=torch.long)
        self._vocab_size = vocab_size
        self.is_prefill = True

    def step_inputs(self, num_tokens: int, device) -> list[torch.Tensor]:
        """The step's slot inputs for `num_tokens` (padded) tokens, which
        the LoRA layers read from here while a step is captured."""
        if len(self._host_slots) > num_tokens:
            raise RuntimeError(f"vLLM on tpu: a LoRA mapping of {len(self._host_slots)} tokens "
                               f"for a step of {num_tokens}")
        slots = torch.full((num_tokens,), -1, dtype=torch.long)
        slots[: len(self._host_slots)] = self._host_slots
        offsets = slots.clamp(min=0) * self._vocab_size
        self._slots, self._embeddings_indices = slots.to(device), offsets.to(device)
        return [self._slots, self._embeddings_indices]

    def _mask(self, num_slots: int, rank: int, dtype) -> torch.Tensor:
        """[tokens, num_slots x rank]: 1 in the columns of the token's slot."""
        slots = torch.arange(num_slots, device=self._slots.device)
        return (self._slots[:, None] == slots).repeat_interleave(rank, dim=1).to(dtype)

    def _expand(self, shrunk: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Masked [tokens, slots x rank] times every slot's B ([slots, 1, out, rank])."""
        num_slots, _, out, rank = b.shape
        masked = shrunk * self._mask(num_slots, rank, shrunk.dtype)
        return masked @ b[:, 0].transpose(1, 2).reshape(num_slots * rank, out).to(shrunk.dtype)

    def add_lora_linear(self, y, x, lora_a_stacked, lora_b_stacked, scale, output_slices, *,
                        buffer=None, **kwargs):
        deltas = []
        for a, b in zip(lora_a_stacked, lora_b_stacked):
            num_slots, _, rank, n_in = a.shape
            shrunk = x @ a.reshape(num_slots * rank, n_in).t().to(x.dtype)
            deltas.append(self._expand(shrunk * scale if scale != 1.0 else shrunk, b))
        delta = deltas[0] if len(deltas) == 1 else torch.cat(deltas, dim=1)
        y.add_(delta.to(y.dtype))
        return y

    def add_lora_embedding(self, y, x, lora_b_stacked, add_inputs=True, **kwargs):
        # x: each token's row of A from its own slot (the layer gathered it
        # through _embeddings_indices), repeated in every slot's columns.
        num_slots = lora_b_stacked.shape[0]
        delta = self._expand(x.to(y.dtype).repeat(1, num_slots), lora_b_stacked)
        if add_inputs:
            y.add_(delta)
        else:
            y.copy_(delta)
        return y

    def add_lora_logits(self, y, x, lora_a_stacked, lora_b_stacked, scale, *, buffer=None,
                        **kwargs):
        return y

    def add_shrink(self, y, x, lora_a_stacked, scale, **kwargs):
        raise NotImplementedError("vLLM on tpu: fully sharded LoRA layers are not supported")

    def add_expand(self, y, x, lora_b_stacked, output_slices, offset_start=0, add_inputs=True,
                   **kwargs):
        raise NotImplementedError("vLLM on tpu: fully sharded LoRA layers are not supported")

    def apply_lora_full_linear(self, y, x, weight_stacked, bias_stacked, module_enabled):
        raise NotImplementedError("vLLM on tpu: LoRA classification heads are not supported")


class StepLoRA:
    """The runner's side of LoRA: the step inputs (slots and stacked
    weights) and the adapters' host-staged activation."""

    def __init__(self, runner):
        self.manager = manager = runner.lora_manager._adapter_manager
        self.lora_config = runner.lora_config
        wrappers = set(map(id, manager.punica_wrapper_mapping.values()))
        self.wrapper = next(iter(manager.punica_wrapper_mapping.values()))
        if len(wrappers) != 1 or not isinstance(self.wrapper, TpuPunicaWrapper):
            raise NotImplementedError("vLLM on tpu: LoRA needs one TpuPunicaWrapper "
                                      f"(got {manager.punica_wrapper_mapping})")
        layers = {type(m).__name__ for m in manager.modules.values()}
        other = sorted(layers - set(_LAYERS))
        if other:
            raise NotImplementedError(f"vLLM on tpu does not support LoRA layers {', '.join(other)}")
        self.modules = list(manager.modules.values())
        self.weights = [t for m in self.modules for name in _STACKED for t in _tensors(getattr(m, name))]
        self._host = {id(t): t.cpu() for t in self.weights}
        activate = manager.activate_adapter
        manager.activate_adapter = functools.partial(self._activate, activate)
        load = runner.lora_manager._load_adapter

        def load_adapter(lora_request):
            check_adapter(lora_request, self.lora_config)
            return load(lora_request)

        runner.lora_manager._load_adapter = load_adapter

    def step_inputs(self, num_tokens: int, device) -> list[torch.Tensor]:
        return self.wrapper.step_inputs(num_tokens, device) + self.weights

    def _activate(self, activate, lora_id):
        """vLLM's activate_adapter on host copies of the stacked weights,
        then each uploaded whole (module docstring). vLLM activates every
        request's adapter every step; one already in its slot writes nothing."""
        if lora_id in self.manager._active_adapters:
            return activate(lora_id)   # vLLM's LRU order only
        on_device = [(m, name, getattr(m, name)) for m in self.modules for name in _STACKED]
        for m, name, value in on_device:
            setattr(m, name, _map(value, lambda t: self._host[id(t)]))
        try:
            result = activate(lora_id)
        finally:
            for m, name, value in on_device:
                setattr(m, name, value)
        for t in self.weights:
            t.copy_(self._host[id(t)])
        return result


def _tensors(value) -> list[torch.Tensor]:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def _map(value, fn):
    return type(value)(fn(t) for t in value) if isinstance(value, (tuple, list)) else fn(value)
