"""torch_tpu seen from other libraries, through their public interfaces only:
accelerate.py makes Hugging Face accelerate (and so the Trainer) pick `tpu`."""
