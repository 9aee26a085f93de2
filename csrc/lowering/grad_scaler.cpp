// The two ops behind torch.amp.GradScaler. Both are small programs on
// device scalars, so the scaler never reads a value back to the host except
// where GradScaler itself does (`found_inf.item()` before the optimizer step).
//
// _amp_foreach_non_finite_check_and_unscale multiplies every gradient of a
// list by inv_scale and raises found_inf when any element of the gradients as
// given is inf or NaN (as the CPU and CUDA kernels do: a finite gradient that
// overflows only once unscaled is not counted). The whole list is one node,
// as the _foreach_ ops are (foreach.cpp). _amp_update_scale is the scale
// factor's state machine: back off after a step with inf/NaN, grow after
// `growth_interval` clean steps in a row unless growing would overflow.
#include "common/error.h"
#include "lowering/common.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

using E = ElementType;
using hlo::Builder;
using hlo::Compare;
using Values = std::vector<Value>;

int64_t numel(const Value& v) {
  int64_t n = 1;
  for (int64_t d : v.shape()) n *= d;
  return n;
}

// A one-element float32 tensor as a rank-0 value (the CPU's checks and words).
Value float_scalar(Builder& b, const Value& v, const char* name) {
  TPU_CHECK(numel(v) == 1, ErrorKind::Runtime, name, " must be a 1-element tensor.");
  TPU_CHECK(v.dtype() == E::F32, ErrorKind::Runtime, name, " must be a float tensor.");
  return b.reshape(v, {});
}

// Whether any element of x is inf or NaN (rank 0, i1).
Value any_non_finite(Builder& b, const Value& x) {
  Value flat = b.reshape(x, {numel(x)});
  return b.reduce_or(b.not_(b.is_finite(flat)), {0});
}

Values lower_non_finite_check_and_unscale(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  const Arg& grads = args.at(0);
  Value found_inf = args.at(1).as_tensor();
  Value found = float_scalar(b, found_inf, "found_inf");
  Value inv_scale = float_scalar(b, args.at(2).as_tensor(), "inv_scale");
  Value any = b.constant_bool(false);
  Values out;
  out.reserve(grads.tensors.size() + 1);
  for (const auto& g : grads.tensors) {
    TPU_CHECK(g.has_value(), ErrorKind::Runtime,
              "_amp_foreach_non_finite_check_and_unscale_: the gradient list has a hole");
    check_dtype(hlo::is_float(g->dtype()), "_amp_foreach_non_finite_check_and_unscale_tpu",
                g->dtype());
    any = b.or_(any, any_non_finite(b, *g));
    // Half types compute in float32 and round once, as the CPU does.
    E math = opmath(g->dtype());
    Value scale = broadcast_to(b, cast(b, inv_scale, math), g->shape());
    out.push_back(cast(b, b.mul(cast(b, *g, math), scale), g->dtype()));
  }
  // Only ever raised: a flag already set (or summed over devices) is kept.
  Value flag = b.select(any, b.constant(1, E::F32), found);
  out.push_back(b.reshape(flag, found_inf.shape()));
  return out;
}

Values lower_update_scale(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value scale_in = args.at(0).as_tensor();
  Value tracker_in = args.at(1).as_tensor();
  Value scale = float_scalar(b, scale_in, "current_scale");
  TPU_CHECK(numel(tracker_in) == 1, ErrorKind::Runtime, "growth_tracker must be a 1-element tensor.");
  TPU_CHECK(tracker_in.dtype() == E::I32, ErrorKind::Runtime, "growth_tracker must be an int tensor.");
  Value tracker = b.reshape(tracker_in, {});
  Value found = float_scalar(b, args.at(2).as_tensor(), "found_inf");
  // The factors are plain floats of the scaler, fixed for its lifetime:
  // constants of the program. In float32, as the scale is (exact for the
  // usual powers of two).
  Value growth = b.constant(args.at(3).as_float(), E::F32);
  Value backoff = b.constant(args.at(4).as_float(), E::F32);
  Value interval = b.constant_int(args.at(5).as_int(), E::I32);

  Value skipped = b.compare(found, b.constant(0, E::F32), Compare::NE);
  Value successful = b.add(tracker, b.constant_int(1, E::I32));
  Value grow = b.compare(successful, interval, Compare::EQ);
  Value grown = b.mul(scale, growth);
  Value zero = b.constant_int(0, E::I32);
  Value new_scale = b.select(skipped, b.mul(scale, backoff),
                             b.select(b.and_(grow, b.is_finite(grown)), grown, scale));
  Value new_tracker = b.select(skipped, zero, b.select(grow, zero, successful));
  return {b.reshape(new_scale, scale_in.shape()), b.reshape(new_tracker, tracker_in.shape())};
}

}  // namespace

TPU_LOWERING("aten::_amp_foreach_non_finite_check_and_unscale", lower_non_finite_check_and_unscale);
TPU_LOWERING("aten::_amp_update_scale", lower_update_scale);

}  // namespace torch_tpu::lowering
