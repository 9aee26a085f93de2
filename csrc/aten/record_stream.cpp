// Tensor.record_stream(s): on CUDA it tells the caching allocator that `s`
// still reads the tensor's memory, so the block is not reused until the work
// queued on `s` so far is done. A tpu tensor's storage holds a reference to
// its device buffer, and every pending program holds references to the
// buffers it reads until it has run (runtime/launch.cpp keeps them in the
// job), so a buffer already outlives the work that reads it, on any stream
// (there is one per device). Nothing is left to record: the op checks its
// stream as CUDA does and returns.
#include "aten/pch.h"

namespace torch_tpu::aten {

namespace {

void record_stream(at::Tensor& self, c10::Stream s) {
  TORCH_CHECK(s.device_type() == c10::DeviceType::PrivateUse1,
              "record_stream: expected a tpu stream, got a stream of ", s.device());
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("record_stream", TORCH_FN(record_stream));
}

}  // namespace torch_tpu::aten
