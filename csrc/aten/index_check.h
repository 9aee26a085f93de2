#pragma once

#include "aten/pch.h"
#include "runtime/device_buffer.h"
#include "runtime/index_flags.h"

namespace torch_tpu::aten {

// Index checks of the indexing ops (gather, index_select, embedding, take,
// index, index_put, index_add/copy/fill/reduce, put, scatter*, nll_loss),
// keyed by the name of the lowering an op is routed to. `op` names the op
// in messages.
//
// Debug mode: reads the indices back and raises IndexError at the op.
void check_indices(const std::string& lowering, const std::string& op,
                   const std::vector<c10::IValue>& values);

// Strict and defer_and_fuse (unless TORCH_TPU_CHECK_INDICES=0): records one
// device-side check per index argument, before the op, into the device's
// check state (runtime/index_flags.h); returns them. Indices on the CPU
// are checked at once. `origin`: the op's Python line, found here if null
// and given back for the op itself.
runtime::OpIndexChecks record_index_checks(const std::string& lowering, const std::string& op,
                                           const std::vector<c10::IValue>& values,
                                           std::shared_ptr<const std::string>& origin);
// The op's results (and written storages), poisoned if one of its checks
// fails.
void watch_index_checks(const runtime::OpIndexChecks& checks,
                        const std::vector<std::shared_ptr<runtime::DeviceBuffer>>& results);

}  // namespace torch_tpu::aten
