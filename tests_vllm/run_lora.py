"""Runs vLLM's offline `LLM` with LoRA adapters in a fresh process and prints,
as JSON on the last line, what each phase gave.

usage: python run_lora.py SPEC_JSON  where SPEC has: model (folder), llm (LLM
kwargs), adapters ({name: [int id, folder]}), sampling (SamplingParams kwargs)
and phases, each one of
  {"generate": [[prompt token ids, adapter name or null], ...]}  one batch,
  {"add": name} / {"remove": name}                                 LLM's engine's add_lora / remove_lora.
Each phase's result: "tokens" (or "error": the exception's type and message),
and the program cache misses and compiles it caused.
"""
import json
import os
import sys

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


def main(spec):
    import torch_tpu
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.lora.request import LoRARequest

    llm = LLM(model=spec["model"], **spec["llm"])
    adapters = {name: LoRARequest(name, i, path) for name, (i, path) in spec["adapters"].items()}
    params = SamplingParams(**spec["sampling"])
    results = []
    for phase in spec["phases"]:
        before = torch_tpu.metrics()
        got = {}
        try:
            if "generate" in phase:
                prompts = [TokensPrompt(prompt_token_ids=p) for p, _ in phase["generate"]]
                loras = [adapters[a] if a else None for _, a in phase["generate"]]
                outs = llm.generate(prompts, params, lora_request=loras, use_tqdm=False)
                got["tokens"] = [list(o.outputs[0].token_ids) for o in outs]
            elif "add" in phase:
                got["result"] = llm.llm_engine.add_lora(adapters[phase["add"]])
            else:
                got["result"] = llm.llm_engine.remove_lora(adapters[phase["remove"]].lora_int_id)
        except Exception as e:  # noqa: BLE001  (the test checks the message)
            got["error"] = f"{type(e).__name__}: {e}"
        after = torch_tpu.metrics()
        got["cache_misses"] = after["cache_misses"] - before["cache_misses"]
        got["graphs_compiled"] = after["graphs_compiled"] - before["graphs_compiled"]
        results.append(got)
    print(json.dumps(results))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
