"""`cache_model.py OUT.json`: a few training steps of a small MLP on tpu
(strict mode); writes the losses and the cache counters to OUT.json."""
import json
import sys

import torch

import torch_tpu

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
x, y = torch.randn(32, 8), torch.randint(0, 3, (32,))
losses = {}
for device in ("cpu", "tpu"):
    m = torch.nn.Sequential(*[torch.nn.Linear(l.in_features, l.out_features) if isinstance(l, torch.nn.Linear)
                              else torch.nn.Tanh() for l in model])
    m.load_state_dict(model.state_dict())
    m = m.to(device)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    losses[device] = []
    for _ in range(4):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(m(x.to(device)), y.to(device))
        loss.backward()
        opt.step()
        losses[device].append(loss.item())
json.dump(dict(losses=losses, counters=torch_tpu._C._counters()), open(sys.argv[1], "w"))
