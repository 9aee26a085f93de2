"""from_pretrained(device_map="auto") places a model on tpu within
torch.tpu.mem_get_info()'s budget and spills the rest to the CPU, as
accelerate does for CUDA (python/torch_tpu/integrations/accelerate.py);
safetensors files load onto tpu with the documented one-liners. Tiny models
built and saved here, no hub."""
import collections
import logging

import pytest
import torch
import torch_tpu  # noqa: F401

transformers = pytest.importorskip("transformers")
safetensors_torch = pytest.importorskip("safetensors.torch")
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM  # noqa: E402

PROMPT = torch.tensor([[1, 5, 9, 14]])


@pytest.fixture(scope="module")
def saved_llama(tmp_path_factory):
    config = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, pad_token_id=0)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    path = tmp_path_factory.mktemp("llama")
    model.save_pretrained(path)
    return path, model.generate(PROMPT, max_new_tokens=5, do_sample=False)


def placement(model):
    return collections.Counter(p.device.type for p in model.parameters())


def test_auto_places_the_model_on_tpu(saved_llama, caplog):
    path, want = saved_llama
    with caplog.at_level(logging.WARNING):
        model = AutoModelForCausalLM.from_pretrained(path, device_map="auto")
    assert set(placement(model)) == {"tpu"}, placement(model)
    assert all(isinstance(d, int) for d in model.hf_device_map.values()), model.hf_device_map
    assert "is not available" not in caplog.text
    got = model.generate(PROMPT.to("tpu"), max_new_tokens=5, do_sample=False)
    assert torch.equal(got.cpu(), want)


def test_auto_spills_to_the_cpu_beyond_the_budget(saved_llama, monkeypatch):
    # A device with 60 kB free (the model needs about 110 kB): the embedding
    # and the first layer fit, the rest is offloaded to the CPU.
    path, want = saved_llama
    real = torch.tpu.mem_get_info
    monkeypatch.setattr(torch.tpu, "mem_get_info",
                        lambda device=None: (60_000 if device in (0, None) else 0, real(device)[1]))
    model = AutoModelForCausalLM.from_pretrained(path, device_map="auto")
    where = set(model.hf_device_map.values())
    assert 0 in where and "cpu" in where, model.hf_device_map
    assert placement(model)["tpu"] >= 1
    got = model.generate(PROMPT.to("tpu"), max_new_tokens=5, do_sample=False)
    assert torch.equal(got.cpu(), want)


def test_given_budgets_name_tpu_devices_without_a_cuda_warning(saved_llama, caplog):
    path, want = saved_llama
    with caplog.at_level(logging.WARNING):
        model = AutoModelForCausalLM.from_pretrained(path, device_map="auto",
                                                     max_memory={0: "60KB", "cpu": "1GB"})
    assert "is not available" not in caplog.text
    assert set(model.hf_device_map.values()) == {0, "cpu"}, model.hf_device_map
    got = model.generate(PROMPT.to("tpu"), max_new_tokens=5, do_sample=False)
    assert torch.equal(got.cpu(), want)


def test_safetensors_onto_tpu(tmp_path):
    tensors = {"w": torch.randn(3, 4), "i": torch.arange(5)}
    path = str(tmp_path / "t.safetensors")
    safetensors_torch.save_file(tensors, path)
    # safetensors checks device names against its own list, which has no "tpu"
    with pytest.raises(Exception, match="tpu"):
        safetensors_torch.load_file(path, device="tpu")
    # the documented equivalents (docs/devices.md)
    moved = {k: v.to("tpu") for k, v in safetensors_torch.load_file(path).items()}
    by_index = safetensors_torch.load_file(path, device=torch.tpu.current_device())
    for loaded in (moved, by_index):
        for k, v in tensors.items():
            assert loaded[k].device.type == "tpu"
            assert torch.equal(loaded[k].cpu(), v)
