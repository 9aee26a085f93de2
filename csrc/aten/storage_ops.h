#pragma once

#include "aten/pch.h"

namespace torch_tpu::aten {

// Grows or shrinks a `tpu` storage, keeping its leading bytes (new bytes are
// zero).
void resize_storage_bytes(const c10::Storage& storage, int64_t nbytes);

}  // namespace torch_tpu::aten
