"""Loss curve of a tied GPT-2 (tiny config, no dropout) trained with AdamW for
10 steps on the CPU and on tpu, side by side: the check of issue 17 that a tied
model trains on tpu exactly as on the CPU. Run it against an older build
(PYTHONPATH=<old checkout>/python) to see the curve diverge when module.to()
unties the embedding and the head.

    python3 scripts/tied_gpt2_curve.py [--steps 10]
"""
import argparse
import copy

import torch
import transformers

import torch_tpu  # noqa: F401  (registers tpu)


def train(model, device, batches):
    model.to(device)
    tied = model.lm_head.weight is model.transformer.wte.weight
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    losses = []
    for x in batches:
        opt.zero_grad()
        loss = model(input_ids=x.to(device), labels=x.to(device)).loss
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return tied, losses


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args()
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=64, n_embd=32, n_layer=2, n_head=4, n_positions=32,
                                  resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                  bos_token_id=0, eos_token_id=0)
    init = transformers.GPT2LMHeadModel(cfg)
    g = torch.Generator().manual_seed(2)
    batches = [torch.randint(0, 64, (2, 16), generator=g) for _ in range(args.steps)]
    cpu_tied, cpu = train(copy.deepcopy(init), "cpu", batches)
    tpu_tied, tpu = train(copy.deepcopy(init), "tpu", batches)
    print(f"tied after .to(): cpu {cpu_tied}, tpu {tpu_tied}")
    print("step  cpu loss      tpu loss      |diff|")
    for i, (a, b) in enumerate(zip(cpu, tpu)):
        print(f"{i + 1:4d}  {a:.8f}  {b:.8f}  {abs(a - b):.2e}")


if __name__ == "__main__":
    main()
