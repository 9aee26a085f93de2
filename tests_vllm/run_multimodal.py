"""Runs vLLM's offline `LLM` on the tiny LLaVA in a fresh process and prints
the generated token ids (and each request's prompt token ids) as JSON on the
last line.

usage: python run_multimodal.py SPEC_JSON  where SPEC has: model (folder), llm
(LLM kwargs), requests (a list of {"prompt": text, "image": a seed of
tiny_llava.image, or None for a text-only request}), sampling (SamplingParams
kwargs)."""
import json
import os
import sys

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main(spec):
    import torch_tpu
    from vllm import LLM, SamplingParams

    import tiny_llava

    llm = LLM(model=spec["model"], **spec["llm"])
    prompts = [{"prompt": r["prompt"]} if r["image"] is None else
               {"prompt": r["prompt"], "multi_modal_data": {"image": tiny_llava.image(r["image"])}}
               for r in spec["requests"]]
    torch_tpu.reset_metrics()
    outs = llm.generate(prompts, SamplingParams(**spec["sampling"]), use_tqdm=False)
    m = torch_tpu.metrics()
    print(json.dumps({"tokens": [list(o.outputs[0].token_ids) for o in outs],
                      "prompt_token_ids": [list(o.prompt_token_ids) for o in outs],
                      "graphs_compiled": m["graphs_compiled"], "cache_misses": m["cache_misses"]}))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
