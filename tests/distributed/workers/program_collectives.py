"""torch_tpu.program_collectives on two ranks: all-reduce and all-gather
inside one captured program (three launches on new inputs, one program),
and run eagerly, in float32, bfloat16 and int64, against the same sums and
concatenations of every rank's inputs computed on CPU tensors; an element
type the handlers do not take is the op's error on every rank, no hang."""
import torch
from torch_tpu.compile.capture import CapturedFunction
from torch_tpu.program_collectives import ProgramCollectives

from _common import init, report

rank, world, dev = init("gloo")
pc = ProgramCollectives(list(range(world)))
checks = {}


def inputs(r, step, dtype):
    g = torch.Generator().manual_seed(100 * r + step)
    if dtype.is_floating_point:
        return torch.randn(3, 4, generator=g).to(dtype)
    return torch.randint(-1000, 1000, (3, 4), generator=g, dtype=dtype)


weights = [torch.randn(4, 4, generator=torch.Generator().manual_seed(r)) for r in range(world)]
w = weights[rank].to(dev)


def layer(x):
    # A row-parallel product (partial sums all-reduced), then every rank's
    # rows gathered, as vLLM's tensor-parallel layers and logits do.
    y = pc.all_reduce(x @ w)
    return [pc.all_gather(y * (rank + 1)) + 1]


step = CapturedFunction(layer, "program_collectives test")
ok = True
for i in range(3):
    x = inputs(rank, i, torch.float32)
    got = step([x.to(dev)])[0].cpu()
    y = sum(inputs(r, i, torch.float32) @ weights[r] for r in range(world))
    want = torch.cat([y * (r + 1) for r in range(world)]) + 1
    ok = ok and torch.allclose(got, want, rtol=1e-5, atol=1e-5)
checks["captured_three_launches"] = ok
checks["captured_one_program"] = len(step.programs) == 1

for dtype in (torch.float32, torch.bfloat16, torch.int64):
    x = inputs(rank, 7, dtype)
    everyone = [inputs(r, 7, dtype) for r in range(world)]
    want = everyone[0].clone()
    for other in everyone[1:]:
        want += other
    checks[f"eager_all_reduce_{dtype}"] = torch.equal(pc.all_reduce(x.to(dev)).cpu(), want)
    checks[f"eager_all_gather_{dtype}"] = torch.equal(pc.all_gather(x.to(dev)).cpu(), torch.cat(everyone))

try:
    pc.all_reduce(torch.ones(3, dtype=torch.uint8, device=dev)).cpu()
    checks["uint8_is_refused"] = False
except RuntimeError as e:
    checks["uint8_is_refused"] = "unsupported element type" in str(e)
# The group still serves after the failed op.
checks["after_error"] = torch.equal(pc.all_reduce(torch.ones(2, device=dev)).cpu(), torch.full((2,), float(world)))

report(checks)
