"""Float -> integer conversion (lowering::cast) against the CPU: the CPU
truncates toward zero and wraps out-of-range values (x86-64 cvtt through
int64 for int64/uint8, through int32 for int8/int16/int32/uint16, NaN and
out-of-range giving INT_MIN there); XLA's convert saturates."""
import pytest
import torch
import torch_tpu  # noqa: F401

DEV = "tpu"
SPECIAL = [0.0, -0.0, 0.5, 0.99, -0.5, -0.99, 1.5, -1.5, 127.9, 128.0, 200.7, 255.0, 255.9, 256.0,
           300.0, -1.0, -3.7, -128.0, -129.0, -200.0, 1000.0, -1000.0, 32767.0, 32768.0, 65535.0,
           65536.0, 70000.5, -32769.0, 2.0**31 - 1, 2.0**31, 2.0**31 + 5e3, -2.0**31,
           -2.0**31 - 1e4, 2.0**32 + 7, 2.0**40 + 3, 2.0**63, -2.0**63, 2.0**64, 1e20, -1e20,
           float("inf"), float("-inf"), float("nan")]


def values():
    g = torch.Generator().manual_seed(0)
    wide = torch.randn(4000, generator=g, dtype=torch.float64) * torch.logspace(0, 20, 4000, dtype=torch.float64)
    return torch.cat([torch.tensor(SPECIAL, dtype=torch.float64), wide, torch.randn(500, generator=g) * 300])


@pytest.mark.parametrize("src", [torch.float64, torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("dst", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                                 torch.bool, torch.uint16])
def test_float_to_int(src, dst):
    x = values().to(src)
    torch.testing.assert_close(x.to(DEV).to(dst).cpu(), x.to(dst), rtol=0, atol=0)


def test_byte_and_friends():
    x = (torch.randn(64, 33, generator=torch.Generator().manual_seed(1)) * 400)
    for m in ["byte", "char", "short", "int", "long", "bool"]:
        torch.testing.assert_close(getattr(x.to(DEV), m)().cpu(), getattr(x, m)(), rtol=0, atol=0)
    # Through copy_ into an integer tensor and through a complex source.
    out = torch.empty(64, 33, dtype=torch.uint8, device=DEV)
    out.copy_(x.to(DEV))
    torch.testing.assert_close(out.cpu(), x.byte(), rtol=0, atol=0)
    c = torch.complex(x, -x)
    with pytest.warns(UserWarning):
        torch.testing.assert_close(c.to(DEV).to(torch.uint8).cpu(), c.to(torch.uint8), rtol=0, atol=0)
