// zero_ of a tensor that covers a never-written storage is already done: a
// fresh storage holds zero bytes until something reads it
// (runtime/device_buffer.h). torch.zeros and zeros_like are empty + zero_,
// so without this every new shape cost a program for zero_ before a single
// value was needed: 9 of the 80 programs of a small GPT's first training
// step (AdamW's state) were zero_'s. While torch.compile captures,
// the op is recorded as usual: the captured program must make the zeros
// itself on every call.
#include "aten/op_kernel.h"
#include "aten/tensor_bridge.h"
#include "runtime/executor.h"
#include "runtime/storage.h"
#include "runtime/view.h"

namespace torch_tpu::aten {

namespace {

void zero_unless_fresh(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const at::Tensor& self = torch::jit::peek(*stack, 0, 1).toTensor();
  if (self.device().type() == c10::DeviceType::PrivateUse1 && !runtime::capturing()) {
    runtime::Storage* s = storage_of(self);
    if (s != nullptr && s->base->fresh_zeros()) {  // checked first: most zero_ calls write
      runtime::ViewGeometry g = geometry_of(self);
      // Typed as the op's result would have been: the next op's program reads
      // the same type whether this step made the zeros or a later one wrote them.
      if (runtime::covers_storage(g, s->nbytes)) {
        s->base = runtime::DeviceBuffer::deferred_zeros({g.dtype, g.sizes}, s->device);
        return;  // self stays on the stack as the result
      }
    }
  }
  lowered_op_kernel(op, stack);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("zero_", torch::CppFunction::makeFromBoxedFunction<&zero_unless_fresh>());
}

}  // namespace torch_tpu::aten
