"""Trains a tiny Llama with the Hugging Face Trainer in bfloat16 mixed precision
(`TrainingArguments(bf16=True)`) on `tpu`, with no device flag: with torch_tpu
installed, transformers and accelerate choose `tpu` by themselves. Then the same
Trainer run on the CPU (`use_cpu=True`) from the same initial weights, and the
loss per step of both side by side.

The two runs autocast with their own device's policy (tpu follows CUDA's op
lists, the CPU its own), so the losses agree to bfloat16 precision, not bit
for bit."""
import argparse
import copy
import tempfile
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

import torch_tpu


def make_dataset(rows=256, seq=32, vocab=256, seed=0):
    """Arithmetic progressions modulo the vocabulary: each sequence is
    predictable from its first two tokens, so the loss falls quickly."""
    g = torch.Generator().manual_seed(seed)
    start = torch.randint(0, vocab, (rows, 1), generator=g)
    step = torch.randint(1, 8, (rows, 1), generator=g)
    ids = (start + step * torch.arange(seq)) % vocab
    return [{"input_ids": r, "labels": r} for r in ids]


def train(model, dataset, steps, out_dir, **device_args):
    model = copy.deepcopy(model)
    losses = []
    # The loss of every forward (one per step), as the model computed it.
    model.register_forward_hook(lambda m, i, out: losses.append(out.loss.detach().float().cpu().item()))
    args = TrainingArguments(output_dir=out_dir, report_to="none", bf16=True, max_steps=steps,
                             learning_rate=3e-3, disable_tqdm=True, logging_strategy="no",
                             save_strategy="no", **device_args)
    trainer = Trainer(model=model, args=args, train_dataset=dataset)
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start
    return losses, args, trainer, seconds


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    cli = parser.parse_args()

    plat = torch_tpu.platform()
    print(f"tpu platform: {plat['platform_name']} via {plat['plugin_reason']} ({plat['plugin_path']})")
    cfg = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    model = LlamaForCausalLM(cfg)
    dataset = make_dataset(vocab=cfg.vocab_size)
    with tempfile.TemporaryDirectory() as out:
        tpu_losses, args, trainer, tpu_s = train(model, dataset, cli.steps, out)
        print(f"tpu run: TrainingArguments.device={args.device}, accelerator.device="
              f"{trainer.accelerator.device}, optimizer {getattr(args.optim, 'value', args.optim)}, "
              f"autocast {torch.get_autocast_dtype('tpu')}: {tpu_s:.1f} s (first steps compile)")
        cpu_losses, args, trainer, cpu_s = train(model, dataset, cli.steps, out, use_cpu=True)
        print(f"cpu run: TrainingArguments.device={args.device}, accelerator.device="
              f"{trainer.accelerator.device}: {cpu_s:.1f} s")
    print(f"{'step':>4}  {'tpu loss':>10}  {'cpu loss':>10}")
    for i, (a, b) in enumerate(zip(tpu_losses, cpu_losses)):
        print(f"{i:4d}  {a:10.4f}  {b:10.4f}")
    rel = max(abs(a - b) / abs(b) for a, b in zip(tpu_losses, cpu_losses))
    print(f"loss {tpu_losses[0]:.3f} -> {tpu_losses[-1]:.3f} on tpu, "
          f"{cpu_losses[0]:.3f} -> {cpu_losses[-1]:.3f} on the cpu; "
          f"largest relative difference {rel:.2e}")


if __name__ == "__main__":
    main()
