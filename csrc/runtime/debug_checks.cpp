// Debug mode's checks after each op: wait for its results, so that a failure
// raises at the op that caused it rather than at a later read, and with
// TORCH_TPU_DEBUG_NANS, reduce each float result to "has NaN or Inf" on the
// device and read that one flag back. The check is itself an op, recorded in
// strict mode so that it is not checked in turn.
#include "common/env.h"
#include "runtime/executor_internal.h"

namespace torch_tpu::runtime::executor {

using hlo::Value;
using lowering::Arg;

namespace {

std::vector<Value> has_nonfinite(lowering::Context& ctx, const lowering::Args& args) {
  hlo::Builder& b = ctx.b;
  Value x = args[0].as_tensor();
  std::vector<int64_t> all(x.rank());
  for (int64_t i = 0; i < x.rank(); ++i) all[i] = i;
  Value bad = b.not_(b.is_finite(x));
  return {x.rank() ? b.reduce_or(bad, all) : bad};
}
const lowering::Lowering kHasNonfinite{"tpu::has_nonfinite", &has_nonfinite, false};

}  // namespace

void check_after(const std::vector<std::shared_ptr<DeviceBuffer>>& results, const Graph& g) {
  for (const auto& r : results) r->wait();  // raises the op's error here, at the op
  if (!env().debug_nans) return;
  for (const auto& r : results) {
    const hlo::TensorType type = r->logical_type();  // a padded result's padding is not checked
    if (!hlo::is_float(type.dtype) || type.numel() == 0) continue;
    Storage s(type.nbytes(), r->device());
    s.base = r;
    ViewGeometry whole = whole_view(type);
    OpCall call;
    call.lowering = &kHasNonfinite;
    Arg a;
    a.kind = Arg::Kind::Tensor;
    call.args.push_back(a);
    call.inputs.push_back({TensorInput{&s, whole}});
    call.device = r->device();
    EagerMode saved = mode;
    mode = EagerMode::Strict;  // the check itself is not checked
    auto flag = record(call)[0];
    mode = saved;
    uint8_t found = 0;
    flag->to_host(&found);
    TPU_CHECK(!found, ErrorKind::Runtime, "TORCH_TPU_DEBUG_NANS: tpu op ", g.describe(0),
              " produced NaN or Inf");
  }
}

}  // namespace torch_tpu::runtime::executor
