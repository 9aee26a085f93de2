"""What vLLM on tpu hands the engine for a step it scheduled ahead (vLLM's
async scheduling): an AsyncModelRunnerOutput whose contents come later.
DeferredSample samples the step on the host when first asked; StepOutput
holds a step that vLLM booked with placeholders, whose tokens (on tpu when
it was sampled there) come to the host when asked for (worker.py's module
docstring)."""
import threading
from concurrent.futures import Future

import torch
from vllm.v1.outputs import AsyncModelRunnerOutput


def step_tokens(tokens) -> torch.Tensor:
    """A step's tokens from what the runner keeps of them: the tensor, or the
    Future of a step launched ahead, whose third result they are (waited for)."""
    return tokens.result()[2] if isinstance(tokens, Future) else tokens


class DeferredSample(AsyncModelRunnerOutput):
    """A step's ModelRunnerOutput, sampled once, by whichever asks first: the
    engine (get_output, from its output thread under multiprocessing) or the
    runner's next step. The lock keeps the sampling, which updates the
    runner's batch, from running twice or beside the next step. A sampling
    that failed fails every ask."""

    def __init__(self, sample):
        self._sample = sample
        self._output = self._error = None
        self._lock = threading.Lock()

    def get_output(self):
        with self._lock:
            if self._sample is not None:
                sample, self._sample = self._sample, None
                try:
                    self._output = sample()
                except BaseException as e:
                    self._error = e
            if self._error is not None:
                raise self._error
            return self._output


class StepOutput(AsyncModelRunnerOutput):
    """A step's ModelRunnerOutput whose tokens vLLM's bookkeeping left as
    placeholders: they come to the host when the output is asked for (the
    engine) or when vLLM repairs its placeholders before sampling a later
    step (`synchronize`, the event vLLM's input batch waits on). `ids` is a
    host tensor, a tpu tensor or the Future of a launched step (whose third
    result is its tokens); a step whose program failed fails every ask."""

    def __init__(self, output, ids, rows, logprobs, invalid):
        self._output, self._ids, self._rows = output, ids, rows
        self._logprobs, self._invalid = logprobs, invalid
        self.sampled_token_ids_cpu = torch.empty(rows, 1, dtype=torch.int32)
        self._done = False
        self._lock = threading.Lock()

    @torch.inference_mode()   # the host tensor was made under it (sample_tokens)
    def synchronize(self) -> None:
        with self._lock:
            if not self._done:
                ids = step_tokens(self._ids).cpu()
                self.sampled_token_ids_cpu.copy_(ids.reshape(-1, 1)[: self._rows])
                self._ids, self._done = None, True

    def get_output(self):
        self.synchronize()
        output = self._output
        output.sampled_token_ids = self.sampled_token_ids_cpu.tolist()
        for i in self._invalid:
            output.sampled_token_ids[i].clear()
        if self._logprobs is not None:
            output.logprobs = self._logprobs.tolists()
        return output
