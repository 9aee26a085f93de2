"""vLLM's OpenAI server on tpu, over HTTP on 127.0.0.1: /v1/completions and
/v1/chat/completions (plain and streaming) give HF's greedy tokens, a prompt over
max_model_len is an HTTP 400 and the server stays up, and SIGTERM stops the
server and its engine process."""
import os
import signal
import time
import urllib.error

import pytest

import tiny_models
from conftest import VOCAB
from server_process import post, serve

MAX_LEN = 128


@pytest.fixture(scope="module")
def server(models, tmp_path_factory):
    folder = models("llama")
    args = ["--dtype", "float32", "--max-model-len", str(MAX_LEN),
            "--kv-cache-memory-bytes", str(16 << 20),
            # vLLM's default (0) aborts: it kills the engine at once and logs
            # EngineDeadError; a graceful stop lets the engine finish and exit.
            "--shutdown-timeout", "20"]
    with serve(folder, tmp_path_factory.mktemp("server") / "server.log", args) as s:
        yield {**s, "folder": folder}


def test_completions_plain_and_streaming(server):
    prompts = tiny_models.prompts(3, 3, 30, VOCAB, seed=2)
    expected = tiny_models.hf_greedy(server["folder"], prompts, 8)
    url = server["base"] + "/v1/completions"
    body = {"model": server["folder"], "prompt": prompts, "max_tokens": 8, "temperature": 0,
            "ignore_eos": True, "return_token_ids": True}
    plain = post(url, body)
    got = {c["index"]: c["token_ids"] for c in plain["choices"]}
    assert [got[i] for i in range(3)] == expected
    events = post(url, {**body, "prompt": prompts[0], "stream": True}, stream=True)
    streamed = [t for e in events for c in e["choices"] for t in (c.get("token_ids") or [])]
    assert streamed == expected[0] and len(events) >= 2


def test_chat_completions_plain_and_streaming(server):
    url = server["base"] + "/v1/chat/completions"
    body = {"model": server["folder"], "messages": [{"role": "user", "content": "hello world"}],
            "max_tokens": 6, "temperature": 0, "ignore_eos": True, "return_token_ids": True}
    r = post(url, body)
    prompt_ids = r["prompt_token_ids"]
    assert prompt_ids, r
    expected = tiny_models.hf_greedy(server["folder"], [prompt_ids], 6)[0]
    assert r["choices"][0]["token_ids"] == expected
    assert r["choices"][0]["message"]["role"] == "assistant"
    events = post(url, {**body, "stream": True}, stream=True)
    streamed = [t for e in events for c in e["choices"] for t in (c.get("token_ids") or [])]
    assert streamed == expected


def test_prompt_over_max_model_len_is_a_400_and_the_server_stays_up(server):
    url = server["base"] + "/v1/completions"
    with pytest.raises(urllib.error.HTTPError) as err:
        post(url, {"model": server["folder"], "prompt": [5] * (MAX_LEN + 10), "max_tokens": 4})
    assert err.value.code == 400
    assert "max" in err.value.read().decode().lower()
    ok = post(url, {"model": server["folder"], "prompt": [5, 6, 7], "max_tokens": 2, "temperature": 0})
    assert len(ok["choices"]) == 1


def test_sigterm_stops_the_server_and_its_engine(server):
    proc = server["proc"]
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    deadline = time.time() + 30
    while True:   # the engine core process (same session) must be gone too
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        assert time.time() < deadline, "engine processes outlived the server by 30 s"
        time.sleep(0.5)
    server["log"].seek(0)
    # vLLM's stopping engine client logs EngineDeadError from its output handler
    # (async_llm.py) whatever the platform; any other traceback is a failure.
    text = "\n".join(l for l in server["log"].read().splitlines() if "[async_llm.py:" not in l)
    assert "Traceback" not in text and "Segmentation" not in text, text[-3000:]
