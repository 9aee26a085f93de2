"""Names that upstream projects call in Google's TorchTPU, answered by ours.

Helion's Pallas launcher and Inductor's Pallas backend import
`torch_tpu._internal.pallas.pallas` (JaxCallable, jax_placeholder,
_get_kernel_invocation_key), `torch_tpu._internal.pallas.tpu_torch_pallas`
(register_custom_kernel, lookup_custom_kernel, call_custom_kernel) and
`torch_tpu._internal.utils.hardware` (get_tpu_device_name). Each is a thin
front over the custom-kernel machinery in torch_tpu/kernels/ (one kernel
registry, one lowering), with the signatures those callers use; the tests in
tests/test_internal_pallas.py and tests_helion/test_contract.py read each
caller's own source, so a change upstream fails there. Nothing else of TorchTPU's private API is provided.
"""
