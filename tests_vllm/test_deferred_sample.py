"""The deferred sampling behind async scheduling (worker._DeferredSample): a
step is sampled once, whoever asks first (the engine's output thread or the
runner's next step, at the same time too), and a sampling that failed fails
every ask instead of handing vLLM an empty output."""
import threading

import pytest

from torch_tpu.integrations.vllm.worker import _DeferredSample


def test_samples_once_for_every_ask():
    calls = []
    deferred = _DeferredSample(lambda: calls.append(1) or {"tokens": [7]})
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

    deferred = _DeferredSample(sample)
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

    deferred = _DeferredSample(sample)
    for _ in range(2):
        with pytest.raises(RuntimeError, match="device lost"):
            deferred.get_output()
