"""python -m torch_tpu.validate: the command line against the CPU, through its reports."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_tpu
from torch_tpu.validate import compare, models, worker

ROOT = os.path.join(os.path.dirname(__file__), "..")


def validate(*args, timeout=600, env=None):
    env = dict(os.environ, **(env or {}),
               PYTHONPATH=os.path.join(ROOT, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "torch_tpu.validate", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def rows(folder):
    with open(os.path.join(folder, "report.json")) as f:
        report = json.load(f)
    return report, {(r["name"], r["mode"]): r for r in report["results"]}


def test_small_architectures_match_the_cpu_and_the_report_reads_back(tmp_path):
    out = tmp_path / "report"
    proc = validate("--only", "gpt2,bert,llama", "--modes", "strict", "--jobs", "2",
                    "--timeout", "300", "--report", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    report, by = rows(out)
    assert report["totals"] == {"strict": {"match": 3}}
    rtol, atol = torch_tpu.tolerance(torch.float32, "aten::mm")
    for name, cls in (("gpt2", "GPT2LMHeadModel"), ("bert", "BertForMaskedLM"), ("llama", "LlamaForCausalLM")):
        r = by[(name, "strict")]
        assert r["status"] == "match" and r["cls"] == cls, r
        # The heads compute a loss, so gradients exist for every parameter that reaches it.
        assert r["n_grads"] > 10 and r["n_outputs"] >= 2
        assert 0 <= r["out_max_abs"] <= atol and 0 <= r["grad_max_abs"] <= atol
        assert r["tolerance"][0] >= rtol and r["tolerance"][1] >= atol
    md = (out / "report.md").read_text()
    assert "| strict | 3 | 0 |" in md and "| llama | LlamaForCausalLM | strict | match |" in md
    assert (out / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "100%" in proc.stderr  # the progress bar ran to the end


def user_model(forward, imports="torch", weight="torch.ones(4)", x="torch.randn(4)"):
    """The text of a --only file: a one-parameter module whose forward body is `forward`."""
    body = textwrap.indent(textwrap.dedent(forward).strip(), " " * 8)
    return (f"import {imports}\n"
            "class M(torch.nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            f"        self.w = torch.nn.Parameter({weight})\n"
            "    def forward(self, x):\n"
            f"{body}\n"
            "def validate_model():\n"
            f"    return M(), {{\"x\": {x}}}\n")


USER_MODELS = {
    # First, so that its wait overlaps the other runs.
    "hangs_on_tpu.py": user_model("""
        if x.device.type == "tpu":
            time.sleep(3600)
        return self.w * x""", imports="time, torch"),
    "raises_on_cpu.py": user_model("""
        raise ValueError("this model is broken everywhere")"""),
    "segfaults_on_tpu.py": user_model("""
        if x.device.type == "tpu":
            os.kill(os.getpid(), signal.SIGSEGV)
        return self.w * x""", imports="os, signal, torch"),
    # linalg_eig has no lowering (the error names it); the CPU differentiates it.
    "unlowered_op.py": user_model("""
        return torch.linalg.eig(self.w @ x)[0].abs()""",
        weight="torch.eye(3) + 0.1 * torch.arange(9.).reshape(3, 3)", x="torch.eye(3)"),
}


def test_user_models_and_failures_are_rows_with_their_status(tmp_path):
    import transformers
    # A saved model folder (config and weights) runs as saved, without shrinking.
    config = transformers.GPT2Config(n_embd=32, n_layer=1, n_head=4, vocab_size=100, n_positions=32)
    transformers.GPT2LMHeadModel(config).save_pretrained(tmp_path / "saved_gpt2")
    paths = [str(tmp_path / "saved_gpt2")]
    for name, text in USER_MODELS.items():
        (tmp_path / name).write_text(text)
        paths.append(str(tmp_path / name))
    out = tmp_path / "report"
    proc = validate("--only", ",".join(paths + ["no_such_architecture"]), "--modes", "strict",
                    "--jobs", "2", "--timeout", "45", "--report", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "unknown model 'no_such_architecture'" in proc.stderr
    _, by = rows(out)
    status = {os.path.basename(n): r["status"] for (n, _), r in by.items()}
    assert status == {"saved_gpt2": "match", "raises_on_cpu.py": "cpu_error", "segfaults_on_tpu.py": "crash",
                      "hangs_on_tpu.py": "timeout", "unlowered_op.py": "tpu_error",
                      "no_such_architecture": "unknown"}
    r = {os.path.basename(n): r for (n, _), r in by.items()}
    assert r["saved_gpt2"]["cls"] == "GPT2LMHeadModel" and r["saved_gpt2"]["n_grads"] > 5
    assert "this model is broken everywhere" in r["raises_on_cpu.py"]["error"]
    assert "SIGSEGV" in r["segfaults_on_tpu.py"]["error"]
    assert r["unlowered_op.py"]["missing_ops"] == ["aten::linalg_eig"]
    assert "aten::linalg_eig" in (out / "report.md").read_text()


def test_a_crash_or_hang_costs_one_mode_and_resume_keeps_earlier_rows(tmp_path):
    # One child runs all of a model's modes; when it dies or hangs in one,
    # the modes after it run in a new child.
    (tmp_path / "flaky.py").write_text(user_model("""
        mode = torch_tpu.get_eager_mode()
        if x.device.type == "tpu" and mode == "strict":
            os.kill(os.getpid(), signal.SIGSEGV)
        if x.device.type == "tpu" and mode == "debug":
            time.sleep(3600)
        return self.w * x""", imports="os, signal, time, torch, torch_tpu"))
    model, out = str(tmp_path / "flaky.py"), tmp_path / "report"
    first = validate("--only", model, "--modes", "defer_and_fuse", "--report", str(out))
    assert first.returncode == 0, first.stderr[-3000:]
    _, before = rows(out)
    proc = validate("--only", model, "--modes", "strict,debug,defer_and_fuse", "--timeout", "20",
                    "--resume", "--report", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    report, by = rows(out)
    status = {m: r["status"] for (_, m), r in by.items()}
    assert status == {"strict": "crash", "debug": "timeout", "defer_and_fuse": "match"}
    assert "SIGSEGV" in by[(model, "strict")]["error"]
    # The defer_and_fuse row is the first run's, kept and not run again.
    assert by[(model, "defer_and_fuse")] == before[(model, "defer_and_fuse")]
    assert report["totals"]["defer_and_fuse"] == {"match": 1}
    # --rerun runs the crashed row again and keeps the others.
    again = validate("--only", model, "--modes", "strict,debug,defer_and_fuse", "--timeout", "20",
                     "--resume", "--rerun", "crash", "--report", str(out))
    assert again.returncode == 0, again.stderr[-3000:]
    _, after = rows(out)
    assert after[(model, "strict")]["status"] == "crash" and after[(model, "strict")] != by[(model, "strict")]
    assert after[(model, "debug")] == by[(model, "debug")]


@pytest.mark.parametrize("args,message", [
    (("--modes", "strict,fastest"), "unknown mode(s) fastest"),
    (("--only", "/nonexistent/model.py"), "no such file or folder: /nonexistent/model.py"),
    (("--rerun", "mismatch"), "needs --resume"),
    (("--resume", "--rerun", "mismatch,broken"), "--rerun takes statuses"),
])
def test_bad_options_are_clear_errors(tmp_path, args, message):
    proc = validate(*args, "--report", str(tmp_path), timeout=120)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr[-2000:]
    assert not (tmp_path / "report.json").exists()


def test_differences_follow_the_tolerance_table():
    expected = {"a": torch.tensor([1.0, -2.0, 0.0, float("nan")])}
    rtol, atol = torch_tpu.tolerance(torch.float32, "aten::mm")
    near = {"a": expected["a"] + torch.tensor([rtol * 0.5, 0.0, atol * 0.5, 0.0])}
    d = compare.differences(near, expected, {"aten::mm"})
    assert d["ok"] and d["max_abs"] == pytest.approx(atol * 0.5, rel=1e-3)
    # Past the mm entry but within the default: the ops run decide the tolerance.
    assert not compare.differences(near, expected, set())["ok"]
    far = {"a": expected["a"] + torch.tensor([0.0, 0.0, 3 * atol, 0.0])}
    assert not compare.differences(far, expected, {"aten::mm"})["ok"]
    assert not compare.differences({"a": torch.zeros(3)}, expected, set())["ok"]


def test_differences_compare_nan_patterns_and_infinities():
    cpu = {"w": torch.tensor([0.0, 1.0, float("inf"), float("nan")])}
    # The same infinity and NaN as the CPU's: equal.
    assert compare.differences({"w": cpu["w"].clone()}, cpu, set())["ok"]
    # NaN where the CPU has a value (a padding row's gradient), and a value
    # where the CPU has NaN: each named, whatever the tolerance.
    silent = {"w": torch.tensor([float("nan"), 1.0, float("inf"), 5.0])}
    d = compare.differences(silent, cpu, {"aten::mm"})
    assert not d["ok"]
    assert d["nan"] == ["w: 1 NaN where the CPU has a value, 1 values where the CPU has NaN"]
    assert d["worst"] == d["nan"][0]
    assert not compare.differences({"w": torch.tensor([0.0, 1.0, -float("inf"), float("nan")])}, cpu, set())["ok"]


def test_inputs_are_padded_where_the_model_has_a_pad_token():
    from transformers import LlamaConfig, LlamaForCausalLM
    config = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, pad_token_id=3)
    inputs = models.make_inputs(LlamaForCausalLM(config), config)
    ids, mask, labels = inputs["input_ids"], inputs["attention_mask"], inputs["labels"]
    n = ids.shape[1] // 4
    assert ids[0, -n:].eq(3).all() and ids[1, :n].eq(3).all()      # right- and left-padded rows
    assert mask[0, -n:].eq(0).all() and mask[1, :n].eq(0).all() and mask.sum() == ids.numel() - 2 * n
    assert labels[mask == 0].eq(-100).all() and labels[mask == 1].equal(ids[mask == 1])
    config.pad_token_id = None
    assert "attention_mask" not in models.make_inputs(LlamaForCausalLM(config), config)


def test_missing_ops_are_read_from_the_backends_error():
    with pytest.raises(NotImplementedError) as info:
        torch.linalg.eig(torch.eye(3).to("tpu"))
    assert compare.missing_ops(str(info.value)) == ["aten::linalg_eig"]


def test_a_float64_reference_judges_what_the_table_cannot():
    # A gradient of scale 1e6 whose small entry the CPU's float32 gets wrong
    # by 0.05 (cancellation): tpu, off from the CPU by 0.09 there, is past the
    # table's atol, yet as close to float64 as the CPU is -- a match. Off by
    # more than twice the CPU's own error, or NaN where float64 has a number,
    # it is not.
    ref = {"g": torch.tensor([1e6, 1e-3], dtype=torch.float64)}
    cpu = {"g": torch.tensor([1e6, 0.05])}
    close = {"g": torch.tensor([1e6, -0.04])}
    far = {"g": torch.tensor([1e6, 0.3])}
    nan = {"g": torch.tensor([1e6, float("nan")])}
    assert not compare.differences(close, cpu, {"aten::mm"})["ok"]
    assert compare.no_worse_than_cpu(close, cpu, ref)
    assert not compare.no_worse_than_cpu(far, cpu, ref)
    assert not compare.no_worse_than_cpu(nan, cpu, ref)
    assert not compare.no_worse_than_cpu({}, cpu, ref)  # a missing tensor is never a match


@pytest.mark.parametrize("model_type,check", [
    # DeepSeek's latent attention: a key per query head, head parts that add up, MoE among 2 layers.
    ("deepseek_v3", lambda c: c.num_key_value_heads == c.num_attention_heads
     and c.qk_head_dim == c.qk_nope_head_dim + c.qk_rope_head_dim and c.first_k_dense_replace < 2),
    # Dots1's default leaves its expert counts unset.
    ("dots1", lambda c: c.n_routed_experts == 4 and c.num_experts_per_tok == 2),
    # EfficientNet's default is B7; B0's head width goes with B0's coefficients.
    ("efficientnet", lambda c: c.width_coefficient == c.depth_coefficient == 1.0 and c.hidden_dim == 1280),
    # Funnel's layer count is the sum of its block sizes (a property that refuses a set).
    ("funnel", lambda c: list(c.block_sizes) == [1, 1, 1] and c.num_hidden_layers == 3),
    # GLM-4V's rotary sections add up to the shrunk head's frequencies.
    ("glm4v", lambda c: sum(c.text_config.rope_parameters["mrope_section"]) ==
     c.text_config.hidden_size // c.text_config.num_attention_heads // 2),
    # LeViT's attention biases are sized for the grid its 16-pixel patch embedding makes.
    ("levit", lambda c: c.patch_size == 16 and c.image_size // c.patch_size == 4),
    # MobileBERT's embeddings and bottleneck have widths of their own.
    ("mobilebert", lambda c: c.embedding_size == c.true_hidden_size == 32),
    # Parakeet and Speech2Text read (batch, frames, features), Speech2Text
    # decoding text from them.
    ("parakeet_ctc", lambda c: c.encoder_config.num_mel_bins == 80),
    ("speech_to_text", lambda c: c.input_feat_per_channel * c.input_channels == 80),
    # The recurrent ones: EnCodec's LSTMs read (batch, channels, samples) and
    # its codebooks are as wide as its shrunk hidden size; the RNN-T and TDT
    # heads (an LSTM predictor) read Parakeet's (batch, frames, features).
    ("encodec", lambda c: c.codebook_dim == c.hidden_size == 32),
    ("parakeet_rnnt", lambda c: c.encoder_config.num_mel_bins == 80),
    ("parakeet_tdt", lambda c: c.encoder_config.num_mel_bins == 80),
    ("nemotron_asr_streaming", lambda c: c.encoder_config.num_mel_bins == 80),
    # Mistral4's rotary part (head_dim * partial_rotary_factor) is its qk_rope_head_dim.
    ("mistral4", lambda c: c.head_dim * c.rope_parameters["partial_rotary_factor"] == c.qk_rope_head_dim),
    # RWKV's attention width is its own field, set from the default hidden size.
    ("rwkv", lambda c: c.attention_hidden_size == c.hidden_size == 32),
    # Swin's per-stage heads divide every stage width, and its last stage holds a window.
    ("swin", lambda c: all(c.embed_dim * 2 ** i % h == 0 for i, h in enumerate(c.num_heads))
     and c.image_size // c.patch_size >> (len(c.depths) - 1) >= c.window_size),
])
def test_derived_tiny_configs_build_and_run_on_the_cpu(model_type, check):
    torch.manual_seed(0)
    model, inputs = models.build(models.resolve(model_type))
    assert check(model.config), model.config
    outputs, grads = worker._forward_backward(model.float().eval(), inputs)
    assert outputs and grads
    assert sum(p.numel() for p in model.parameters()) < 5_000_000


def test_the_float64_judge_sees_only_the_tensors_past_the_table():
    # "flushed" holds denormals that XLA flushes to zero: far below atol, so
    # the table passes it, yet a float64 judge of it alone would not. "far"
    # is past the table but as close to float64 as the CPU: a match, judged
    # by itself.
    ref = {"flushed": torch.tensor([1e-40, 3e-40], dtype=torch.float64),
           "far": torch.tensor([1e6, 1e-3], dtype=torch.float64)}
    cpu = {"flushed": torch.tensor([1e-40, 3e-40]), "far": torch.tensor([1e6, 0.05])}
    tpu = {"flushed": torch.tensor([0.0, 0.0]), "far": torch.tensor([1e6, -0.04])}
    d = compare.differences(tpu, cpu, {"aten::mm"})
    assert d["failed"] == ["far"] and not d["ok"]
    assert compare.no_worse_than_cpu(tpu, cpu, ref, names=d["failed"])
    assert not compare.no_worse_than_cpu(tpu, cpu, ref)


def test_zero_initialized_parameters_are_woken_so_routing_has_no_ties():
    # AFMoE zero-initializes its router gate: every expert would score the
    # same, and which of the tied experts top-k picks is the CPU's accident.
    torch.manual_seed(0)
    model, inputs = models.build(models.resolve("afmoe"))
    gate = model.model.layers[-1].mlp.router.gate.weight
    assert gate.abs().min() > 0 and gate.std() < 0.1
    hidden = torch.randn(8, model.config.hidden_size)
    scores = torch.sigmoid(hidden @ gate.T)
    top = scores.topk(model.config.num_experts_per_tok + 1, dim=1).values
    assert (top[:, :-1] > top[:, 1:]).all()  # no ties at the cut


@pytest.mark.parametrize("model_type,expected", [
    # two towers: both inputs, the text padded with its mask (CLIP has a pad token)
    ("clip", {"attention_mask", "input_ids", "pixel_values"}),
    ("llava", {"input_ids"}),                  # image features at image tokens: text alone
    ("vit", {"pixel_values"}),
])
def test_inputs_cover_what_the_model_reads(model_type, expected):
    torch.manual_seed(0)
    model, inputs = models.build(models.resolve(model_type))
    assert set(inputs) == expected
    outputs, grads = worker._forward_backward(model.float().eval(), inputs)
    assert outputs and grads


def test_the_float64_reference_runs_models_that_cast_to_float32():
    # FastSpeech2 casts masks with .float() and builds tensors with
    # dtype=torch.float32; its float64 reference must still be float64.
    class Casts(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.tensor([1.0, 1e-8]))

        def forward(self, x):
            return (x.float() * self.w + torch.ones(2, dtype=torch.float32)).to(torch.float32)

    outputs, grads = worker._float64_reference(Casts(), {"x": torch.tensor([1.0, 3.0])}, torch.get_rng_state())
    (out,) = outputs.values()
    assert out.dtype == torch.float64 and grads["w"].dtype == torch.float64
    assert out[1].item() == pytest.approx(1.0 + 3e-8, rel=1e-12)  # float32 would round it to 1


def test_the_float64_judge_takes_rounding_at_the_tensors_scale():
    # A gradient of scale 145 whose worst element the CPU gets luckily close
    # (1e-4 off float64) and tpu 2.6e-4 off: norm-wise both are float32
    # rounding (2e-6 of the scale), under the table's rtol. An error of 5e-4
    # of the scale is not.
    ref = {"g": torch.tensor([145.0, 3.0], dtype=torch.float64)}
    cpu = {"g": torch.tensor([145.0, 3.0 + 1e-4], dtype=torch.float64)}
    rounding = {"g": torch.tensor([145.0, 3.0 + 2.6e-4], dtype=torch.float64)}
    wrong = {"g": torch.tensor([145.0, 3.0 + 7e-2], dtype=torch.float64)}
    rtol = torch_tpu.tolerance(torch.float32)[0]
    assert not compare.no_worse_than_cpu(rounding, cpu, ref)  # one float32 step is the floor without rtol
    assert compare.no_worse_than_cpu(rounding, cpu, ref, rtol=rtol)
    assert not compare.no_worse_than_cpu(wrong, cpu, ref, rtol=rtol)


class _Draws(torch.nn.Module):
    """Draws random numbers in forward on its input's device, as ViTMAE's
    patch mask and VITS's noise do, in each way a model may."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.linspace(-1.0, 1.0, 16))

    def forward(self, x):
        mask = torch.rand(x.shape, device=x.device, dtype=x.dtype)
        noise = torch.randn_like(x) + torch.empty_like(x).normal_(0.0, 2.0) + torch.zeros_like(x).uniform_(-1, 1)
        order = torch.randint(0, 16, (16,), device=x.device)
        return ((x * self.w + noise) * mask)[..., order].cumsum(-1)


def test_random_draws_in_forward_are_the_cpu_runs_in_every_run():
    torch.manual_seed(0)
    model, inputs = _Draws(), {"x": torch.randn(4, 16)}
    pristine = worker.copy.deepcopy(model)
    rng = torch.get_rng_state()
    cpu_out, cpu_grads = worker._forward_backward(model, inputs)
    row = worker._tpu_run(pristine, inputs, "strict", cpu_out, cpu_grads, set(), lambda: None, rng)
    assert row["status"] == "match" and row["out_max_abs"] < 1e-5 and row["grad_max_abs"] < 1e-5, row
    # Without the CPU's draws the tpu run computes on other numbers.
    tpu = worker.copy.deepcopy(pristine).to("tpu")
    other, _ = worker._forward_backward(tpu, worker._to(inputs, "tpu"))
    assert not torch.allclose(next(iter(other.values())), next(iter(cpu_out.values())), atol=1e-2)
    # The float64 reference draws the float32 run's numbers, and the fixed
    # loss projection stays the one every run uses.
    ref_out, ref_grads = worker._float64_reference(model, inputs, rng)
    torch.testing.assert_close(next(iter(ref_out.values())).float(), next(iter(cpu_out.values())), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ref_grads["w"].float(), cpu_grads["w"], rtol=1e-5, atol=1e-5)


RECURRENT_MODEL = """
import torch
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(6, 8, num_layers=2, batch_first=True, bidirectional=True)
        self.gru = torch.nn.GRU(16, 5, batch_first=True)
    def forward(self, x):
        return self.gru(self.lstm(x)[0])[0]
def validate_model():
    return M(), {"x": torch.randn(3, 7, 6)}
"""


def test_recurrent_models_match_the_cpu_with_their_compile_time(tmp_path):
    (tmp_path / "recurrent.py").write_text(RECURRENT_MODEL)
    out = tmp_path / "report"
    proc = validate("--only", str(tmp_path / "recurrent.py"), "--modes", "strict,defer_and_fuse",
                    "--report", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    _, by = rows(out)
    for mode in ("strict", "defer_and_fuse"):
        r = by[(str(tmp_path / "recurrent.py"), mode)]
        assert r["status"] == "match", r
        assert r["n_grads"] == 20  # 2 layers x 2 directions x 4 tensors of the LSTM, the GRU's 4


def test_rows_say_how_long_compiling_took(tmp_path):
    (tmp_path / "one.py").write_text(user_model("return (self.w * x).exp()"))
    out = tmp_path / "report"
    # A cache folder of its own: every program is compiled, none read from disk.
    proc = validate("--only", str(tmp_path / "one.py"), "--modes", "strict", "--report", str(out),
                    env={"TORCH_TPU_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stderr[-3000:]
    _, by = rows(out)
    r = by[(str(tmp_path / "one.py"), "strict")]
    assert r["status"] == "match" and r["programs_compiled"] >= 2, r  # forward and backward at least
    assert 0 < r["compile_seconds"] <= r["seconds"]
    md = (out / "report.md").read_text()
    assert "| compiling (s, programs) |" in md
    assert f"| {r['compile_seconds']:.1f}, {r['programs_compiled']} |" in md
