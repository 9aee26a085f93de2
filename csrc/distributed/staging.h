// Moving collective operands between `tpu` and host memory for the
// host-staged path. Collectives that only move data (broadcast, gathers,
// scatters, all_to_all, send/recv) travel as raw bytes, so every dtype the
// device holds works even where Gloo has no such type; reductions travel in
// their own dtype and are checked against what Gloo can reduce.
#pragma once

#include "aten/pch.h"

#include <torch/csrc/distributed/c10d/Types.hpp>

namespace torch_tpu::distributed {

bool on_tpu(const at::Tensor& t);

// `nbytes` of flat uint8 host memory for staging, reused across collectives
// (see host_pool.h); contents undefined.
at::Tensor staging_bytes(int64_t nbytes);
// A contiguous host copy of `t` in staging memory (a no-copy view when `t`
// already is a contiguous CPU tensor).
at::Tensor host_copy(const at::Tensor& t);
// The host copy of `t` reinterpreted as a flat uint8 tensor.
at::Tensor host_bytes(const at::Tensor& t);
// Reinterprets a flat uint8 host tensor as `like`'s dtype and shape.
at::Tensor from_bytes(const at::Tensor& bytes, const at::Tensor& like);
// Writes a host result into `dst` (a `tpu` tensor, or a CPU tensor that the
// host tensor does not already alias).
void write_back(const at::Tensor& dst, const at::Tensor& host);

// Whether ProcessGroupGloo reduces `dtype` with `op` itself; otherwise the
// reduction runs on the host after an all-gather (see host_reduce.h).
bool gloo_reduces(c10::ScalarType dtype, c10d::ReduceOp::RedOpType op);

std::string describe(const at::Tensor& t);
const char* op_name(c10d::ReduceOp::RedOpType op);

}  // namespace torch_tpu::distributed
