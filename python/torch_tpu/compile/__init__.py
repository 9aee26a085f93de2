"""torch.compile on `tpu`: the Dynamo backend "tpu" (dynamo.py; public as
`torch_tpu.dynamo`) and the graph-time kernels it needs (grouped_mm.py)."""
