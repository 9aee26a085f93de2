"""Ops without a lowering: NotImplementedError naming the op, or, with
TORCH_TPU_CPU_FALLBACK=1, a CPU run that matches the CPU with one warning per op."""
import pytest
import torch
import torch_tpu

# Ops nobody is expected to lower soon; each is checked against lowered_ops().
UNLOWERED = {
    "bessel_j0": ("aten::special_bessel_j0", "bessel_j0"),
    "inv": ("aten::linalg_inv_ex", "linalg_inv_ex"),
}


def _require_unlowered(key):
    op, _ = UNLOWERED[key]
    if any(name == op or name.startswith(op + ".") for name in torch_tpu.lowered_ops()):
        pytest.skip(f"{op} has a lowering now; pick another unlowered op")


def test_lowered_ops_is_sorted_list_of_aten_names():
    ops = torch_tpu.lowered_ops()
    assert ops == sorted(ops)
    # torch_tpu:: ops are the backend's own (the RNN layer loops that
    # csrc/aten/recurrent.cpp defines); every other lowering is an ATen op's.
    assert all(o.startswith(("aten::", "torch_tpu::")) for o in ops)


def test_env_table_declares_fallback_variable():
    rows = {name: (meaning, value) for name, meaning, value in torch_tpu.env_table()}
    assert "TORCH_TPU_CPU_FALLBACK" in rows
    assert rows["TORCH_TPU_CPU_FALLBACK"][1] in ("0", "1")


@pytest.mark.parametrize("key", list(UNLOWERED))
def test_unlowered_op_raises_not_implemented(key, tpu, run_python):
    _require_unlowered(key)
    # in a subprocess: the fallback variable may be set for this process
    r = run_python(
        f"""
        import torch, torch_tpu
        x = torch.tensor([[4.0, 2.0], [2.0, 3.0]]).to("tpu")
        try:
            {'torch.special.bessel_j0(x)' if key == 'bessel_j0' else 'torch.linalg.inv(x)'}
            print("NO ERROR")
        except NotImplementedError as e:
            print("NotImplementedError:", e)
        """,
        TORCH_TPU_CPU_FALLBACK=None,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout.strip()
    assert out.startswith("NotImplementedError:"), out
    assert UNLOWERED[key][1] in out and "tpu" in out
    assert "TORCH_TPU_CPU_FALLBACK" in out


def test_no_lowering_in_process_raises(tpu):
    from torch_tpu import env_table
    if dict((n, v) for n, _, v in env_table())["TORCH_TPU_CPU_FALLBACK"] == "1":
        pytest.skip("fallback enabled in this process")
    _require_unlowered("bessel_j0")
    with pytest.raises(NotImplementedError, match="bessel_j0"):
        torch.special.bessel_j0(torch.ones(3).to(tpu))


FALLBACK_SCRIPT = """
import warnings, torch, torch_tpu
warnings.simplefilter("always")
x = torch.linspace(0.1, 5.0, 9)
A = torch.tensor([[4.0, 2.0, 0.4], [2.0, 3.0, 0.5], [0.4, 0.5, 2.0]])
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    r1 = torch.special.bessel_j0(x.to("tpu"))
    r2 = torch.special.bessel_j0(x.to("tpu")[::2])
    r3 = torch.special.bessel_j0(x.to("tpu"))
    inv1 = torch.linalg.inv(A.to("tpu"))
    inv2 = torch.linalg.inv(A.to("tpu"))
    out = torch.empty(9).to("tpu")
    torch.special.bessel_j0(x.to("tpu"), out=out)
msgs = [str(w.message) for w in caught if "TORCH_TPU_CPU_FALLBACK" in str(w.message)]
assert r1.device.type == "tpu" and inv1.device.type == "tpu", (r1.device, inv1.device)
torch.testing.assert_close(r1.cpu(), torch.special.bessel_j0(x))
torch.testing.assert_close(r2.cpu(), torch.special.bessel_j0(x[::2]))
torch.testing.assert_close(r3.cpu(), torch.special.bessel_j0(x))
torch.testing.assert_close(inv1.cpu(), torch.linalg.inv(A))
torch.testing.assert_close(inv2.cpu(), torch.linalg.inv(A))
torch.testing.assert_close(out.cpu(), torch.special.bessel_j0(x))
print("WARNINGS", len(msgs))
for m in msgs:
    print("W:", m)
print("OK")
"""


def test_cpu_fallback_matches_cpu_and_warns_once_per_op(run_python):
    _require_unlowered("bessel_j0")
    _require_unlowered("inv")
    r = run_python(FALLBACK_SCRIPT, TORCH_TPU_CPU_FALLBACK="1")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    lines = r.stdout.strip().splitlines()
    assert lines[-1] == "OK"
    warnings = [l for l in lines if l.startswith("W:")]
    # one per op: bessel_j0 (3 calls + out=) and linalg_inv_ex (2 calls)
    assert len(warnings) == 2, warnings
    assert sum("bessel_j0" in w for w in warnings) == 1
    assert sum("linalg_inv_ex" in w for w in warnings) == 1


def test_cpu_fallback_inplace_through_view(run_python):
    r = run_python(
        """
        import torch, torch_tpu, warnings
        warnings.simplefilter("ignore")
        x = torch.arange(8.0)
        t = x.to("tpu")
        v = t[1::2]
        torch.ops.aten.special_bessel_j0.out(v.clone(), out=v)  # fallback writes into a view
        x[1::2] = torch.special.bessel_j0(x[1::2])
        torch.testing.assert_close(t.cpu(), x)
        torch.testing.assert_close(v.cpu(), x[1::2])
        print("OK")
        """,
        TORCH_TPU_CPU_FALLBACK="1",
    )
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert r.stdout.strip() == "OK"
