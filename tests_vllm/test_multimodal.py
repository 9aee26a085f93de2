"""vLLM on tpu serves a tiny LLaVA (CLIP vision tower, Llama text model, built
here from random weights): a batch of two requests with different pictures
and one text-only request gives HF generate()'s greedy tokens on the CPU
(float32, one request at a time), the vision tower running on tpu; what has
not been tried with multimodal models fails at start naming it."""
import dataclasses
import json
import os
from types import SimpleNamespace as NS

import pytest

from conftest import BASE_LLM, run_script
import tiny_llava

QUESTION = tiny_llava.PROMPT.format("what is in the picture?")
# The same question about two pictures (so the tokens differ only if the
# pictures reach the model), and text alone.
REQUESTS = [{"prompt": QUESTION, "image": 1},
            {"prompt": QUESTION, "image": 2},
            {"prompt": "hello world, how are you today?", "image": None}]


@pytest.fixture(scope="module")
def llava(tmp_path_factory):
    return tiny_llava.build(str(tmp_path_factory.mktemp("llava")))


def check(folder, requests, new_tokens, **llm):
    expected = tiny_llava.hf_greedy(folder, requests, new_tokens)
    spec = {"model": folder, "llm": {**BASE_LLM, **llm}, "requests": requests,
            "sampling": {"temperature": 0, "max_tokens": new_tokens, "ignore_eos": True}}
    got, _ = run_script("run_multimodal.py", spec)
    bad = [i for i, (a, b) in enumerate(zip(got["tokens"], expected)) if a != b]
    assert not bad, f"requests {bad} differ: {[(got['tokens'][i], expected[i]) for i in bad]}"
    assert len(got["tokens"]) == len(requests)
    # vLLM expanded each picture's <image> into the tower's patch count.
    image_id = json.load(open(os.path.join(folder, "config.json")))["image_token_index"]
    for r, ids in zip(requests, got["prompt_token_ids"]):
        assert ids.count(image_id) == (0 if r["image"] is None else tiny_llava.IMAGE_TOKENS)
    return expected


def test_two_pictures_and_text_in_one_batch(llava):
    expected = check(llava, REQUESTS, 8)
    assert expected[0] != expected[1], "the two pictures gave the same tokens: the test cannot tell"


@pytest.mark.slow
def test_picture_split_across_chunked_prefill_steps(llava):
    # Steps of 16 tokens: a picture's 16 positions start mid-step, so vLLM
    # merges part of its embeddings in one step and the rest in the next
    # (its encoder cache keeps them on tpu in between).
    requests = [{"prompt": tiny_llava.PROMPT.format("and this one, " * 3 + "what is it?"), "image": 3},
                REQUESTS[0], REQUESTS[2]]
    check(llava, requests, 6, max_num_batched_tokens=16, max_num_seqs=4)


@pytest.mark.slow
def test_image_embeddings_as_input_fail_at_start(llava):
    got, _ = run_script("run_llm.py", {"model": llava, "llm": {**BASE_LLM, "enable_mm_embeds": True},
                                       "prompts": [], "sampling": {}, "expect_error": True})
    assert "multimodal option enable_mm_embeds=True" in (got["error"] or ""), got


def _config(architecture="LlavaForConditionalGeneration", tower="clip_vision_model", **options):
    """A VllmConfig's fields as multimodal.unsupported reads them."""
    mm = NS(**{**dict(_runner_options()), **options.pop("mm", {})})
    model = NS(is_multimodal_model=True, multimodal_config=mm, quantization=options.pop("quantization", None),
               enable_prompt_embeds=options.pop("enable_prompt_embeds", False),
               hf_config=NS(architectures=[architecture], vision_config=NS(model_type=tower)))
    parallel = NS(tensor_parallel_size=options.pop("tp", 1), pipeline_parallel_size=options.pop("pp", 1))
    return NS(model_config=model, parallel_config=parallel, lora_config=options.pop("lora", None),
              speculative_config=options.pop("spec", None))


def _runner_options():
    from torch_tpu.integrations.vllm import multimodal
    return multimodal._RUNNER_OPTIONS


@pytest.mark.parametrize("config, named", [
    ({"architecture": "Qwen2VLForConditionalGeneration"},
     "multimodal models other than LlavaForConditionalGeneration (this one: Qwen2VLForConditionalGeneration)"),
    ({"tower": "siglip_vision_model"}, "multimodal vision tower 'siglip_vision_model'"),
    ({"mm": {"enable_mm_embeds": True}}, "multimodal option enable_mm_embeds=True"),
    ({"mm": {"mm_encoder_only": True}}, "multimodal option mm_encoder_only=True"),
    ({"enable_prompt_embeds": True}, "multimodal models with prompt embeddings"),
    ({"lora": object()}, "multimodal models with LoRA adapters"),
    ({"pp": 2}, "multimodal models with pipeline parallelism"),
    ({"quantization": "fp8_per_tensor"}, "multimodal models with quantization 'fp8_per_tensor'"),
    ({"spec": object()}, "multimodal models with speculative decoding"),
    ({"tp": 2}, "multimodal models with tensor parallelism"),
])
def test_untried_multimodal_options_are_named(config, named):
    from torch_tpu.integrations.vllm import multimodal
    assert multimodal.unsupported(_config()) == []
    found = multimodal.unsupported(_config(**config))
    assert len(found) == 1 and named in found[0], found


def test_every_runner_option_is_a_field_of_vllms_config():
    # The options refused by name must be MultiModalConfig's own (a renamed
    # field would never be refused).
    from vllm.config.multimodal import MultiModalConfig
    fields = {f.name for f in dataclasses.fields(MultiModalConfig)}
    assert {name for name, _ in _runner_options()} <= fields
