"""The worker and model runner of vLLM on `tpu`.

vLLM's CPU model runner prepares every step on the host (scheduling state,
block tables, slot mappings, sampling metadata), as a TPU runner does; this
runner keeps that and moves what is computed to `tpu`: the model's weights (vLLM
builds the model on the platform's device), the KV cache, the forward pass and
the logits, and the sampling (greedy, temperature, top-k, top-p, min-p,
seeds: sampling.py). A step that asks for more (logprobs, penalties...) is
sampled on the logits copied back to the host, through vLLM's own sampler.

A step's device work is one program whose shapes depend on the padded token
count and the padded key length alone (buckets.py): the sampled rows are
padded to a count fixed by the token bucket, and so are the freshly allocated
cache blocks the step zeroes first, so neither adds a size. The program is
captured, as vLLM captures CUDA graphs: the first step of a bucket runs the
model's Python once in torch_tpu's tracing mode, and every later step of that
bucket launches the program on its new inputs (token ids, positions, the
attention metadata, the blocks to zero, the sampled rows) without running the
model's Python again. The buckets are enumerable from the limits, and the
warm-up (`TpuModelRunner.warm_up`) captures each at start-up through the calls
a real step makes, so that serving compiles nothing new; the programs land in
torch_tpu's persistent cache, so the next start loads them instead of
compiling.

With vLLM's async scheduling (its default), the engine schedules step N+1
before it has step N's tokens. GPUModelRunner's own async mode keeps the
sampled tokens on the device with CUDA streams and events; this runner samples
on the host, so it keeps the synchronous bookkeeping and defers the sampling
instead: `sample_tokens` returns a `DeferredSample` at once, and step N is
sampled when its output is asked for or when step N+1 starts, whichever comes
first. XLA's CPU plugin runs a program inline on the thread that launches
it once its inputs are ready, so a launch from the engine's thread would
return only when the step is done; with async scheduling the runner launches
the step's program on a thread of its own instead (`_launcher`), and the
engine's thread goes on with step N-1's output and the scheduling of step
N+1 while the program runs. A step launched ahead hands vLLM a host
placeholder for its hidden states (vLLM only gathers the sampled rows from
it before sampling) and a Future for its logits; sampling waits for the
Future and puts the real hidden states back before vLLM reads them (prompt
logprobs). Nothing else touches the KV caches, which the program writes,
before the next step waits for it.

A step sampled on the device goes further, as vLLM's GPU runner does with
async scheduling: the runner does not wait for its tokens before preparing
the next step. vLLM's bookkeeping then records placeholders (its
`use_async_scheduling` mode), and where the next step's input ids take a
token of this step, the host writes a marker, -(row + 2), that the next
step's program replaces with this step's token from its row (`_patch_ids`),
on the device: the engine's thread prepares and uploads step N+1 while step
N runs, and the launcher runs N+1 after N. The markers never reach the
model; a placeholder (-1) left in the ids is an error, not a token. The
host gets the tokens when vLLM asks for the step's output (`StepOutput`).
"""
import contextlib
import dataclasses
import functools
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

import torch
from torch.utils._pytree import tree_map_only
import torch_tpu
from torch_tpu.compile.capture import CapturedFunction
import vllm.envs as envs
from vllm.forward_context import get_forward_context, set_forward_context
from vllm.logger import init_logger
from vllm.utils.torch_utils import set_random_seed
from vllm.v1.worker.cpu_model_runner import CPUModelRunner
from vllm.v1.worker.cpu_worker import CPUWorker
from vllm.v1.worker.gpu_worker import Worker, init_worker_distributed_environment
from vllm.v1.worker.utils import bind_kv_cache
from vllm.v1.worker.worker_base import CompilationTimes

from . import communicator, fp8, int8, lora, memory, moe, multimodal, pipeline, sampling, wna16
from .attention import METADATA_TENSORS, TpuPagedAttentionBackend, warmup_metadata
from .buckets import query_layout, step_buckets, token_bucket
from .step_outputs import DeferredSample, StepOutput, step_tokens

# Under vLLM's logger, so that its level and format apply.
logger = init_logger(f"vllm.{__name__}")


# The step program's input holding the last step's tokens, after the ids,
# positions, blocks to zero and sampled rows (_run_step, _step_work).
_PREV_IDS = 4
# Seconds a thread holds the GIL while another waits for it, in a process
# that launches steps ahead (TpuModelRunner.__init__); Python's default is 5 ms.
_SWITCH_INTERVAL = 0.0005
# The nice value of the CPU plugin's worker threads in a serving process
# (TpuWorker.init_device; TORCH_TPU_DEVICE_THREAD_NICE overrides it). On the
# benchmark's 2 cores, 5 and 10 served 7% more tokens/s than 0, 19 4%.
_DEVICE_THREAD_NICE = 5


def _device() -> torch.device:
    return torch.device("tpu", torch.tpu.current_device())


class _HostFacing:
    """A model on tpu that vLLM calls with host tensors and that answers with
    host tensors: a speculative drafter's model (vLLM's proposers keep their
    buffers on the runner's device, which is the host). Its forward runs op by
    op, not captured."""

    def __init__(self, model, device):
        self.__dict__.update(_model=model, _device=device)

    def __getattr__(self, name):
        return getattr(self._model, name)

    def __call__(self, **kwargs):
        out = self._model(**tree_map_only(torch.Tensor, lambda t: t.to(self._device), kwargs))
        return tree_map_only(torch.Tensor, lambda t: t.cpu(), out)

    def compute_logits(self, hidden_states):
        return self._model.compute_logits(hidden_states.to(self._device)).cpu()

    def embed_input_ids(self, input_ids, *args, **kwargs):
        return self._model.embed_input_ids(input_ids.to(self._device), *args, **kwargs).cpu()


@contextlib.contextmanager
def _synchronous_runner(scheduler_config):
    """GPUModelRunner.__init__ as without async scheduling (no CUDA streams or
    events, which a CPU torch cannot make); the engine keeps its setting."""
    ahead = scheduler_config.async_scheduling
    scheduler_config.async_scheduling = False
    try:
        yield bool(ahead)
    finally:
        scheduler_config.async_scheduling = ahead


class TpuModelRunner(CPUModelRunner):
    def __init__(self, vllm_config, device):
        with _synchronous_runner(vllm_config.scheduler_config) as ahead:
            super().__init__(vllm_config, device)   # host buffers: `device` is the CPU
        self._scheduled_ahead = ahead   # vLLM's async scheduling: sample lazily
        self._pending_sample = None     # the last step's DeferredSample, if not yet sampled
        self.tpu = _device()
        self._sampled_rows = None   # rows of this step's logits that are real
        self._fresh_blocks = []     # blocks to zero in the next step's program
        self._logits_indices = None  # this step's padded rows to sample (host)
        self._step_logits = None    # the logits the step's program computed (or their Future)
        self._step_token_ids = None  # their argmax, on tpu (sampling.py), unless launched ahead
        self._device_sampling = sampling.enabled(vllm_config)
        self._sampling_params = None  # this step's sampling inputs (host, sampling.py)
        self._step_sampling = None  # the same on tpu, which _step_work reads
        self._device_ids = None     # the step's tokens sampled on tpu, on the host, for _sample
        self.sampled_steps = {"device": 0, "host": 0}   # where steps were sampled (tests, benchmarks)
        self.patched_steps = 0      # steps whose ids took the last step's tokens on tpu (tests)
        self._step = CapturedFunction(self._step_work, "vLLM's step on tpu")
        # The step's program launched off the engine's thread (module
        # docstring), only for signatures already run (and so captured) on
        # the engine's thread: a capture runs the model's Python, which
        # reads vLLM's forward context.
        self._launcher = ThreadPoolExecutor(1, "torch_tpu-vllm-step") if ahead else None
        if ahead:
            # The launcher takes the GIL back when a step's program ends,
            # while the engine's thread is busy in Python preparing the
            # next step: by default it waited up to 5 ms for it.
            sys.setswitchinterval(min(sys.getswitchinterval(), _SWITCH_INTERVAL))
        self._launched = None       # the Future of the step launched ahead: [hidden, logits, token ids]
        self._launch_ahead = False  # inside execute_model, with a launcher
        self._hidden_types = {}     # step input signature -> its hidden states' (shape, dtype)
        # Steps sampled on the device leave their tokens there (module
        # docstring): vLLM's bookkeeping in its async mode, where every
        # step's inputs come from this runner's own program.
        self._ids_width = self._max_sampled_rows(self.max_num_tokens)
        self._tokens_ahead = ahead and self._device_sampling and not (
            self.lora_config or self.speculative_config or self.model_config.is_multimodal_model
            or self.model_config.enable_prompt_embeds or envs.VLLM_COMPUTE_NANS_IN_LOGITS
            or vllm_config.parallel_config.pipeline_parallel_size > 1)
        self.use_async_scheduling = self._tokens_ahead
        self._prev_ids = None       # the last step's tokens if sampled on the device (tpu tensor or Future)
        self._booked = None         # (sampler output, invalid rows) of the step vLLM just booked
        self._no_prev_ids = None    # the program's input where no step's tokens are patched in
        self._patch_from = None     # the last step's tokens for this step's markers (_prepare_inputs)

    def load_model(self, load_dummy_weights: bool = False) -> None:
        moe.register()   # before the model's FusedMoE layers pick their method
        fp8.register()   # before its linear layers pick their fp8 kernels
        int8.register()  # and their int8 ones
        communicator.register()  # quantization's load-time collectives
        wna16.register()  # and their weight-only integer kernels
        super().load_model(load_dummy_weights)
        where = {p.device.type for p in self.model.parameters()}
        if where != {"tpu"}:
            raise RuntimeError(f"vLLM on tpu: the model's weights were placed on {sorted(where)}")
        self._stage = pipeline.Stage(self)   # what the step takes and hands on
        # As loaded, the merged weights (qkv, gate/up: vLLM writes their
        # shards through views) reached the step's program as byte buffers
        # that it reinterpreted every step (a copy of each weight per step,
        # in the optimized HLO); a copy of each weight made once stores it in
        # its own dtype.
        with torch.no_grad():
            for param in self.model.parameters():   # tied weights are one Parameter
                param.data = param.data.clone()
        torch.tpu.synchronize()
        self._compute_logits = compute_logits = self.model.compute_logits

        # The step's program has computed the sampled rows' logits already
        # (_model_forward): vLLM's execute_model gets them still on tpu, so
        # that it returns without waiting for the program; they come to the
        # host when the step is sampled (_sample_on_host). Other calls
        # (prompt logprobs, during sampling) compute theirs, on the host.
        def step_logits(hidden_states):
            logits, self._step_logits = self._step_logits, None
            if logits is None:
                logits = compute_logits(hidden_states.to(self.tpu)).cpu()
            return logits

        self.model.compute_logits = step_logits

        if self.model_config.is_multimodal_model:
            multimodal.install(self.model, self.tpu)   # images encoded on tpu
        # With prompt embeddings (and multimodal models), vLLM embeds the
        # steps' token ids itself, from its host buffer of ids into its host
        # buffer of embeddings.
        embed_input_ids = self.model.embed_input_ids

        def embed_on_host(input_ids, *args, **kwargs):
            return embed_input_ids(input_ids.to(self.tpu), *args, **kwargs).cpu()

        self.model.embed_input_ids = embed_on_host

        drafter = getattr(self, "drafter", None)
        if getattr(drafter, "model", None) is not None:
            drafter.model = _HostFacing(drafter.model, self.tpu)
        # LoRA: the adapters' slots and weights are inputs of the step (lora.py).
        self._lora = lora.StepLoRA(self) if self.lora_config else None

    def _lora_inputs(self, num_tokens: int) -> list:
        return [] if self._lora is None else self._lora.step_inputs(num_tokens, self.tpu)

    def execute_model(self, *args, **kwargs):
        self._sample_pending()
        # The step's program is _run_step's; the little vLLM adds around it on
        # tpu tensors (it gathers the sampled rows' hidden states, unless the
        # step was launched ahead) is fused into one more launch rather than
        # run op by op.
        self._launch_ahead = self._launcher is not None
        try:
            with torch_tpu.eager_mode("defer_and_fuse"):
                return super().execute_model(*args, **kwargs)
        finally:
            self._launch_ahead = False

    def sample_tokens(self, grammar_output):
        self._sample_pending()
        if self._tokens_ahead and self._sampled_on_device(grammar_output):
            return self._book(grammar_output, self._tokens_on_device())
        sample = functools.partial(self._sample_on_host, grammar_output)
        if not self._scheduled_ahead:
            return sample()
        self._pending_sample = DeferredSample(sample)
        return self._pending_sample

    def _sampled_on_device(self, grammar_output) -> bool:
        """Whether this step's tokens are the program's (sampling.py); asks
        nothing of the program, which may still be running."""
        state = self.execute_model_state
        return (self._device_sampling and state is not None and state.logits is not None
                and self._sampled_rows is not None
                and (isinstance(state.logits, Future) or self._step_token_ids is not None)
                and sampling.on_device(self.input_batch.sampling_metadata, self.num_prompt_logprobs,
                                       grammar_output, state.spec_decode_metadata))

    def _tokens_on_device(self):
        """The step's tokens left on the device: vLLM books markers for them
        (module docstring) and the next step's program patches them in."""
        state = self.execute_model_state
        tokens = state.logits if isinstance(state.logits, Future) else self._step_token_ids
        self._step_token_ids = None
        rows, self._sampled_rows = self._sampled_rows, None
        self.execute_model_state = state._replace(logits=None)
        self._device_ids = -2 - torch.arange(rows)
        self.sampled_steps["device"] += 1
        return tokens

    def _book(self, grammar_output, tokens=None):
        """vLLM's sample_tokens, whose bookkeeping leaves placeholders
        (`use_async_scheduling`) for this runner's StepOutput to fill;
        `tokens` are the step's tokens on the device, or None when vLLM
        samples them on the host. The end of vLLM's sample_tokens wraps
        its output for CUDA streams: _bookkeeping_sync turns the mode off
        for it."""
        self._booked = None
        try:
            output = super().sample_tokens(grammar_output)
        finally:
            self.use_async_scheduling = True
        booked, self._booked = self._booked, None
        if booked is None:   # nothing was sampled (vLLM returned early)
            return output
        sampler_output, invalid = booked
        ids = sampler_output.sampled_token_ids if tokens is None else tokens
        self._prev_ids = tokens
        step = StepOutput(output, ids, sampler_output.sampled_token_ids.shape[0],
                           sampler_output.logprobs_tensors, invalid)
        self.input_batch.set_async_sampled_token_ids(step.sampled_token_ids_cpu, step)
        return step

    def _bookkeeping_sync(self, scheduler_output, sampler_output, *args, **kwargs):
        booked = super()._bookkeeping_sync(scheduler_output, sampler_output, *args, **kwargs)
        if self.use_async_scheduling:
            self._booked = (sampler_output, booked[-1])   # its last result: the rows not sampled
            self.use_async_scheduling = False   # until _book has its output (above)
        return booked

    def _sample_on_host(self, grammar_output):
        """vLLM's sampling, on the step's logits brought to the host (where
        the sampler's inputs are) without the rows past the step's sequences,
        which were padding (_prepare_inputs). The logits of a step with
        prompt embeddings are on the host already, and padded as well."""
        state = self.execute_model_state
        if state is not None and state.logits is not None:
            on_device = self._sampled_on_device(grammar_output)
            logits = state.logits
            token_ids, self._step_token_ids = self._step_token_ids, None
            if isinstance(logits, Future):   # launched ahead (_run_step)
                hidden, logits, token_ids = logits.result()
                # The gathered sampled rows serve speculative decoding only,
                # which runs without async scheduling (platform.py).
                state = state._replace(hidden_states=hidden, sample_hidden_states=None)
            rows, self._sampled_rows = self._sampled_rows, None
            if on_device:
                # Only the ids come to the host; _sample hands them to vLLM.
                self._device_ids = token_ids.cpu()[:rows]   # no program per row count
                self.execute_model_state = state._replace(logits=None)
                self.sampled_steps["device"] += 1
            else:
                self.sampled_steps["host"] += 1
                logits = logits.cpu()
                self.execute_model_state = state._replace(
                    logits=logits if rows is None else logits[:rows])
        if not self._tokens_ahead:
            return super().sample_tokens(grammar_output)
        output = self._book(grammar_output)
        return output.get_output() if isinstance(output, StepOutput) else output

    def _sample(self, logits, spec_decode_metadata):
        device_ids, self._device_ids = self._device_ids, None
        if device_ids is None:
            return super()._sample(logits, spec_decode_metadata)
        self.input_batch.update_async_output_token_ids()   # as vLLM's _sample does first
        return sampling.output(device_ids)

    def _finish_launch(self) -> None:
        """Waits for the step launched ahead, if any: its program writes the
        KV caches. Its error, if it failed, is raised by its sampling."""
        launched, self._launched = self._launched, None
        if launched is not None:
            launched.exception()

    def _sample_pending(self) -> None:
        """Samples the last step if nobody has yet: the batch's bookkeeping
        must be done before the next step changes the batch."""
        pending, self._pending_sample = self._pending_sample, None
        if pending is not None:
            pending.get_output()

    def _model_forward(self, input_ids=None, positions=None, intermediate_tensors=None,
                       inputs_embeds=None, **model_kwargs):
        if model_kwargs:
            raise NotImplementedError(
                f"vLLM on tpu: multimodal inputs are not supported (got {sorted(model_kwargs)})")
        to = (lambda x: None if x is None else x.to(self.tpu))
        self._step_token_ids = None   # set by _run_step only
        if not self.kv_caches or input_ids is None:   # vLLM profiling; prompt embeddings
            self._finish_launch()
            if self.kv_caches:
                self._write_zeros(to(self._fresh_block_ids(inputs_embeds.shape[0])))
            self._lora_inputs((input_ids if input_ids is not None else inputs_embeds).shape[0])
            received = self._stage.received(self._stage.step_inputs(intermediate_tensors, self.tpu))
            return self.model(input_ids=to(input_ids), positions=to(positions),
                              intermediate_tensors=received, inputs_embeds=to(inputs_embeds))
        return self._run_step(input_ids, positions, intermediate_tensors)

    def _run_step(self, input_ids: torch.Tensor, positions: torch.Tensor, received=None):
        """The step's device work as one captured program: the fresh blocks
        zeroed, the forward (cache writes and attention included) and the
        sampled rows' logits, which wait in `_step_logits` for
        compute_logits. Returns the hidden states; a pipeline stage before
        the last returns its IntermediateTensors instead, on the host
        (pipeline.py), and computes no logits.

        What the program reads per step is its inputs; anything else the
        model's Python computes on the host is that of the bucket's first
        step. vLLM's decoder models compute nothing per step outside the
        attention metadata, which is an input."""
        t_pad = input_ids.shape[0]
        indices, self._logits_indices = self._logits_indices, None
        if indices is None:
            # The program's logits are what compute_logits returns, whatever
            # rows vLLM gathered: without the step's own rows they would be
            # another step's (as speculative decoding once got, silently).
            raise RuntimeError("vLLM on tpu: a step reached the device without its sampled rows "
                               "(_prepare_inputs did not run for it)")
        host = [input_ids, positions, self._fresh_block_ids(t_pad), indices]
        prev, self._patch_from = self._patch_from, None
        self.patched_steps += prev is not None
        metas = {id(m): m for m in get_forward_context().attn_metadata.values()}.values()
        caches = {id(kv): kv for kv in self.kv_caches}.values()
        inputs = ([t.to(self.tpu) for t in host] + [self._prev_ids_input(None)]
                  + self._stage.step_inputs(received, self.tpu)
                  + [getattr(m, name) for m in metas for name in METADATA_TENSORS] + list(caches)
                  + self._lora_inputs(t_pad))
        params, self._sampling_params = self._sampling_params, None
        self._step_sampling = [p.to(self.tpu) for p in params]
        inputs += self._step_sampling
        signature = tuple((t.shape, t.dtype) for t in inputs)
        hidden_type = self._hidden_types.get(signature)
        if not (self._launch_ahead and hidden_type is not None and self._stage.last):
            # Run here, after the step launched ahead (it writes the KV caches).
            self._finish_launch()
            inputs[_PREV_IDS] = self._prev_ids_input(prev)
            if not self._stage.last:
                return self._stage.to_host(self._step(inputs))
        else:
            before, started = self._launched, threading.Event()
            self._launched = self._step_logits = self._launcher.submit(
                self._launch, inputs, prev, started)
            # The launcher needs the GIL to reach the launch, which releases
            # it: without this wait it got the GIL only when this thread next
            # blocked, and the program started that late (at the benchmark's
            # decode steps 1.36 ms after the submit, p50; 0.09 ms with it).
            # Behind a step still running it starts when that one ends.
            if before is None or before.done():
                started.wait()
            shape, dtype = hidden_type
            return torch.empty(shape, dtype=dtype)
        hidden, self._step_logits, self._step_token_ids = self._step(inputs)
        self._hidden_types[signature] = (hidden.shape, hidden.dtype)
        return hidden

    @torch.inference_mode()   # as vLLM runs execute_model
    def _launch(self, inputs: list, prev, started: threading.Event) -> list:
        started.set()
        # The launcher runs steps in order: a Future `prev` is done.
        inputs[_PREV_IDS] = self._prev_ids_input(prev)
        return self._step(inputs)

    def _prev_ids_input(self, prev) -> torch.Tensor:
        """The last step's tokens on tpu, for the markers of this step's ids;
        zeros (one program signature) where there are none."""
        if prev is not None:
            return step_tokens(prev)
        if self._no_prev_ids is None:
            self._no_prev_ids = torch.zeros(self._ids_width, dtype=torch.long, device=self.tpu)
        return self._no_prev_ids

    @staticmethod
    def _patch_ids(ids: torch.Tensor, prev_ids: torch.Tensor) -> torch.Tensor:
        """The step's ids with each marker -(row + 2) replaced by the last
        step's token of that row (module docstring)."""
        rows = (-2 - ids).clamp(min=0).long()
        return torch.where(ids < -1, prev_ids.index_select(0, rows).to(ids.dtype), ids)

    def _step_work(self, ids, positions, zero_ids, rows, prev_ids, *received_metadata_and_caches):
        """What _run_step captures, once per bucket. The metadata and caches
        are read through vLLM's forward context and the layers; as inputs they
        are the same buffers. The step's tokens are padded to one width, so
        that the next step's program takes them whatever this one's bucket."""
        received = self._stage.received(received_metadata_and_caches[:len(self._stage.keys)])
        self._write_zeros(zero_ids)
        hidden = self.model(input_ids=self._patch_ids(ids, prev_ids), positions=positions,
                            intermediate_tensors=received, inputs_embeds=None)
        if not self._stage.last:
            return self._stage.outputs(hidden)
        logits = self._compute_logits(hidden.index_select(0, rows))
        tokens = sampling.token_ids(logits, *self._step_sampling)
        tokens = torch.nn.functional.pad(tokens, (0, self._ids_width - tokens.shape[0]))
        return [hidden, logits, tokens]

    def _determine_batch_execution_and_padding(self, num_tokens, *args, **kwargs):
        mode, desc, should_ubatch, across_dp, stats = super()._determine_batch_execution_and_padding(
            num_tokens, *args, **kwargs)
        padded = token_bucket(desc.num_tokens, self.max_num_tokens)
        return mode, dataclasses.replace(desc, num_tokens=padded), should_ubatch, across_dp, stats

    def _max_step_seqs(self, t_pad: int) -> int:
        # Every sequence has a token in the step, so a step of this token
        # bucket has at most min(T, max_num_seqs) sequences, and as many
        # partly filled blocks.
        return min(t_pad, self.scheduler_config.max_num_seqs)

    def _max_sampled_rows(self, t_pad: int) -> int:
        # A sequence samples its last token's row and, with speculative
        # decoding, the row of each draft token it verifies (vLLM's
        # spec-decode logits_indices): at most 1 + num_speculative_tokens
        # rows a sequence, each a token of the step.
        return min(t_pad, self.scheduler_config.max_num_seqs * (1 + self.num_spec_tokens))

    def _placeholder_logits_indices(self, t_pad: int) -> torch.Tensor:
        """Sampled rows for a step vLLM did not prepare (the warm-up's): row 0, padded."""
        return self._padded_logits_indices(torch.zeros(1, dtype=torch.long), t_pad)

    def _padded_logits_indices(self, indices: torch.Tensor, t_pad: int) -> torch.Tensor:
        # One dtype whatever vLLM's (int32 plain, int64 with speculative
        # decoding): the dtype is part of the step program's signature.
        padded = torch.zeros(self._max_sampled_rows(t_pad), dtype=torch.long)
        padded[: len(indices)] = indices
        return padded

    def _prepare_inputs(self, scheduler_output, *args, **kwargs):
        # The hidden states of the sampled tokens are gathered on the device,
        # inside the step's program: their count is padded so that it does
        # not add a size to the program, and trimmed again on the host. With
        # speculative decoding the rejection sampler indexes the trimmed
        # rows through spec_decode_metadata, whose indices are into vLLM's
        # unpadded logits_indices: padding after them changes none.
        logits_indices, spec_decode_metadata, *rest = super()._prepare_inputs(
            scheduler_output, *args, **kwargs)
        total = scheduler_output.total_num_scheduled_tokens
        t_pad = token_bucket(total, self.max_num_tokens)
        self._patch_from = self._marked_ids(total)
        self._sampled_rows = len(logits_indices)
        self._logits_indices = self._padded_logits_indices(logits_indices, t_pad)
        self._sampling_params = sampling.step_inputs(
            self.input_batch, self.requests, scheduler_output.num_scheduled_tokens,
            self._max_sampled_rows(t_pad))
        return (self._logits_indices, spec_decode_metadata, *rest)

    def _marked_ids(self, total: int):
        """The last step's tokens (on tpu) if this step's ids hold markers
        for them (module docstring), else None. vLLM's placeholder (-1) is
        a token nothing filled in: the step would run on a wrong token."""
        if not self._tokens_ahead:
            return None
        ids = self.input_ids.gpu[:total]
        if bool((ids == -1).any()):
            raise RuntimeError("vLLM on tpu: a step's input ids hold a placeholder (-1) for a token "
                               "of the last step that was not patched in")
        if not bool((ids < -1).any()):
            return None
        if self._prev_ids is None:
            raise RuntimeError("vLLM on tpu: a step's input ids hold markers for the last step's "
                               "tokens, which were not left on the device")
        return self._prev_ids

    def initialize_kv_cache_tensors(self, kv_cache_config, kernel_block_sizes,
                                    kv_cache_allocation_context=None):
        # One tensor per layer in its own shape and dtype, instead of vLLM's
        # byte buffer viewed per layer: a view of a shared buffer would make
        # every slot write rebuild (and copy) the whole buffer.
        kv_caches = {}
        for group_id, group in enumerate(kv_cache_config.kv_cache_groups):
            spec = group.kv_cache_spec
            if kernel_block_sizes[group_id] != spec.block_size:
                raise NotImplementedError(
                    f"vLLM on tpu: kernel block size {kernel_block_sizes[group_id]} differs from "
                    f"the cache's block size {spec.block_size}")
            shape = TpuPagedAttentionBackend.kv_cache_shape(
                kv_cache_config.num_blocks, spec.block_size, spec.num_kv_heads, spec.head_size)
            dtype = TpuPagedAttentionBackend.kv_cache_torch_dtype(spec.dtype, self.cache_config.cache_dtype)
            for name in group.layer_names:
                kv_caches[name] = torch.zeros(shape, dtype=dtype, device=self.tpu)
        for name, target in self.shared_kv_cache_layers.items():
            kv_caches[name] = kv_caches[target]
        bind_kv_cache(kv_caches, self.compilation_config.static_forward_context, self.kv_caches,
                      kv_cache_groups=kv_cache_config.kv_cache_groups)
        return kv_caches

    def _zero_block_ids(self, block_ids: list[int]) -> None:
        # Zeroed inside the next step's program (_model_forward), at a count
        # fixed by its token bucket: no program of its own, no variant of the
        # step's program, nothing to synchronize.
        self._fresh_blocks.extend(block_ids)

    def _zero_block_count(self, t_pad: int) -> int:
        # Blocks a step of t_pad tokens can newly fill: its tokens' worth, plus
        # a partly filled block per sequence.
        return t_pad // self.cache_config.block_size + self._max_step_seqs(t_pad) + 1

    def _fresh_block_ids(self, t_pad: int) -> torch.Tensor:
        """The blocks the step of `t_pad` tokens zeroes, padded to its count
        with the null block (a host tensor)."""
        count = self._zero_block_count(t_pad)
        ids, self._fresh_blocks = self._fresh_blocks, []
        if len(ids) > count:
            # Not expected; a program of its own, run before the step's
            # (and after the one launched ahead, which writes the caches).
            self._finish_launch()
            self._write_zeros(torch.tensor(ids[count:], dtype=torch.long).to(self.tpu))
            torch_tpu.flush("zero_blocks")
            torch.tpu.synchronize()
            ids = ids[:count]
        return torch.tensor(ids + [0] * (count - len(ids)), dtype=torch.long)

    def _write_zeros(self, block_ids: torch.Tensor) -> None:
        block_size = self.cache_config.block_size
        slots = (block_ids[:, None] * block_size
                 + torch.arange(block_size, device=block_ids.device)).reshape(-1)
        for kv in {id(kv): kv for kv in self.kv_caches}.values():
            zeros = torch.zeros((), dtype=kv.dtype, device=self.tpu).expand(
                2, slots.shape[0], *kv.shape[2:])
            TpuPagedAttentionBackend.write_slots(kv, slots, zeros)

    def warmup_programs(self) -> list[tuple[int, int]]:
        """Every program serving can run: a step's, for each (token bucket,
        key-block bucket) a batch can reach."""
        block_size = self.cache_config.block_size
        max_blocks = -(-self.model_config.max_model_len // block_size)
        return step_buckets(self.max_num_tokens, self.scheduler_config.max_num_seqs,
                            max_blocks, block_size)

    # As vLLM runs execute_model: outside inference mode the gather of the
    # sampled rows would keep its input for autograd.
    @torch.inference_mode()
    def warm_up(self) -> None:
        """Runs every program of warmup_programs(), with a progress line."""
        if self.model_config.is_multimodal_model:
            # vLLM runs every step of a multimodal model on input embeddings,
            # op by op (multimodal.py): none runs a step program.
            logger.info("torch_tpu: no warm-up for a multimodal model (its steps run op by op)")
            return
        programs = self.warmup_programs()
        start = time.perf_counter()
        torch.tpu.synchronize()   # no check state left over from loading
        before = torch_tpu.metrics()
        for i, (t_pad, blocks) in enumerate(programs, 1):
            for greedy in (False, True):   # the step's two programs (sampling.py)
                self._warm_step(t_pad, blocks, greedy)
            torch.tpu.synchronize()   # ran, not only launched: the line times it, and serving starts idle
            logger.info("torch_tpu: warming up %d/%d programs (%.1f s)", i, len(programs),
                        time.perf_counter() - start)
        after = torch_tpu.metrics()
        logger.info("torch_tpu: warm-up ran %d programs in %.1f s: %d compiled, %d from the "
                    "persistent cache", len(programs), time.perf_counter() - start,
                    after["graphs_compiled"] - before["graphs_compiled"],
                    after["disk_cache_hits"] - before["disk_cache_hits"])

    def _warm_step(self, t_pad: int, blocks: int, greedy: bool) -> None:
        """A step of `t_pad` tokens and `blocks` key blocks, through the calls a
        real step makes (execute_model), on masked-out dummy inputs."""
        rows, chunk = query_layout(t_pad, self.scheduler_config.max_num_seqs)
        attn, slot_mapping = {}, {}
        for groups in self.attn_groups:   # one metadata per group, built in order, as vLLM does
            for group in groups:
                block_size = group.kv_cache_spec.block_size
                meta = warmup_metadata(t_pad, rows, chunk, blocks, block_size)
                for name in group.layer_names:
                    attn[name] = meta
                    slot_mapping[name] = torch.zeros(t_pad, dtype=torch.long)
        with torch_tpu.eager_mode("defer_and_fuse"):
            self._sampled_rows = None
            self._logits_indices = self._placeholder_logits_indices(t_pad)
            self._sampling_params = (sampling.greedy_inputs() if greedy else
                                     sampling.placeholder_inputs(self._max_sampled_rows(t_pad),
                                                                 self.input_batch.vocab_size))
            with set_forward_context(attn, self.vllm_config, num_tokens=t_pad,
                                     slot_mapping=slot_mapping):
                hidden = self._model_forward(input_ids=self.input_ids.gpu[:t_pad],
                                             positions=self.positions[:t_pad],
                                             intermediate_tensors=self._stage.warmup_received(t_pad))
            if not self._stage.last:
                return   # no logits: its outputs are on the host already
            # vLLM gathers the sampled rows' hidden states too (kept for
            # speculative decoding): a program of its own, run when the step
            # leaves defer_and_fuse, so the warm-up keeps it alive till then.
            sampled = hidden[self._placeholder_logits_indices(t_pad)]
            self.model.compute_logits(sampled)
        del sampled


class TpuWorker(CPUWorker):
    def __init__(self, vllm_config, local_rank, rank, distributed_init_method,
                 is_driver_worker=False):
        # CPUWorker's own start binds NUMA memory for its CPU kernels; none run here.
        Worker.__init__(self, vllm_config, local_rank, rank, distributed_init_method,
                        is_driver_worker=is_driver_worker)
        self.parallel_config.disable_custom_all_reduce = True

    def init_device(self):
        self.device = torch.device("cpu")
        # Each worker process has its own PJRT client: with one device per
        # process (XLA's CPU plugin) every rank's device is its tpu:0.
        torch.tpu.set_device(self.local_rank % torch.tpu.device_count())
        if self.parallel_config.world_size == 1 and torch_tpu.platform()["platform_name"] == "cpu":
            # The plugin's workers run each step's program on the cores where
            # the engine's Python, in this process, prepares the next step,
            # the longer of the two: with their nice value above the engine's
            # it goes first (docs/vllm.md#figures). Workers of several
            # processes are left alone: nothing was measured there.
            torch_tpu._C._set_device_thread_nice(_DEVICE_THREAD_NICE)
        # The runner pads every step to its own token buckets and captures
        # one program per bucket: vLLM's host copies must keep their shapes
        # (docs/dynamic_shapes.md#automatic-dynamic-dimensions).
        torch_tpu.dynamic.config(automatic=False)
        init_worker_distributed_environment(self.vllm_config, self.rank,
                                            self.distributed_init_method, self.local_rank, "gloo")
        set_random_seed(self.model_config.seed)
        self.model_runner = TpuModelRunner(self.vllm_config, torch.device("cpu"))

    def _maybe_get_memory_pool_context(self, tag):
        # vLLM's sleep-mode memory pools are CUDA's; tpu memory is torch_tpu's.
        return contextlib.nullcontext()

    def determine_available_memory(self) -> int:
        return memory.kv_cache_bytes(self.cache_config, _device())

    def compile_or_warm_up_model(self) -> CompilationTimes:
        start = time.perf_counter()
        self.model_runner.warm_up()
        set_random_seed(self.model_config.seed)
        return CompilationTimes(language_model=time.perf_counter() - start, encoder=0.0)
