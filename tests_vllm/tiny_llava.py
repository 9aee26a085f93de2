"""A tiny LLaVA (LlavaForConditionalGeneration) with random weights, built here:
a CLIP vision tower, a projector and the tiny Llama of tiny_models.py, with a
tokenizer trained here plus the image token, and the processor
(CLIPImageProcessor + the tokenizer as a LlavaProcessor) saved beside it, so
that vLLM and transformers both load the folder with nothing from a hub."""
import json
import os

import torch

import tiny_models

IMAGE_TOKEN = "<image>"
IMAGE_SIZE, PATCH_SIZE = 32, 8
IMAGE_TOKENS = (IMAGE_SIZE // PATCH_SIZE) ** 2   # a picture's tokens: its patches ("default" drops CLS)
PROMPT = "USER: <image>\n{} ASSISTANT:"


def build(root: str, seed: int = 0) -> str:
    """The folder of the tiny LLaVA under `root` (built once)."""
    import transformers as tf
    folder = os.path.join(root, "tiny-llava")
    if os.path.exists(os.path.join(folder, "done")):
        return folder
    os.makedirs(folder, exist_ok=True)
    tok = tiny_models._tokenizer(folder, 384)
    tok.add_special_tokens({"additional_special_tokens": [IMAGE_TOKEN]})
    image_token_id = tok.convert_tokens_to_ids(IMAGE_TOKEN)
    text, _ = tiny_models._config("llama", len(tok))
    vision = tf.CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=2, image_size=IMAGE_SIZE, patch_size=PATCH_SIZE,
                                 projection_dim=32, initializer_range=0.1)
    config = tf.LlavaConfig(vision_config=vision, text_config=text, image_token_index=image_token_id,
                            vision_feature_layer=-2, vision_feature_select_strategy="default",
                            projector_hidden_act="gelu", tie_word_embeddings=False)
    config.torch_dtype = torch.float32
    torch.manual_seed(seed)
    model = tf.LlavaForConditionalGeneration(config).eval()
    with torch.no_grad():   # the tower's default init is tiny: make the picture matter
        for p in model.model.vision_tower.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.2)
    model.generation_config.eos_token_id = None
    model.save_pretrained(folder)
    _vision_keys_as_released(os.path.join(folder, "model.safetensors"))
    # The PIL processor: torchvision's needs torchvision, not installed here.
    images = tf.CLIPImageProcessorPil(size={"shortest_edge": IMAGE_SIZE},
                                      crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE})
    processor = tf.LlavaProcessor(image_processor=images, tokenizer=tok, patch_size=PATCH_SIZE,
                                  vision_feature_select_strategy="default", image_token=IMAGE_TOKEN,
                                  num_additional_image_tokens=1,
                                  chat_template=tiny_models.CHAT_TEMPLATE)
    processor.save_pretrained(folder)
    open(os.path.join(folder, "done"), "w").write(json.dumps({"arch": "llava", "seed": seed}))
    return folder


def _vision_keys_as_released(path: str) -> None:
    """transformers 5 saves the vision tower's weights as `vision_tower.X`;
    released LLaVA checkpoints (and vLLM's loader) name them
    `vision_tower.vision_model.X`, which transformers loads too."""
    from safetensors.torch import load_file, save_file
    weights = load_file(path)
    prefix = "vision_tower."
    renamed = {(prefix + "vision_model." + k[len(prefix):] if k.startswith(prefix) else k): v
               for k, v in weights.items()}
    save_file(renamed, path, metadata={"format": "pt"})


def image(seed: int):
    """A random RGB picture of IMAGE_SIZE pixels a side."""
    from PIL import Image
    g = torch.Generator().manual_seed(seed)
    pixels = torch.randint(0, 256, (IMAGE_SIZE, IMAGE_SIZE, 3), generator=g, dtype=torch.uint8)
    return Image.fromarray(pixels.numpy())


def hf_greedy(folder: str, requests: list[dict], max_new_tokens: int) -> list[list[int]]:
    """HF generate() on the CPU, one request at a time: the new tokens of each.
    A request is {"prompt": text, "image": seed or None}."""
    from transformers import AutoProcessor, LlavaForConditionalGeneration
    processor = AutoProcessor.from_pretrained(folder)
    model = LlavaForConditionalGeneration.from_pretrained(folder, dtype=torch.float32).eval()
    out = []
    with torch.no_grad():
        for r in requests:
            pictures = None if r["image"] is None else [image(r["image"])]
            inputs = processor(images=pictures, text=r["prompt"], return_tensors="pt")
            y = model.generate(**inputs, max_new_tokens=max_new_tokens, min_new_tokens=max_new_tokens,
                               do_sample=False, eos_token_id=None, pad_token_id=0)
            out.append(y[0, inputs["input_ids"].shape[1]:].tolist())
    return out
