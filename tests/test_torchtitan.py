"""TorchTitan pre-training on `tpu` (docs/torchtitan.md), reduced: the llama3
debug model cut to 2 layers, 64-token sequences, 4 steps. FSDP2 over
tpu_dist (2 processes) against TorchTitan's own steps on the CPU from the
same seed checkpoint and data, and a resume from the step-2 checkpoint
against the uninterrupted run. TorchTitan runs in the virtual environment
scripts/install_titan.sh makes (`make test` installs it)."""
import json
import re
import subprocess

import pytest

from torch_tpu.integrations.torchtitan import runs

LOSS_TOLERANCE = runs.LOSS_TOLERANCE["float32"]  # why this figure: runs.py


@pytest.fixture(scope="module")
def python():
    return runs.titan_python()


@pytest.fixture(scope="module")
def results(tmp_path_factory, python):
    return runs.compare(str(tmp_path_factory.mktemp("titan")), "llama3_debugmodel_2layers", steps=4, save_at=2,
                        seq_len=64, batch=2, devices=("cpu", "tpu x2"))


def test_fsdp2_on_tpu_matches_torchtitan_on_the_cpu(results):
    cpu, tpu = results["cpu"].losses(1, 4), results["tpu x2"].losses(1, 4)
    assert len(set(cpu)) == 4, cpu  # the model learns: a stuck loss would match trivially
    for step, (a, b) in enumerate(zip(tpu, cpu), 1):
        assert abs(a - b) <= LOSS_TOLERANCE, f"step {step}: tpu {a} vs cpu {b}"


def test_resume_from_checkpoint_repeats_the_losses(results):
    assert sorted(results["resumed"].steps) == [3, 4]
    assert results["resumed"].losses(3, 4) == results["tpu x2"].losses(3, 4)
    loads = [line for line in results["resumed"].output.splitlines() if "Loading the checkpoint from" in line]
    assert loads and all("step-2" in line for line in loads), loads


def test_metrics_line_uses_our_memory_stats_and_no_a100_mfu(results):
    step = results["tpu x2"].steps[4]
    assert step["throughput(tps)"] > 0
    assert step["memory/max_reserved(GiB)"] > 0  # torch.tpu.memory_stats(); TorchTitan writes -1 when missing
    assert "mfu(%)" not in step  # the CPU plugin's peak FLOPS are unknown: N/A, not an A100's
    assert "mfu: N/A" in results["tpu x2"].output


# option -> what the error must name. TorchTitan's own check refuses symmetric
# memory first ("For NVIDIA GPUs, parallelism.enable_fsdp_symm_mem is only
# supported for compute capability 9.0 or newer"); ours would name it too.
REFUSED = {
    "--compile.enable --compile.backend inductor": "--compile.backend inductor",
    "--training.no-disable_cuda_graphs": "CUDA graphs (--training.no-disable_cuda_graphs)",
    "--parallelism.enable_fsdp_symm_mem": "parallelism.enable_fsdp_symm_mem",
    "--config llama3_debugmodel_float8": "float8 training needs CUDA and is not available on tpu",
    "--compile.enable activation-checkpoint:full": "--compile.enable with activation-checkpoint:full",
}

# Parses each command line as `torchtitan.train` does, in one interpreter
# (importing TorchTitan takes most of the time), and prints what each raised.
PARSE_EACH = """
import contextlib, io, json, sys
from torchtitan.config import ConfigManager
outcomes = {}
for line in json.loads(sys.argv[1]):
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            ConfigManager().parse_args(line)
        outcomes[" ".join(line)] = None
    except BaseException as e:  # the parser reports by SystemExit, the config by ValueError
        outcomes[" ".join(line)] = err.getvalue() + repr(e)
print(json.dumps(outcomes))
"""


@pytest.fixture(scope="module")
def refusals(python):
    """{option: what parsing raised, None if it parsed}; "" is the config alone."""
    lines = {}
    for option in ["", *REFUSED]:
        config = [] if option.startswith("--config") else ["--config", "llama3_debugmodel_2layers"]
        lines[option] = ["--module", runs.MODULE, *config, *option.split()]
    proc = subprocess.run([python, "-c", PARSE_EACH, json.dumps(list(lines.values()))],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    outcomes = json.loads(proc.stdout.strip().splitlines()[-1])
    return {option: outcomes[" ".join(line)] for option, line in lines.items()}


@pytest.mark.parametrize("option", sorted(REFUSED))
def test_cuda_only_option_fails_at_start_naming_it(refusals, option):
    error = refusals[option]
    assert error is not None, f"{option} was accepted"
    # The command-line parser prints the config's ValueError in a box: unwrap it.
    message = " ".join(re.sub(r"[│╭╮╰╯─]", " ", error).split())
    assert REFUSED[option] in message, message[-3000:]


def test_the_config_alone_parses(refusals):
    """So the refusals come from the options, not from a config that never parses."""
    assert refusals[""] is None


# BlockCausalSDPA on tpu against attention computed document by document on
# the CPU (plain causal SDPA over each document's slice of the row): the
# reference shares no mask code with the module.
ATTENTION_CHECK = """
import torch, torch_tpu
import torch.nn.functional as F
from torch_tpu.integrations.torchtitan.attention import BlockCausalSDPA, block_causal_mask
torch.manual_seed(0)
B, L, N, KV, H = 2, 12, 4, 2, 8
positions = torch.tensor([[0, 1, 2, 3, 4, 0, 1, 2, 0, 1, 2, 3],
                          [5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 0, 1]])  # row 2 starts mid-document
q, k, v = torch.randn(B, L, N, H), torch.randn(B, L, KV, H), torch.randn(B, L, KV, H)
attn = BlockCausalSDPA(BlockCausalSDPA.Config())
out = attn(q.to("tpu"), k.to("tpu"), v.to("tpu"), attention_masks=block_causal_mask(positions.to("tpu")),
           enable_gqa=True).cpu()
expected = torch.empty_like(q)
for b in range(B):
    starts = [i for i in range(L) if positions[b, i] == 0 or i == 0] + [L]
    for s, e in zip(starts, starts[1:]):
        qs, ks, vs = (t[b:b + 1, s:e].transpose(1, 2) for t in (q, k, v))
        expected[b, s:e] = F.scaled_dot_product_attention(qs, ks, vs, is_causal=True,
                                                          enable_gqa=True).transpose(1, 2)[0]
torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
print("ok")
"""


def test_block_causal_attention_matches_attention_per_document(python):
    proc = subprocess.run([python, "-c", ATTENTION_CHECK], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-3000:]
