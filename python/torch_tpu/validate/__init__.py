"""`python -m torch_tpu.validate`: which models run on tpu and match the CPU.

models.py enumerates Hugging Face architectures and derives tiny configs and
inputs; worker.py runs one model in one mode (in a subprocess of its own);
compare.py measures the differences against the tolerance table; report.py
writes the markdown, JSON and PNG reports; __main__.py is the command line.
"""
