#pragma once

#include "aten/pch.h"
#include "runtime/device_buffer.h"

namespace torch_tpu::aten {

// Index checks of the indexing ops (gather, index_select, embedding, take,
// index, index_put, index_add/copy/fill/reduce, put, scatter*, nll_loss),
// keyed by the name of the lowering an op is routed to. `op` names the op
// in messages.
//
// Debug mode: reads the indices back and raises IndexError at the op.
void check_indices(const std::string& lowering, const std::string& op,
                   const std::vector<c10::IValue>& values);

// TORCH_TPU_CHECK_INDICES=1 (strict, defer_and_fuse): records one device
// flag per index argument, before the op; watch_index_checks then hands them
// to runtime/index_flags.h with the op's results. Indices on the CPU are
// checked at once.
struct DeviceIndexCheck {
  std::shared_ptr<runtime::DeviceBuffer> flag;
  std::string message;
};
std::vector<DeviceIndexCheck> record_index_checks(const std::string& lowering, const std::string& op,
                                                  const std::vector<c10::IValue>& values);
void watch_index_checks(std::vector<DeviceIndexCheck>& checks,
                        const std::vector<std::shared_ptr<runtime::DeviceBuffer>>& results);

}  // namespace torch_tpu::aten
