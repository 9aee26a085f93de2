"""`--module torch_tpu.integrations.torchtitan --config NAME`: TorchTitan's
llama3 configs on `tpu`. NAME is any config of `torchtitan.models.llama3`
(llama3_debugmodel, llama3_8b, ...): the same config, with BlockCausalSDPA as
its attention, CUDA graphs off, `--compile.backend tpu`, and TpuTrainer, which
refuses CUDA-only options at start."""
import dataclasses

from torchtitan.models.llama3 import config_registry as _llama3

from .attention import use_block_causal_sdpa
from .trainer import TpuTrainer


def tpu_config(stock):
    """A stock llama3 Trainer.Config made into a TpuTrainer.Config for `tpu`."""
    fields = {f.name: getattr(stock, f.name) for f in dataclasses.fields(stock) if f.init}
    use_block_causal_sdpa(fields["model_spec"].model)
    fields["training"].disable_cuda_graphs = True
    fields["compile"].backend = "tpu"
    # TorchTitan 0.3.0's default ("spmd_types") hands fully_shard a dp_mesh_dims
    # that torch 2.13 refuses for the plain parameters it meets ("all parameters
    # must be DTensors on the full SPMD mesh"); partial_dtensor is the FSDP2 path
    # with DTensor on the model-parallel axes only, and is what runs here.
    fields["parallelism"].spmd_backend = "partial_dtensor"
    return TpuTrainer.Config(**fields)


LOW_PRECISION = ("float8", "mxfp8", "nvfp4")


def _build(name, stock):
    try:
        config = stock()
    except ImportError as e:
        # TorchTitan builds float8/MX/NVFP4 converters when the config is made,
        # and they import torchao: installing it would not make them run here.
        cuda_only = [p for p in LOW_PRECISION if p in name]
        raise ValueError(f"torch_tpu: --config {name} cannot be built ({e})"
                         + (f"; its {cuda_only[0]} training needs CUDA and is not available on tpu"
                            if cuda_only else "")) from e
    return tpu_config(config)


def __getattr__(name):
    stock = getattr(_llama3, name, None)
    if not name.startswith("llama3_") or not callable(stock):
        raise AttributeError(name)
    return lambda: _build(name, stock)


def __dir__():
    return sorted({n for n in dir(_llama3) if n.startswith("llama3_")} | set(globals()))


def llama3_debugmodel_2layers():
    """The debug model cut to its first 2 layers: the CI test's model."""
    config = tpu_config(_llama3.llama3_debugmodel())
    config.model_spec.model.layers = config.model_spec.model.layers[:2]
    return config
