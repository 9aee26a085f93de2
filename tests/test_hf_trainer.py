"""Hugging Face accelerate and Trainer pick `tpu` with no device flags
(python/torch_tpu/integrations/accelerate.py), and a tiny Llama trained by the
Trainer follows the same Trainer run on the CPU, loss for loss.

The default-arguments test uses the Trainer's default optimizer,
adamw_torch_fused, which needs the `_fused_adamw_` lowering; it is skipped,
saying so, where that lowering is not registered."""
import copy
import os

import pytest
import torch

import torch_tpu

transformers = pytest.importorskip("transformers")
accelerate = pytest.importorskip("accelerate")
from accelerate.state import AcceleratorState  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_accelerate_state():
    AcceleratorState._reset_state(reset_partial_state=True)
    yield
    AcceleratorState._reset_state(reset_partial_state=True)


def tiny_llama():
    cfg = transformers.LlamaConfig(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(cfg)


def dataset(rows=32, seq=16):
    ids = torch.randint(0, 128, (rows, seq), generator=torch.Generator().manual_seed(0))
    return [{"input_ids": r, "labels": r} for r in ids]


def test_accelerator_puts_model_and_batches_on_tpu():
    acc = accelerate.Accelerator()
    assert acc.device.type == "tpu"
    model = torch.nn.Linear(4, 2)
    loader = torch.utils.data.DataLoader(torch.randn(8, 4), batch_size=4)
    model, loader = acc.prepare(model, loader)
    assert all(p.device.type == "tpu" for p in model.parameters())
    batches = list(loader)
    assert len(batches) == 2 and all(b.device.type == "tpu" for b in batches)
    torch.testing.assert_close(model(batches[0]).cpu(),
                               batches[0].cpu() @ model.weight.cpu().T + model.bias.cpu())


def test_accelerator_bf16_autocasts_on_tpu():
    acc = accelerate.Accelerator(mixed_precision="bf16")
    model = acc.prepare(torch.nn.Linear(4, 2))
    x = torch.randn(3, 4).to(acc.device)
    # accelerate wraps forward in torch.autocast("tpu", dtype=bfloat16) and
    # hands the outputs back in float32.
    out = model(x)
    expected = torch.nn.functional.linear(x.cpu().bfloat16(), model.weight.cpu().bfloat16(),
                                          model.bias.cpu().bfloat16())
    assert out.dtype == torch.float32
    rtol, atol = torch_tpu.tolerance(torch.bfloat16, "aten::mm")
    torch.testing.assert_close(out.cpu(), expected.float(), rtol=rtol, atol=atol)
    with acc.autocast():
        assert (x @ x.T).dtype == torch.bfloat16


def test_cpu_requests_and_accelerates_own_override_keep_precedence(monkeypatch):
    assert accelerate.Accelerator(cpu=True).device.type == "cpu"
    AcceleratorState._reset_state(reset_partial_state=True)
    monkeypatch.setenv("ACCELERATE_TORCH_DEVICE", "cpu")
    assert accelerate.PartialState().device.type == "cpu"


def test_accelerate_imported_before_torch_tpu_still_picks_tpu(run_python):
    r = run_python("""
        import accelerate.state
        import torch_tpu
        print(accelerate.state.PartialState().device)
    """, TORCH_DEVICE_BACKEND_AUTOLOAD="0",
        PYTHONPATH=os.path.dirname(os.path.dirname(torch_tpu.__file__)))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "tpu:0"


def train(args_kwargs, rows=32):
    """Per-step training losses (read from the model's outputs) and weights."""
    model = copy.deepcopy(tiny_llama())
    losses = []
    model.register_forward_hook(lambda m, i, out: losses.append(out.loss.detach().float().cpu().item()))
    args = transformers.TrainingArguments(report_to="none", **args_kwargs)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=dataset(rows))
    trainer.train()
    return args, trainer, losses, {k: v.detach().cpu() for k, v in model.state_dict().items()}


def check_against_cpu(tmp_path, tpu_only=None, on_tpu=None, **kwargs):
    """The Trainer with `kwargs` on tpu (and `tpu_only` there too) against the
    same on the CPU. `on_tpu(trainer)` looks at the tpu run before the CPU run
    resets accelerate's state, which every Accelerator shares."""
    args, trainer, tpu_losses, tpu_state = train(dict(output_dir=str(tmp_path / "tpu"), **kwargs,
                                                      **(tpu_only or {})))
    assert args.device.type == "tpu" and trainer.accelerator.device.type == "tpu"
    assert next(trainer.model.parameters()).device.type == "tpu"
    if on_tpu is not None:
        on_tpu(trainer)
    AcceleratorState._reset_state(reset_partial_state=True)
    args, trainer, cpu_losses, cpu_state = train(dict(output_dir=str(tmp_path / "cpu"), use_cpu=True, **kwargs))
    assert args.device.type == "cpu" and trainer.accelerator.device.type == "cpu"
    assert len(tpu_losses) == len(cpu_losses) == kwargs["max_steps"]
    rtol, atol = torch_tpu.tolerance(torch.float32, "aten::mm")
    torch.testing.assert_close(torch.tensor(tpu_losses), torch.tensor(cpu_losses), rtol=rtol, atol=atol)
    for k in cpu_state:
        torch.testing.assert_close(tpu_state[k], cpu_state[k], rtol=1e-3, atol=1e-4)
    return trainer


def test_trainer_trains_tiny_llama_on_tpu_like_the_cpu(tmp_path):
    check_against_cpu(tmp_path, max_steps=4, optim="adamw_torch")


def test_trainer_with_default_arguments_trains_on_tpu_like_the_cpu(tmp_path, require_ops):
    # Default TrainingArguments: their optimizer is adamw_torch_fused.
    require_ops("aten::_fused_adamw")
    trainer = check_against_cpu(tmp_path, max_steps=4)
    assert trainer.args.optim == "adamw_torch_fused"
    assert trainer.optimizer.defaults.get("fused") is True


def test_trainer_compiling_with_the_tpu_backend_trains_like_the_cpu(tmp_path):
    # accelerate's DynamoBackend names the backends it knows; the
    # integration adds tpu to them (before, "tpu" raised ValueError there).
    backends = []
    check_against_cpu(tmp_path, tpu_only={"torch_compile_backend": "tpu"}, max_steps=3, optim="adamw_torch",
                      on_tpu=lambda t: backends.append(t.accelerator.state.dynamo_plugin.to_kwargs()["backend"]))
    assert backends == ["tpu"]


def test_an_unknown_compile_backend_is_still_refused_by_accelerate():
    from accelerate.utils import TorchDynamoPlugin

    with pytest.raises(ValueError, match="not a valid DynamoBackend"):
        TorchDynamoPlugin(backend="no_such_backend")
