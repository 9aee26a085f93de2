"""A tokenizer and a text data set made locally, for TorchTitan's
`--hf_assets_path` and `--dataloader.dataset_path` (nothing from the hub).

    python -m torch_tpu.integrations.torchtitan.assets DIR
writes DIR/tokenizer/{tokenizer.json,tokenizer_config.json} and
DIR/data/train.json (one {"text": ...} object per line, what TorchTitan's
c4_test loader reads with `datasets.load_dataset(path, split="train")`)."""
import json
import os
import random
import sys

WORDS = ("the a of to and in is was for on with as by at from that this it be are were an or which "
         "model device train step loss token layer weight data batch shard gather reduce compile graph "
         "program tensor memory host chip core time value sum mean norm head query key attention rotary "
         "north south river stone bread light green small large early later window garden letter music").split()


def texts(count: int, seed: int = 0) -> list[str]:
    """`count` documents of seeded pseudo-English, 20 to 300 words each."""
    rng = random.Random(seed)
    docs = []
    for _ in range(count):
        sentences = []
        for _ in range(rng.randint(2, 20)):
            words = [rng.choice(WORDS) for _ in range(rng.randint(5, 15))]
            sentences.append(" ".join(words).capitalize() + ".")
        docs.append(" ".join(sentences))
    return docs


def make_tokenizer(folder: str, corpus: list[str], vocab_size: int = 512) -> str:
    """A byte-level BPE tokenizer trained on `corpus`, with <|begin_of_text|> and
    <|end_of_text|> as BOS and EOS (TorchTitan adds both to each document)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    bos, eos = "<|begin_of_text|>", "<|end_of_text|>"
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[bos, eos],
                                                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    os.makedirs(folder, exist_ok=True)
    tok.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": bos, "eos_token": eos, "add_bos_token": True, "add_eos_token": True}, f)
    return folder


def make_dataset(folder: str, corpus: list[str], copies: int = 1) -> str:
    """`copies` back-to-back copies of `corpus`. TorchTitan gives data-parallel
    rank r the r-th contiguous slice of the data set, so with as many copies
    as ranks every rank reads `corpus` from its start: the same rows a single
    process reads, which makes an N-process run comparable with a 1-process one."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "train.json"), "w") as f:
        for _ in range(copies):
            for text in corpus:
                f.write(json.dumps({"text": text}) + "\n")
    return folder


def make_assets(root: str, documents: int = 400, copies: int = 2) -> tuple[str, str]:
    """(tokenizer folder, data folder) under `root`."""
    corpus = texts(documents)
    return (make_tokenizer(os.path.join(root, "tokenizer"), corpus),
            make_dataset(os.path.join(root, "data"), corpus, copies))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m torch_tpu.integrations.torchtitan.assets DIR")
    print(*make_assets(sys.argv[1]))
