"""vLLM's OpenAI server on tpu in a process of its own, for the tests that talk
to it over HTTP on 127.0.0.1."""
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url, body, stream=False):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        if not stream:
            return json.loads(r.read())
        events = []
        for line in r:
            line = line.decode().strip()
            if line.startswith("data: ") and line != "data: [DONE]":
                events.append(json.loads(line[len("data: "):]))
        return events


@contextlib.contextmanager
def serve(folder, log_path, args=(), env=None):
    """Yields {"base": URL, "proc": the server, "log": its log file} once
    /health answers; kills the server and its engine processes after."""
    port = _free_port()
    log = open(log_path, "w+")
    proc = subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", folder,
         "--host", "127.0.0.1", "--port", str(port), *args],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        env={**os.environ, **(env or {})})
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 300
    while True:
        if proc.poll() is not None:
            log.seek(0)
            pytest.fail(f"the server exited ({proc.returncode}):\n{log.read()[-4000:]}")
        try:
            urllib.request.urlopen(base + "/health", timeout=2)
            break
        except (urllib.error.URLError, ConnectionError, OSError):
            if time.time() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)  # the engine processes too
                pytest.fail("the server did not answer /health within 300 s")
            time.sleep(1)
    try:
        yield {"base": base, "proc": proc, "log": log}
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
