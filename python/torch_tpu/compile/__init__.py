"""torch.compile on `tpu`: the Dynamo backend "tpu" (dynamo.py; public as
`torch_tpu.dynamo`), Dynamo's view of the device (device_interface.py),
the default backend's hand-off of tpu graphs to it (default_backend.py) and
the graph-time grouped matmul (grouped_mm.py)."""
