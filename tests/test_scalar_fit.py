"""A Scalar the CPU converts to the op's element type must fit it: the CPU
raises "value cannot be converted to type T without overflow", and tpu must
raise the same instead of wrapping (300 -> 44 in int8) or saturating (1e40 ->
inf in float32). Ops whose CPU kernels wrap (add, mul) wrap alike."""
import pytest
import torch


def _cases(d):
    i8 = torch.tensor([0, 5, -7, 1], dtype=torch.int8, device=d)
    f32 = torch.tensor([0.5, -2.0, 3.0, 1.0], device=d)
    mask = torch.tensor([True, False, True, False], device=d)
    idx = torch.tensor([1], device=d)
    return {
        "addcmul": lambda: i8.addcmul(i8, i8, value=300),
        "clamp": lambda: i8.clamp(-300, 300),
        "clamp float max": lambda: f32.clamp(max=1e40),
        "clamp_min": lambda: i8.clamp_min(300),
        "fill_": lambda: i8.clone().fill_(300),
        "fill_ 127.9": lambda: i8.clone().fill_(127.9),
        "fill_ nan into int": lambda: i8.clone().fill_(float("nan")),
        "fill_ half": lambda: torch.zeros(2, dtype=torch.half, device=d).fill_(1e5),
        "full bfloat16": lambda: torch.full((2,), 1e39, dtype=torch.bfloat16, device=d),
        "full default dtype": lambda: torch.full((2,), 1e40, device=d),
        "full int8": lambda: torch.full((2,), 300, dtype=torch.int8, device=d),
        "full_like": lambda: torch.full_like(i8, -129),
        "index_fill": lambda: i8.index_fill(0, idx, 300),
        "lerp": lambda: f32.lerp(f32, 1e40),
        "linspace": lambda: torch.linspace(0, 300, 3, dtype=torch.int8, device=d),
        "masked_fill": lambda: i8.masked_fill(mask, 300),
        "masked_fill_": lambda: i8.clone().masked_fill_(mask, -129),
        "new_full": lambda: i8.new_full((2,), 300),
        "scatter value": lambda: i8.scatter(0, idx, 300),
        "threshold": lambda: torch.threshold(i8, 1, 300),
        "where": lambda: torch.where(mask, i8, 300),
        # These fit (or the CPU wraps them too): values, not errors.
        "add wraps": lambda: i8 + 300,
        "fill_ bool 2": lambda: torch.zeros(2, dtype=torch.bool, device=d).fill_(2),
        "fill_ float inf": lambda: torch.zeros(2, device=d).fill_(float("inf")),
        "fill_ int 1.5": lambda: i8.clone().fill_(1.5),
        "fill_ uint8 -1": lambda: torch.zeros(2, dtype=torch.uint8, device=d).fill_(-1),
        "full int8 127": lambda: torch.full((2,), 127, dtype=torch.int8, device=d),
        "where float": lambda: torch.where(mask, i8, 1.5),
    }


def _outcome(fn):
    try:
        return "value", fn().cpu()
    except RuntimeError as e:
        return "error", str(e)


@pytest.mark.parametrize("case", sorted(_cases("cpu")))
def test_scalar_that_does_not_fit_raises_as_on_the_cpu(case):
    want = _outcome(_cases("cpu")[case])
    got = _outcome(_cases("tpu")[case])
    assert got[0] == want[0], (got, want)
    if want[0] == "error":
        assert "without overflow" in want[1]
        assert got[1].splitlines()[0] == want[1].splitlines()[0]
    else:
        torch.testing.assert_close(got[1], want[1], rtol=0, atol=0)
