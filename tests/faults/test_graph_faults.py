"""Graph faults in a fresh process each: an out-of-memory op inside a
defer_and_fuse graph poisons only its dependants (runtime/failure_scope.h);
out-of-range indices raise under TORCH_TPU_CHECK_INDICES=1."""

OOM = """
import torch, torch_tpu
torch_tpu.set_eager_mode("defer_and_fuse")
x_cpu = torch.randn(100); x = x_cpu.to("tpu")
a = x.exp()
big = torch.ones(1 << 38, device="tpu") + 1  # a terabyte
b = (x * 3).sum()
torch.testing.assert_close(a.cpu(), x_cpu.exp())
torch.testing.assert_close(b.cpu(), (x_cpu * 3).sum())
try:
    big[:3].cpu(); print("NO ERROR")
except RuntimeError as e:
    assert isinstance(e, torch.OutOfMemoryError) and "out of memory" in str(e).lower(), e
print("ok", abs((x + 1).sum().item() - (x_cpu + 1).sum().item()) < 1e-3)
"""


def test_out_of_memory_in_a_graph(fault):
    assert "ok True" in fault.run(code=OOM).stdout


INDICES = """
import torch, torch_tpu, torch.nn.functional as F
torch_tpu.set_eager_mode("defer_and_fuse")
logits = torch.randn(4, 3).to("tpu")
loss = F.cross_entropy(logits, torch.tensor([0, 1, 2, 3]).to("tpu"))  # 3 >= 3 classes
try:
    loss.item(); print("NO ERROR")
except IndexError as e:
    assert "nll_loss" in str(e), e
good = F.cross_entropy(logits, torch.tensor([0, 1, 2, 1]).to("tpu"))
ref = F.cross_entropy(logits.cpu(), torch.tensor([0, 1, 2, 1]))
print("ok", abs(good.item() - ref.item()) < 1e-5)
"""


def test_bad_label_raises_with_check_indices(fault):
    assert "ok True" in fault.run(code=INDICES, TORCH_TPU_CHECK_INDICES=1).stdout
