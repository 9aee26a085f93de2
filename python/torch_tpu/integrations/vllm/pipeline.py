"""Pipeline parallelism on tpu: what a stage's step takes and hands on.

With `pipeline_parallel_size=N` vLLM's multiprocessing executor starts a
worker per stage, each owning one tpu device and its stage's layers. Every
stage runs every step: the first from the token ids, the others from the
previous stage's IntermediateTensors (the hidden states and the residual).
Each stage's step is still one captured program (worker.py): a stage after
the first takes the received tensors as inputs of its program, and a stage
before the last outputs its own in place of the logits.

How they travel: vLLM's worker hands a stage's IntermediateTensors to its
pipeline group's `isend_tensor_dict`, and the next stage's worker gets them
from `irecv_tensor_dict`. Those bypass the group's device communicator (it
serves only vLLM's CPU platform, whose check an out-of-tree platform fails):
each tensor goes by `torch.distributed.isend` over the group's Gloo CPU group
when it is on the host, else over its device group, which is Gloo as well
here and takes no tpu tensor. So a stage hands vLLM its outputs on the host
(the program's results copied back, the wait a send needs anyway), they cross
to the next stage by Gloo over TCP, and the receiver's copies go to its tpu
device as its program's inputs: device to host to device, which on XLA's
CPU plugin is a memory copy each way. On a TPU, stages would rather pass them
device to device (docs/vllm.md, Pipeline parallelism).
"""
from vllm.distributed import get_pp_group
from vllm.sequence import IntermediateTensors


class Stage:
    """This worker's place in the pipeline, and the tensors it passes on."""

    def __init__(self, runner):
        group = get_pp_group()
        self.first, self.last = group.is_first_rank, group.is_last_rank
        self.keys = ()
        if not (self.first and self.last):
            # vLLM's host buffer of received tensors (its runner makes it at
            # its first dummy run, which this runner does not make), whose
            # keys are also what a stage outputs.
            runner.intermediate_tensors = runner.model.make_empty_intermediate_tensors(
                batch_size=runner.max_num_tokens, dtype=runner.model_config.dtype,
                device=runner.device)
            self.keys = tuple(runner.intermediate_tensors.tensors)
        self._runner = runner

    def step_inputs(self, received: IntermediateTensors | None, device) -> list:
        """The received tensors as program inputs, on `device` (none on the first stage)."""
        if self.first:
            return []
        if received is None:
            raise RuntimeError("vLLM on tpu: a pipeline stage after the first stepped without "
                               "the previous stage's tensors")
        return [received[k].to(device) for k in self.keys]

    def received(self, inputs: list) -> IntermediateTensors | None:
        """What the model takes from the program's inputs of step_inputs()."""
        return None if self.first else IntermediateTensors(dict(zip(self.keys, inputs)))

    def outputs(self, handed_on: IntermediateTensors) -> list:
        """A stage's model output as the program's outputs."""
        return [handed_on[k] for k in self.keys]

    def to_host(self, outputs: list) -> IntermediateTensors:
        """The program's outputs as vLLM sends them (above)."""
        return IntermediateTensors({k: t.cpu() for k, t in zip(self.keys, outputs)})

    def warmup_received(self, t_pad: int) -> IntermediateTensors | None:
        """Tensors of a step of `t_pad` tokens for the warm-up (vLLM's zeroed buffer)."""
        if self.first:
            return None
        return self._runner.sync_and_gather_intermediate_tensors(t_pad, None, False)
