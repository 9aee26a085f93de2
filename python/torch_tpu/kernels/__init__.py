"""User kernels as PyTorch operators: a StableHLO module (custom_ops.py,
`torch_tpu.stablehlo_op`) or a JAX/Pallas function (jax_op.py,
`torch_tpu.pallas.jax_op`), traced to StableHLO by jax_lower.py, with the
traced text kept in the persistent cache by trace_cache.py."""
