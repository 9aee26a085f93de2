// Before each collective the ranks agree on what they are about to run: the
// collective, root, reduce op, and the dtypes and shapes that must match. A
// mismatch fed to Gloo hangs or fails on one side only; exchanging a small
// fixed-size signature first turns it into the same clear error on every rank.
// The exchange is itself a Gloo all-gather, so a dead or absent rank makes it
// fail within the group's timeout instead of hanging.
#pragma once

#include <string>
#include <vector>

#include "aten/pch.h"

#include <torch/csrc/distributed/c10d/Backend.hpp>

namespace torch_tpu::distributed {

struct Signature {
  std::string collective;  // e.g. "all_reduce"
  int64_t root = -1;
  int64_t reduce_op = -1;
  // Tensors whose dtype and shape must be the same on every rank.
  std::vector<at::Tensor> matching;
  // all_to_all: this rank's send and receive row counts per peer, checked
  // pairwise (what rank i sends to j is what j expects from i).
  std::vector<int64_t> send_rows, recv_rows;
  // Set when this rank's own arguments are invalid: the rank still takes part
  // in the exchange, so the others fail at once instead of waiting for it.
  std::string local_error;
};

// Runs the exchange on `host_group` (CPU tensors only) and throws c10::Error
// with the same message on every rank when the signatures disagree.
void agree(c10d::Backend& host_group, const Signature& sig);

}  // namespace torch_tpu::distributed
