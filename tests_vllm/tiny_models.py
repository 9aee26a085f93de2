"""Tiny decoder models with random weights and a tokenizer trained here (no hub),
saved as Hugging Face model folders that vLLM and transformers both load."""
import json
import os

import torch

CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "a tiny model serves many requests on one device",
    "paged attention reads the keys and values through a block table",
    "continuous batching lets new requests join while others decode",
    "numbers one two three four five six seven eight nine ten",
    "hello world, how are you today? fine, thanks.",
] * 20

CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def _tokenizer(folder: str, vocab_size: int):
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders, trainers
    from transformers import PreTrainedTokenizerFast
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<pad>", "<s>", "</s>", "<unk>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>", unk_token="<unk>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(folder)
    return fast


ARCHS = ("llama", "llama-bench", "qwen3", "qwen3-moe", "qwen3-moe-bench", "qwen2-moe", "mixtral",
         "deepseek-v2", "mistral", "gemma2")


def _config(arch: str, vocab: int):
    import transformers as tf
    if arch == "llama-bench":
        # head_dim 64: vLLM's own CPU attention (the benchmark's comparison) refuses 16.
        return tf.LlamaConfig(vocab_size=vocab, hidden_size=256, intermediate_size=512,
                              num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                              max_position_embeddings=1024, bos_token_id=1, eos_token_id=2,
                              pad_token_id=0, initializer_range=0.1), tf.LlamaForCausalLM
    if arch == "qwen3-moe-bench":
        # The benchmark's Llama with its MLP as 8 experts, 2 a token (head size 64, as llama-bench).
        return tf.Qwen3MoeConfig(vocab_size=vocab, hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
                                 num_key_value_heads=2, head_dim=64, num_experts=8, num_experts_per_tok=2,
                                 moe_intermediate_size=256, decoder_sparse_step=1, norm_topk_prob=True,
                                 max_position_embeddings=1024, bos_token_id=1, eos_token_id=2, pad_token_id=0,
                                 initializer_range=0.1, tie_word_embeddings=False), tf.Qwen3MoeForCausalLM
    common = dict(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                  bos_token_id=1, eos_token_id=2, pad_token_id=0, initializer_range=0.1,
                  tie_word_embeddings=False)
    if arch == "llama":
        return tf.LlamaConfig(**common), tf.LlamaForCausalLM
    if arch == "qwen3":
        return tf.Qwen3Config(**common, head_dim=16), tf.Qwen3ForCausalLM
    if arch == "mistral":
        # A window shorter than the prompts, so the sliding window matters.
        return tf.MistralConfig(**common, sliding_window=8), tf.MistralForCausalLM
    if arch == "gemma2":
        return tf.Gemma2Config(**{**common, "tie_word_embeddings": True}, head_dim=16, sliding_window=8, query_pre_attn_scalar=16,
                               attn_logit_softcapping=50.0, final_logit_softcapping=30.0), \
            tf.Gemma2ForCausalLM
    if arch == "qwen3-moe":
        return tf.Qwen3MoeConfig(**common, head_dim=16, num_experts=4, num_experts_per_tok=2,
                                 moe_intermediate_size=64, decoder_sparse_step=1, norm_topk_prob=True), \
            tf.Qwen3MoeForCausalLM
    if arch == "mixtral":
        return tf.MixtralConfig(**common, num_local_experts=4, num_experts_per_tok=2), tf.MixtralForCausalLM
    if arch == "qwen2-moe":
        # A shared expert beside the routed ones, gated by a sigmoid; weights not renormalized.
        return tf.Qwen2MoeConfig(**common, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64,
                                 shared_expert_intermediate_size=128, decoder_sparse_step=1,
                                 norm_topk_prob=False), tf.Qwen2MoeForCausalLM
    if arch == "deepseek-v2":
        # Shared experts, grouped top-k (2 of 8 experts from the best of 2
        # groups), a routing scale; a dense first layer; MLA attention, whose
        # query-key head size (8 + 8) equals the value head size so that vLLM
        # runs it as plain attention under VLLM_MLA_DISABLE=1.
        return tf.DeepseekV2Config(**{**common, "num_key_value_heads": 4}, n_routed_experts=8,
                                   num_experts_per_tok=2, moe_intermediate_size=32, n_shared_experts=1,
                                   first_k_dense_replace=1, topk_method="group_limited_greedy", n_group=2,
                                   topk_group=1, routed_scaling_factor=2.0, norm_topk_prob=False,
                                   kv_lora_rank=32, q_lora_rank=None, qk_nope_head_dim=8,
                                   qk_rope_head_dim=8, v_head_dim=16), tf.DeepseekV2ForCausalLM
    raise ValueError(f"unknown tiny architecture {arch!r}; known: {', '.join(ARCHS)}")


def build(arch: str, root: str, seed: int = 0) -> str:
    """The folder of a tiny `arch` model under `root` (built once)."""
    folder = os.path.join(root, f"tiny-{arch}")
    if os.path.exists(os.path.join(folder, "done")):
        return folder
    os.makedirs(folder, exist_ok=True)
    tok = _tokenizer(folder, 384)
    config, cls = _config(arch, len(tok))
    config.torch_dtype = torch.float32
    torch.manual_seed(seed)
    model = cls(config).eval()
    model.generation_config.eos_token_id = None
    model.save_pretrained(folder)
    open(os.path.join(folder, "done"), "w").write(json.dumps({"arch": arch, "seed": seed}))
    return folder


def perturbed(folder: str, root: str, scale: float, seed: int = 1) -> str:
    """A copy of the model in `folder` under `root`, each weight plus Gaussian
    noise of `scale` times its spread: a draft model that often, not always,
    predicts what the original does."""
    import shutil
    from transformers import AutoModelForCausalLM
    out = os.path.join(root, f"{os.path.basename(folder)}-perturbed")
    if os.path.exists(os.path.join(out, "done")):
        return out
    shutil.copytree(folder, out, dirs_exist_ok=True)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * scale * p.std().clamp(min=1e-3))
    model.save_pretrained(out)
    return out


def prompts(n: int, lo: int, hi: int, vocab: int, seed: int = 0) -> list[list[int]]:
    """n prompts of random token ids with lengths in [lo, hi] (ids past the special tokens)."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(lo, hi + 1, (n,), generator=g).tolist()
    return [torch.randint(4, vocab, (k,), generator=g).tolist() for k in lengths]


def hf_greedy(folder: str, prompt_ids: list[list[int]], max_new_tokens: int) -> list[list[int]]:
    """HF generate() on the CPU, one prompt at a time: the new tokens of each."""
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    out = []
    with torch.no_grad():
        for ids in prompt_ids:
            x = torch.tensor([ids])
            y = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=max_new_tokens,
                               min_new_tokens=max_new_tokens, do_sample=False, eos_token_id=None,
                               pad_token_id=0)
            out.append(y[0, len(ids):].tolist())
    return out


def lora_adapter(folder: str, root: str, name: str, targets: list[str], rank: int, seed: int):
    """A LoRA adapter made with PEFT for the model in `folder`, random A and
    B (PEFT's default B is zero: a no-op adapter), saved under `root` with
    save_pretrained; and the model with it merged (merge_and_unload), saved
    beside it: (adapter folder, merged model folder)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    out, merged = os.path.join(root, f"adapter-{name}"), os.path.join(root, f"merged-{name}")
    if os.path.exists(os.path.join(merged, "config.json")):
        return out, merged
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    torch.manual_seed(seed)
    peft = get_peft_model(model, LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=targets,
                                            init_lora_weights=False))
    peft.save_pretrained(out)
    peft.merge_and_unload().save_pretrained(merged)
    return out, merged
