"""Compile visibility: TORCH_TPU_LOG=compile and the slow-compile line."""
import torch_tpu

CODE = """
import torch, torch_tpu
x = torch.randn(11, 13).to("tpu")
(x * 5).cpu()
(torch.randn(7, 3).to("tpu") * 5).cpu()
"""


def test_log_compile_lines_and_cache_tier(run_python, tmp_path):
    cache = str(tmp_path / "cache")
    first = run_python(CODE, TORCH_TPU_LOG="compile", TORCH_TPU_CACHE_DIR=cache)
    assert first.returncode == 0, first.stderr
    lines = [l for l in first.stderr.splitlines() if l.startswith("torch_tpu compile:")]
    mul = [l for l in lines if "aten::mul.Tensor (1 op, at <string>:" in l]
    assert len(mul) == 2
    assert "at <string>:4)" in mul[0] and "compiled: new program" in mul[0]
    assert "at <string>:5)" in mul[1] and "compiled: new input shapes" in mul[1]
    second = run_python(CODE, TORCH_TPU_LOG="compile", TORCH_TPU_CACHE_DIR=cache)
    again = [l for l in second.stderr.splitlines() if "aten::mul.Tensor (1 op, at <string>:" in l]
    assert len(again) == 2 and all("persistent cache hit" in l for l in again)
    quiet = run_python(CODE, TORCH_TPU_CACHE_DIR=str(tmp_path / "other"))
    assert "torch_tpu compile:" not in quiet.stderr


def test_slow_compile_line_says_why(run_python, tmp_path):
    r = run_python(CODE, TORCH_TPU_SLOW_COMPILE_SECONDS="0", TORCH_TPU_CACHE_DIR=str(tmp_path))
    assert r.returncode == 0, r.stderr
    slow = [l for l in r.stderr.splitlines() if "compiling has kept the host waiting" in l]
    assert len(slow) == 1  # one line per burst
    assert "never compiled before" in slow[0] and "programs so far" in slow[0]


def test_env_table_lists_the_log_switches():
    names = {row[0] for row in torch_tpu.env_table()}
    assert {"TORCH_TPU_LOG", "TORCH_TPU_SLOW_COMPILE_SECONDS"} <= names
