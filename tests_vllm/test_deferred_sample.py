"""The deferred sampling behind async scheduling (step_outputs.DeferredSample): a
step is sampled once, whoever asks first (the engine's output thread or the
runner's next step, at the same time too), and a sampling that failed fails
every ask instead of handing vLLM an empty output. A step sampled on the
device leaves its tokens there (step_outputs.StepOutput): the host gets them when
asked, and the next step's program patches them into its ids."""
import threading

import pytest

from torch_tpu.integrations.vllm.step_outputs import DeferredSample


def test_samples_once_for_every_ask():
    calls = []
    deferred = DeferredSample(lambda: calls.append(1) or {"tokens": [7]})
    first = deferred.get_output()
    assert deferred.get_output() is first == {"tokens": [7]}
    assert calls == [1]


def test_two_threads_asking_at_once_sample_once():
    started, release, calls = threading.Event(), threading.Event(), []

    def sample():
        calls.append(1)
        started.set()
        release.wait(10)
        return "output"

    deferred = DeferredSample(sample)
    got = []
    threads = [threading.Thread(target=lambda: got.append(deferred.get_output())) for _ in range(2)]
    threads[0].start()
    assert started.wait(10)
    threads[1].start()          # asks while the first is still sampling
    release.set()
    for t in threads:
        t.join(10)
    assert got == ["output", "output"] and calls == [1]


def test_a_failed_sampling_fails_every_ask():
    def sample():
        raise RuntimeError("device lost")

    deferred = DeferredSample(sample)
    for _ in range(2):
        with pytest.raises(RuntimeError, match="device lost"):
            deferred.get_output()


# Tokens left on the device (step_outputs.StepOutput, worker.TpuModelRunner._patch_ids).

def _booked(rows):
    from vllm.v1.outputs import ModelRunnerOutput
    return ModelRunnerOutput(req_ids=[f"r{i}" for i in range(rows)],
                             req_id_to_index={f"r{i}": i for i in range(rows)},
                             sampled_token_ids=[])


def test_step_output_takes_the_launched_steps_tokens():
    import torch
    from concurrent.futures import Future
    from torch_tpu.integrations.vllm.step_outputs import StepOutput

    launched = Future()
    # The program's tokens are padded past the step's rows; row 1 was a
    # partial prefill, whose token vLLM discards.
    step = StepOutput(_booked(3), launched, 3, None, [1])
    launched.set_result([None, None, torch.tensor([11, 12, 13, 0, 0])])
    step.synchronize()   # as vLLM's input batch does before repairing placeholders
    assert step.sampled_token_ids_cpu.tolist() == [[11], [12], [13]]
    assert step.get_output().sampled_token_ids == [[11], [], [13]]


def test_step_output_of_a_failed_step_fails_every_ask():
    from concurrent.futures import Future
    from torch_tpu.integrations.vllm.step_outputs import StepOutput

    launched = Future()
    launched.set_exception(RuntimeError("program failed"))
    step = StepOutput(_booked(2), launched, 2, None, [])
    for _ in range(2):
        with pytest.raises(RuntimeError, match="program failed"):
            step.get_output()


def test_markers_take_the_last_steps_tokens():
    import torch
    from torch_tpu.integrations.vllm.worker import TpuModelRunner

    last = torch.tensor([100, 101, 102, 103])
    # Rows 2 and 0 of the last step, between ids of prompts (token 0 included).
    ids = torch.tensor([5, -4, 0, -2, 7], dtype=torch.int32)
    for device in ("cpu", "tpu"):
        got = TpuModelRunner._patch_ids(ids.to(device), last.to(device)).cpu()
        assert got.dtype == torch.int32 and got.tolist() == [5, 102, 0, 100, 7]
