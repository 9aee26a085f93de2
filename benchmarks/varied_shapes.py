"""Work whose shapes vary without being marked (issue 47): each request its
own prompt length, each training batch padded to its own longest sequence.

  generate   a tiny Hugging Face Llama (2 layers, hidden 64): greedy
             generate(max_new_tokens=8) for 18 prompts of lengths 3..20, one
             after another, nothing marked
  train_pad  the same model trained by a plain PyTorch loop, 8 steps of 4
             sequences of random lengths 4..40 padded with pad_sequence
             (labels -100 on the padding), SGD
  train_fixed  the same loop with every sequence 40 long: what the
             variable-length run's program count is compared with
  trainer_pad  the Hugging Face Trainer (AdamW, 8 steps of 4) over 32
             sequences of random lengths 4..40, batched by
             DataCollatorWithPadding (labels -100 on the padding)
  trainer_fixed  the same Trainer run with every sequence 40 long

in strict, defer_and_fuse and compile (torch.compile(backend="tpu") of the
forward; Dynamo's automatic dynamic shapes decide), each with automatic
dynamic dimensions on (the default) and off (TORCH_TPU_AUTO_DYNAMIC=0), against
PyTorch eager on the CPU in the same process (run once before, to warm it, then
timed). Every measurement runs in a fresh process with an empty
TORCH_TPU_CACHE_DIR. Tokens and losses on tpu are compared with the CPU's.

    python3 benchmarks/varied_shapes.py [--workloads generate] [--configs strict]

Prints one table: CPU seconds, tpu seconds, their ratio, programs compiled.
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = ["strict", "defer_and_fuse", "compile"]
WORKLOADS = ["generate", "train_pad", "train_fixed", "trainer_pad", "trainer_fixed"]

sys.path.insert(0, HERE)
from first_step import run_fresh, tiny_llama  # noqa: E402  (a sibling script)


def generate_all(model, device, compile_forward):
    import torch

    if compile_forward:
        model.forward = torch.compile(model.forward, backend="tpu")
    outs = []
    for n in range(3, 21):
        prompt = torch.randint(3, 256, (1, n), generator=torch.Generator().manual_seed(n))
        with torch.no_grad():
            out = model.generate(prompt.to(device), attention_mask=torch.ones_like(prompt).to(device),
                                 max_new_tokens=8, min_new_tokens=8, do_sample=False)
        outs.append(out.cpu()[0].tolist())
    return outs


def lengths(g, fixed, n):
    import torch

    return [40 if fixed else int(torch.randint(4, 41, (1,), generator=g)) for _ in range(n)]


def train_all(model, device, compile_forward, fixed=False):
    import torch
    from torch.nn.utils.rnn import pad_sequence

    model.train()
    forward = torch.compile(model, backend="tpu") if compile_forward else model
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(8):
        seqs = [torch.randint(3, 256, (n,), generator=g) for n in lengths(g, fixed, 4)]
        ids = pad_sequence(seqs, batch_first=True, padding_value=0)
        mask = pad_sequence([torch.ones_like(s) for s in seqs], batch_first=True)
        labels = pad_sequence(seqs, batch_first=True, padding_value=-100)
        loss = forward(input_ids=ids.to(device), attention_mask=mask.to(device), labels=labels.to(device)).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def trainer_all(model, device, compile_forward, fixed=False):
    """The Trainer's logged loss of each of its 8 steps."""
    import tempfile

    import tokenizers
    import torch
    import transformers
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)
    vocab = {"[PAD]": 0, **{f"t{i}": i for i in range(1, 256)}}
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="t1")),
        pad_token="[PAD]")
    g = torch.Generator().manual_seed(0)
    rows = [{"input_ids": torch.randint(3, 256, (n,), generator=g).tolist()} for n in lengths(g, fixed, 32)]
    pad = transformers.DataCollatorWithPadding(tok, padding="longest")

    def collate(features):
        batch = pad(features)
        batch["labels"] = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
        return batch

    with tempfile.TemporaryDirectory() as out:
        args = transformers.TrainingArguments(
            output_dir=out, per_device_train_batch_size=4, max_steps=8, logging_steps=1, optim="adamw_torch",
            learning_rate=1e-3, report_to=[], save_strategy="no", use_cpu=device == "cpu",
            torch_compile=compile_forward,  # PyTorch's default backend hands tpu graphs to ours
            dataloader_num_workers=0, seed=0)
        trainer = transformers.Trainer(model=model, args=args, train_dataset=rows, data_collator=collate)
        trainer.train()
    return [e["loss"] for e in trainer.state.log_history if "loss" in e]


WORK = {
    "generate": generate_all,
    "train_fixed": lambda m, d, c: train_all(m, d, c, fixed=True),
    "train_pad": train_all,
    "trainer_fixed": lambda m, d, c: trainer_all(m, d, c, fixed=True),
    "trainer_pad": trainer_all,
}


def child(workload, config):
    import torch
    import torch_tpu

    work = WORK[workload]
    cpu_model = tiny_llama()
    state = {k: v.clone() for k, v in cpu_model.state_dict().items()}
    work(tiny_llama(), "cpu", False)  # warm the CPU path
    start = time.perf_counter()
    ref = work(cpu_model, "cpu", False)
    cpu_s = time.perf_counter() - start
    torch_tpu.set_eager_mode("defer_and_fuse" if config == "defer_and_fuse" else "strict")
    model = tiny_llama()
    model.load_state_dict(state)
    if not workload.startswith("trainer"):  # the Trainer moves it itself
        model = model.to("tpu")
    before = torch_tpu.metrics()
    start = time.perf_counter()
    got = work(model, "tpu", config == "compile")
    tpu_s = time.perf_counter() - start
    after = torch_tpu.metrics()
    if workload == "generate":
        equal = got == ref
    else:
        rtol, atol = torch_tpu.tolerance(torch.float32)
        equal = bool(torch.allclose(torch.tensor(got), torch.tensor(ref), rtol=10 * rtol, atol=10 * atol))
    print("RESULT " + json.dumps({
        "cpu_s": cpu_s, "tpu_s": tpu_s, "equal": equal,
        "programs": after["graphs_compiled"] - before["graphs_compiled"],
        "dims_made_dynamic": after["dims_made_dynamic"] - before["dims_made_dynamic"],
        "programs_saved_by_padding": after["programs_saved_by_padding"] - before["programs_saved_by_padding"]}))


def run_child(workload, config, automatic, timeout):
    return run_fresh(__file__, [workload, config], timeout,
                     {"TORCH_TPU_AUTO_DYNAMIC": "1" if automatic else "0"})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--timeout", type=int, default=900, help="seconds per measurement")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    print(f"{'work':<13} {'config':<15} {'automatic':<9} {'cpu s':>7} {'tpu s':>8} {'ratio':>6} "
          f"{'programs':>8} {'dynamic':>7} {'saved':>6}  equal")
    for workload in args.workloads.split(","):
        for config in args.configs.split(","):
            for automatic in (False, True):
                r = run_child(workload, config, automatic, args.timeout)
                if "error" in r:
                    print(f"{workload:<13} {config:<15} {str(automatic):<9} {r['error']}")
                    continue
                print(f"{workload:<13} {config:<15} {str(automatic):<9} {r['cpu_s']:>7.2f} {r['tpu_s']:>8.2f} "
                      f"{r['tpu_s'] / r['cpu_s']:>5.0f}x {r['programs']:>8} {r['dims_made_dynamic']:>7} "
                      f"{r['programs_saved_by_padding']:>6}  {r['equal']}", flush=True)


if __name__ == "__main__":
    main()
