"""TorchTPU's Pallas entry points (`pallas.py`, `tpu_torch_pallas.py`). Their
callers ask Pallas for the TPU's information (VMEM size) outside kernel
traces, before they trace: it is answered with the chip kernels are traced
for (jax_lower.answer_tpu_info_on_jax_cpu)."""
from ...kernels import jax_lower

jax_lower.answer_tpu_info_on_jax_cpu()
