"""TorchTitan on `tpu` (docs/torchtitan.md):

    torchrun --nproc_per_node=2 -m torchtitan.train \\
        --module torch_tpu.integrations.torchtitan --config llama3_debugmodel ...

`config_registry` turns TorchTitan's llama3 configs into ones for `tpu`,
`attention` holds the block-causal SDPA they use, `trainer` the Trainer that
refuses CUDA-only options, and `assets` makes a local tokenizer and data set.
"""
