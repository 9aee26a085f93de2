"""The three eager modes, deferred graphs and their cut points, debug checks,
and the persistent executable cache."""
import collections
import copy
import os
import re
import subprocess
import sys
import textwrap
import time

import pytest
import torch

import torch_tpu


def counters():
    return collections.defaultdict(int, torch_tpu._C._counters())


def run_python(code, **env):
    full_env = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def defer():
    with torch_tpu.eager_mode("defer_and_fuse"):
        yield


def test_mode_selection_and_context_manager():
    assert torch_tpu.get_eager_mode() == "strict"
    with torch_tpu.eager_mode("defer_and_fuse"):
        assert torch_tpu.get_eager_mode() == "defer_and_fuse"
        with torch_tpu.eager_mode("debug"):
            assert torch_tpu.get_eager_mode() == "debug"
        assert torch_tpu.get_eager_mode() == "defer_and_fuse"
    assert torch_tpu.get_eager_mode() == "strict"
    with pytest.raises(ValueError, match="unknown eager mode"):
        torch_tpu.set_eager_mode("lazy")


@pytest.mark.parametrize("var,mode", [("TORCH_TPU_DEFER_AND_FUSE", "defer_and_fuse"),
                                      ("TPU_LAUNCH_BLOCKING", "debug")])
def test_environment_selects_the_starting_mode(var, mode):
    r = run_python("import torch, torch_tpu; print(torch_tpu.get_eager_mode())", **{var: "1"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == mode


def test_deferred_ops_run_as_one_program(defer):
    a = torch.randn(32, 32)
    x = a.to("tpu")
    torch.tpu.synchronize()  # an earlier test's strict launches may still be queued behind compiles
    before = counters()
    y = x
    for _ in range(30):
        y = torch.tanh(y * 0.9 + 0.1)
    assert counters()["launches"] == before["launches"]  # nothing ran yet
    got = y.cpu()
    after = counters()
    assert after["launches"] == before["launches"] + 1
    assert after["flush.value needed"] == before["flush.value needed"] + 1
    ref = a
    for _ in range(30):
        ref = torch.tanh(ref * 0.9 + 0.1)
    torch.testing.assert_close(got, ref)


def test_dead_intermediates_are_not_outputs(defer):
    x = torch.ones(1000).to("tpu")
    before = torch.tpu.memory_allocated()
    y = x
    for _ in range(10):
        y = y + 1  # nine intermediates are dropped before the flush
    torch.tpu.synchronize()
    assert torch.tpu.memory_allocated() - before == 4000
    torch.testing.assert_close(y.cpu(), torch.full((1000,), 11.0))


def test_synchronize_and_optimizer_step_cut(defer):
    before = counters()
    x = torch.randn(8).to("tpu")
    (x * 2)
    torch.tpu.synchronize()
    assert counters()["flush.synchronize"] == before["flush.synchronize"] + 1
    p = torch.nn.Parameter(torch.randn(4).to("tpu"))
    opt = torch.optim.SGD([p], lr=0.1)
    p.grad = torch.ones(4).to("tpu")
    opt.step()
    assert counters()["flush.optimizer_step"] == before["flush.optimizer_step"] + 1


def test_size_bound_cuts_graphs():
    r = run_python("""
        import torch, torch_tpu
        torch_tpu.set_eager_mode("defer_and_fuse")
        x = torch.zeros(4).to("tpu")
        for _ in range(25):
            x = x + 1
        print(torch_tpu.metrics()["flush_reasons"].get("size_bound", 0), x.cpu().tolist())
    """, TORCH_TPU_FUSE_MAX_OPS="10")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[0] == "2"
    assert "25.0" in r.stdout


def mlp_on_tpu_and_cpu(activation):
    """One small MLP twice: on `tpu`, and on the CPU as the reference."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), activation(), torch.nn.Linear(16, 2))
    ref = torch.nn.Sequential(torch.nn.Linear(8, 16), activation(), torch.nn.Linear(16, 2))
    ref.load_state_dict(model.state_dict())
    return model.to("tpu"), ref


def test_training_loop_graphs_recur_and_hit_the_cache(defer):
    model, ref_model = mlp_on_tpu_and_cpu(torch.nn.ReLU)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(ref_model.parameters(), lr=0.1)
    x, y = torch.randn(16, 8), torch.randint(0, 2, (16,))
    xd, yd = x.to("tpu"), y.to("tpu")
    compiled = []
    for _ in range(6):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xd), yd).backward()
        opt.step()
        ref_opt.zero_grad()
        torch.nn.functional.cross_entropy(ref_model(x), y).backward()
        ref_opt.step()
        compiled.append(counters()["misses"])
    # The steady state compiles nothing new.
    assert compiled[-1] == compiled[-2] == compiled[-3]
    for p, q in zip(model.parameters(), ref_model.parameters()):
        torch.testing.assert_close(p.cpu(), q, rtol=1e-5, atol=1e-6)


def test_repeated_sequence_is_cut_where_it_was_before(defer):
    x = torch.ones(4).to("tpu")
    for _ in range(10):
        x = x * 1.5
    x.cpu()  # a graph of ten muls flushed
    before = counters()["flush.repeat"]
    for _ in range(10):
        x = x * 1.5
    # the same ten ops again: cut without waiting for a value to leave
    assert counters()["flush.repeat"] == before + 1
    torch.testing.assert_close(x.cpu(), torch.full((4,), 1.5 ** 20))


def test_unread_loop_is_cut_where_each_iteration_ends(defer):
    # Inference over batches, the outputs kept and read at the end: no read
    # cuts the loop, so its first graph finds the period (two equal
    # iterations) and every later iteration is cut where it ends. Blocks of
    # any length then run the one iteration's program.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), *[
        torch.nn.Sequential(torch.nn.LayerNorm(16), torch.nn.GELU(), torch.nn.Linear(16, 16),
                            torch.nn.Tanh(), torch.nn.Linear(16, 16)) for _ in range(4)])
    ref = [torch.randn(3, 8) for _ in range(17)]
    tpu_model = copy.deepcopy(model).to("tpu")
    misses, graphs, done = [], [], 0
    with torch.no_grad():
        for block in (4, 3, 6, 4):
            before = counters()
            outs = [tpu_model(x.to("tpu")) for x in ref[done:done + block]]
            after = counters()
            misses.append(after["misses"] - before["misses"])
            graphs.append(after["flush.repeat"] - before["flush.repeat"])
            for x, out in zip(ref[done:done + block], outs):
                torch.testing.assert_close(out.cpu(), model(x), rtol=1e-5, atol=1e-5)
            done += block
    # The first block: a graph of two iterations, then one per iteration.
    assert graphs == [3, 3, 6, 4]
    assert misses[2:] == [0, 0]


def test_short_graphs_do_not_cut_later_ones(defer):
    # Graphs under eight ops (and strict mode's one-op graphs) are not
    # remembered: a later graph starting with the same op must not be cut.
    y = torch.ones(4).to("tpu")
    (y * 3).cpu()
    with torch_tpu.eager_mode("strict"):
        (y * 3).cpu()
    before = counters()["flush.repeat"]
    z = y
    for _ in range(5):
        z = z * 3
    assert counters()["flush.repeat"] == before
    torch.testing.assert_close(z.cpu(), torch.full((4,), 243.0))


def test_failed_flush_poisons_only_its_graph(defer):
    good = (torch.ones(3).to("tpu") * 3)
    good.cpu()  # flushed and valid
    a = torch.ones(3).to("tpu") + 1
    b = a * 5
    torch_tpu._C._fail_next_launch("injected device failure")
    with pytest.raises(RuntimeError, match="injected device failure") as e:
        b.cpu()
    assert "aten::" in str(e.value)
    with pytest.raises(RuntimeError, match="injected device failure"):
        a.cpu()
    with pytest.raises(RuntimeError, match="injected device failure"):
        (b + 1).cpu()  # built on a failed value
    torch.testing.assert_close(good.cpu(), torch.full((3,), 3.0))


def test_switching_modes_flushes_pending_work():
    with torch_tpu.eager_mode("defer_and_fuse"):
        x = torch.ones(2).to("tpu") * 7
        before = counters()["flush.mode_switch"]
    assert counters()["flush.mode_switch"] == before + 1
    assert x.cpu().tolist() == [7.0, 7.0]


def test_strict_error_names_the_python_line():
    x = torch.ones(3).to("tpu")
    torch_tpu._C._fail_next_launch("boom")
    y = x * 2  # this line is named in the error
    with pytest.raises(RuntimeError, match=r"aten::mul.Tensor.*test_eager_modes.py:\d+.*boom"):
        y.cpu()


def test_debug_mode_raises_at_the_failing_op():
    x = torch.ones(3).to("tpu")
    with torch_tpu.eager_mode("debug"):
        torch_tpu._C._fail_next_launch("boom")
        with pytest.raises(RuntimeError, match="boom"):
            x * 2  # raised here, not at a later use


def test_debug_nans_names_the_op_and_line():
    r = run_python("""
        import torch, torch_tpu
        x = -torch.ones(3).to("tpu")
        y = torch.log(x)
    """, TPU_LAUNCH_BLOCKING="1", TORCH_TPU_DEBUG_NANS="1")
    assert r.returncode != 0
    assert "aten::log" in r.stderr and "<string>:4" in r.stderr and "NaN or Inf" in r.stderr


def test_debug_compare_cpu_agrees_and_reports_a_difference():
    r = run_python("""
        import torch, torch_tpu
        x = torch.randn(5, 5).to("tpu")
        y = (x @ x).relu().sum(0)
        print("agreed", y.shape)
        torch_tpu._C._offset_next_cpu_reference(1.0)
        z = x * 3
    """, TPU_LAUNCH_BLOCKING="1", TORCH_TPU_DEBUG_COMPARE_CPU="1")
    assert "agreed torch.Size([5])" in r.stdout, r.stderr
    assert r.returncode != 0
    assert "TORCH_TPU_DEBUG_COMPARE_CPU" in r.stderr and "aten::mul.Tensor" in r.stderr
    assert "<string>:7" in r.stderr and "max abs error 1" in r.stderr


SDPA_COMPARED = """
    import math, torch, torch_tpu
    import torch.nn.functional as F
    torch_tpu.set_eager_mode("debug")
    q, k, v = (torch.randn(2, 2, 4, 8) for _ in range(3))
    mask = torch.zeros(4, 4)
    mask[2:] = torch.finfo(torch.float32).min  # padded rows, as Hugging Face builds them
    t = [x.to("tpu").requires_grad_() for x in (q, k, v)]
    out = F.scaled_dot_product_attention(*t, attn_mask=mask.to("tpu"))
    print("max error", (out.detach().cpu() - F.scaled_dot_product_attention(q, k, v, attn_mask=mask)).abs().max().item())
    g = torch.ones_like(out)
    out.backward(g)
    print("backward done")
"""


def test_debug_compare_cpu_compares_sdpa_through_the_math_path():
    # SDPA reaches _scaled_dot_product_fused_attention_overrideable and its
    # backward, which only backends define: debug mode compares them with
    # PyTorch's math path on the CPU, so a wrong lowering would be named.
    r = run_python(SDPA_COMPARED, TPU_LAUNCH_BLOCKING="1", TORCH_TPU_DEBUG_COMPARE_CPU="1")
    assert r.returncode == 0 and "backward done" in r.stdout, r.stderr[-2000:]
    assert float(r.stdout.split("max error")[1].split()[0]) < 1e-5
    assert "not compared" not in r.stderr, r.stderr


@pytest.mark.parametrize("op, where", [
    ("_scaled_dot_product_fused_attention_overrideable'", "out = F.scaled_dot_product_attention(*t"),
    ("_scaled_dot_product_fused_attention_overrideable_backward'", "out.backward(g)"),
])
def test_debug_compare_cpu_names_a_differing_sdpa(op, where):
    # The test hook shifts the next CPU reference by 1: the forward (or the
    # backward) is then reported as differing, by name.
    assert where in SDPA_COMPARED
    code = SDPA_COMPARED.replace(where, "torch_tpu._C._offset_next_cpu_reference(1.0); " + where, 1)
    r = run_python(code, TPU_LAUNCH_BLOCKING="1", TORCH_TPU_DEBUG_COMPARE_CPU="1")
    assert r.returncode != 0
    assert "differs from the CPU" in r.stderr and "aten::" + op in r.stderr, r.stderr[-2000:]


def test_debug_compare_cpu_leaves_sdpa_dropout_uncompared():
    r = run_python("""
        import torch, torch_tpu
        torch_tpu.set_eager_mode("debug")
        t = torch.randn(1, 2, 4, 8).to("tpu")
        for _ in range(2):
            out = torch.nn.functional.scaled_dot_product_attention(t, t, t, dropout_p=0.5)
        print("finite", bool(out.isfinite().all()))
        torch_tpu._C._offset_next_cpu_reference(1.0)
        z = t * 3
    """, TPU_LAUNCH_BLOCKING="1", TORCH_TPU_DEBUG_COMPARE_CPU="1")
    assert "finite True" in r.stdout, r.stderr
    assert r.stderr.count("draws its own mask; its results are not compared") == 1, r.stderr
    assert r.returncode != 0 and "aten::mul.Tensor" in r.stderr  # comparing still works after it


def test_debug_compare_cpu_compares_factory_ops_made_on_tpu():
    # A factory's reference runs on the CPU, not on the device it names
    # (which recursed until the stack overflowed).
    r = run_python("""
        import torch, torch_tpu
        h = torch.arange(16, device="tpu")
        m = (h >= 14).long() + torch.ones(16, dtype=torch.long, device="tpu")
        print("sum", m.cpu().sum().item())
    """, TPU_LAUNCH_BLOCKING="1", TORCH_TPU_DEBUG_COMPARE_CPU="1")
    assert r.returncode == 0 and "sum 18" in r.stdout, r.stderr[-2000:]


def test_debug_compare_cpu_catches_out_of_range_indices():
    r = run_python("""
        import torch, torch_tpu
        x = torch.randn(3, 4).to("tpu")
        idx = torch.tensor([0, 7]).to("tpu")
        torch.index_select(x, 0, idx)
    """, TPU_LAUNCH_BLOCKING="1", TORCH_TPU_DEBUG_COMPARE_CPU="1")
    assert r.returncode != 0
    assert "IndexError" in r.stderr or "out of range" in r.stderr


WARM_START = """
    import time, torch, torch_tpu
    x = torch.randn(64, 64).to("tpu")
    w = torch.randn(64, 64).to("tpu")
    y = x
    for i in range(12):
        y = torch.tanh(y @ w + i)
        y = (y * y).softmax(-1)
    y.sum().item()
    m = torch_tpu.metrics()
    print(m["graphs_compiled"], m["disk_cache_hits"], m["compile_seconds"])
"""


def test_second_process_warm_starts_from_the_disk_cache(tmp_path):
    env = {"TORCH_TPU_CACHE_DIR": str(tmp_path / "cache")}
    first = run_python(WARM_START, **env)
    second = run_python(WARM_START, **env)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    c1, h1, t1 = first.stdout.split()
    c2, h2, t2 = second.stdout.split()
    assert int(c1) > 0 and int(h1) == 0
    assert int(c2) == 0 and int(h2) == int(c1)
    assert float(t1) >= 5 * float(t2), (t1, t2)


def test_other_xla_flags_do_not_reuse_cached_executables(tmp_path):
    # XLA_FLAGS change the plugin's code generation: an executable compiled
    # under other flags must be compiled afresh, not loaded.
    env = {"TORCH_TPU_CACHE_DIR": str(tmp_path / "cache")}
    first = run_python(WARM_START, XLA_FLAGS="", **env)
    other = run_python(WARM_START, XLA_FLAGS="--xla_cpu_enable_fast_math=false", **env)
    again = run_python(WARM_START, XLA_FLAGS="--xla_cpu_enable_fast_math=false", **env)
    assert all(r.returncode == 0 for r in (first, other, again)), first.stderr + other.stderr
    compiled, hits = first.stdout.split()[:2]
    assert int(compiled) > 0 and int(hits) == 0
    assert other.stdout.split()[:2] == [compiled, "0"]
    assert again.stdout.split()[:2] == ["0", compiled]


def test_concurrent_processes_share_the_cache(tmp_path):
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(tmp_path / "cache"))
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(WARM_START)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    entries = list((tmp_path / "cache").glob("*.exe"))
    assert entries and not list((tmp_path / "cache").glob("*.tmp.*"))
    after = run_python(WARM_START, **{"TORCH_TPU_CACHE_DIR": str(tmp_path / "cache")})
    assert after.stdout.split()[0] == "0"  # everything came from the shared cache


def test_cache_is_bounded(tmp_path):
    env = {"TORCH_TPU_CACHE_DIR": str(tmp_path / "cache"), "TORCH_TPU_CACHE_MAX_BYTES": "200000"}
    r = run_python(WARM_START, **env)
    assert r.returncode == 0, r.stderr
    total = sum(f.stat().st_size for f in (tmp_path / "cache").glob("*.exe"))
    assert total <= 200000


@pytest.mark.parametrize("expr,op", [
    ("torch.index_select(x, 0, torch.tensor([0, 7]).to('tpu'))", "aten::index_select"),
    ("torch.gather(x, 1, torch.tensor([[0], [9], [1]]).to('tpu'))", "aten::gather"),
    ("torch.nn.functional.embedding(torch.tensor([1, 5]).to('tpu'), x)", "aten::embedding"),
    ("x.index_put_((torch.tensor([4]).to('tpu'),), torch.tensor(1.0).to('tpu'))", "aten::index_put_"),
    ("x[torch.tensor([0, -5]).to('tpu')]", "aten::index.Tensor"),
])
def test_debug_mode_raises_index_error_naming_the_op(expr, op):
    code = f"""
        import torch, torch_tpu
        x = torch.randn(3, 4).to("tpu")
        try:
            {expr}
        except IndexError as e:
            print("IndexError:", e)
        else:
            print("no error")
    """
    debug = run_python(code, TPU_LAUNCH_BLOCKING="1")
    assert debug.returncode == 0, debug.stderr
    assert debug.stdout.startswith("IndexError:") and op in debug.stdout, debug.stdout
    strict = run_python(code)  # the device clamps or drops: no error outside debug mode
    assert strict.stdout.strip() == "no error", strict.stdout + strict.stderr


def test_optimizer_step_temporaries_are_not_graph_outputs(defer):
    # The step's graph is cut where it repeats, inside AdamW's last op; that
    # cut waits for the step to return, so AdamW's temporaries (the
    # denominators) are dead and fused away. What stays live: each
    # parameter, its two moments and its gradient, and the loss.
    model, ref = mlp_on_tpu_and_cpu(torch.nn.Tanh)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=True)
    ref_opt = torch.optim.AdamW(ref.parameters(), lr=1e-2, foreach=True)
    x, y = torch.randn(16, 8), torch.randn(16, 2)
    xd, yd = x.to("tpu"), y.to("tpu")
    for i in range(5):
        # The optimizer step's flush does not wait and the worker launches
        # the graph when it can: the last step is counted between two
        # synchronizes, so that its one launch lands inside the window.
        torch.tpu.synchronize()
        before = counters()
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(xd), yd)
        loss.backward()
        opt.step()
        ref_opt.zero_grad()
        ref_loss = torch.nn.functional.mse_loss(ref(x), y)
        ref_loss.backward()
        ref_opt.step()
    torch.tpu.synchronize()
    after = counters()
    params = len(list(model.parameters()))
    assert after["flush.repeat"] == before["flush.repeat"] + 1
    assert after["launches"] == before["launches"] + 1
    assert after["graph_outputs"] - before["graph_outputs"] == 4 * params + 1
    torch.testing.assert_close(loss.cpu(), ref_loss, rtol=1e-5, atol=1e-6)
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.cpu(), q, rtol=1e-5, atol=1e-6)


class _TenMuls(torch.optim.Optimizer):
    """Multiplies each parameter by 1.01 ten times; notes the repeat-cut
    count at the end of its step (inside it)."""

    def __init__(self, params, fail=False):
        super().__init__(params, {})
        self.inside = []
        self.fail = fail

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                for _ in range(10):
                    p.mul_(1.01)
        self.inside.append(counters()["flush.repeat"])
        if self.fail:
            raise RuntimeError("step failed")


def test_repeat_cut_inside_optimizer_step_waits_for_its_end(defer):
    p = torch.nn.Parameter(torch.ones(4).to("tpu"))
    opt = _TenMuls([p])
    opt.step()  # ten muls flushed at the step's end, then remembered
    before = counters()["flush.repeat"]
    opt.step()  # the same ten: a repeat, held until the step returns
    assert opt.inside[-1] == before
    assert counters()["flush.repeat"] == before + 1
    torch.testing.assert_close(p.detach().cpu(), torch.full((4,), 1.01 ** 20))


def test_held_cut_of_a_failed_step_runs_at_the_next_op(defer):
    p = torch.nn.Parameter(torch.ones(4).to("tpu"))
    opt = _TenMuls([p])
    opt.step()  # remembered
    opt.fail = True
    before = counters()["flush.repeat"]
    with pytest.raises(RuntimeError, match="step failed"):
        opt.step()  # a held repeat cut; the post hook never runs
    assert counters()["flush.repeat"] == before
    q = p.detach() * 2  # the held graph runs first
    assert counters()["flush.repeat"] == before + 1
    torch.testing.assert_close(q.cpu(), torch.full((4,), 2 * 1.01 ** 20))
    # The hold ended with that cut: a later repeat outside a step cuts at once.
    x = torch.ones(4).to("tpu")
    for _ in range(10):
        x = x * 1.5
    x.cpu()
    before = counters()["flush.repeat"]
    for _ in range(10):
        x = x * 1.5
    assert counters()["flush.repeat"] == before + 1


def test_donated_parameter_is_paired_with_its_own_new_value(tmp_path):
    # a and b are overwritten in place and c = a + b stays live: three
    # outputs of one type. Each parameter must alias the output that is its
    # own storage's new value (XLA then updates it in place), not merely the
    # first output of its type (which would be c, for a).
    r = run_python("""
        import re, torch, torch_tpu
        torch_tpu.set_eager_mode("defer_and_fuse")
        a = torch.ones(4).to("tpu")
        b = torch.ones(4).to("tpu") * 3
        torch.tpu.synchronize()
        c = a + b    # reads a (parameter 0) and b (parameter 1): output 0
        b.mul_(2)    # output 1
        a.add_(1)    # output 2
        torch.tpu.synchronize()
        print(a.cpu().tolist(), b.cpu().tolist(), c.cpu().tolist())
    """, TORCH_TPU_DUMP_HLO="1", TORCH_TPU_CACHE_DIR=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("] [")[0] == "[2.0, 2.0, 2.0, 2.0"
    assert "[6.0, 6.0, 6.0, 6.0] [4.0, 4.0, 4.0, 4.0]" in r.stdout
    main = [l for l in r.stderr.splitlines() if "func.func public @main" in l][-1]
    aliases = re.findall(r"%v(\d+): tensor<4xf32> \{tf.aliasing_output = (\d+)", main)
    assert aliases == [("0", "2"), ("1", "1")], main
