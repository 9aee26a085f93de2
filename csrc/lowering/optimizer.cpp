// Fused optimizer steps (_fused_adam_, _fused_adamw_, _fused_sgd_,
// _fused_adagrad_) as ONE node per call, as the _foreach_ ops are: the whole
// update of every parameter is one program.
//
// What the values are, and why:
//  - lr, betas, eps, weight_decay, momentum are `float` arguments, fed as
//    program parameters (kFloatParams), so a learning rate scheduler changing
//    them every step reuses one executable. Their values are therefore not
//    known here, so nothing branches on them (weight_decay=0 multiplies by
//    zero instead of being skipped; the result is the same for finite
//    parameters). The tensor_lr overloads read lr from a device tensor.
//  - The step count lives on the device (state_steps), so the bias
//    corrections 1 - beta^step are computed on the device, as
//    -expm1(step * log(beta)): 1 - pow(beta, step) in f32 cancels to a few
//    digits for beta2 = 0.999 at small steps, where the CPU kernel works in
//    double.
//  - grad_scale divides the gradients, and the unscaled gradients are written
//    back into `grads` (PyTorch's fused kernels do; GradScaler relies on it
//    only through the step, but code reading .grad afterwards sees it).
//  - found_inf nonzero leaves every tensor as it was: each output is a select
//    between the old and the new value, so the program never branches.
//  - Half types compute in f32 and round once when stored, as on the CPU.
// Outputs follow the order of the lists the op writes (params, grads, then
// the state lists), which is how aten/ routes them into the destinations.
#include <map>
#include <optional>
#include <tuple>

#include "common/error.h"
#include "lowering/common.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

using E = ElementType;
using Values = std::vector<Value>;

// Rank-0 operands (Numbers, or one-element tensors: lr, grad_scale,
// found_inf) in the compute type, made once per type.
class Scalars {
 public:
  explicit Scalars(Context& ctx) : ctx_(ctx) {}

  Value get(const Arg& a, E t) {
    auto key = std::make_tuple(a.index, t);
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
    Value v = a.kind == Arg::Kind::Tensor ? scalar_of(ctx_.b, a.tensor, t) : ctx_.number(a, t);
    return memo_.emplace(key, v).first->second;
  }

  static Value scalar_of(hlo::Builder& b, Value v, E t) {
    TPU_CHECK(v.type.numel() == 1, ErrorKind::Runtime,
              "expected a tensor with one element, got shape ", hlo::shape_str(v.shape()));
    if (v.rank() > 0) v = b.reshape(v, {});
    return cast(b, v, t);
  }

 private:
  Context& ctx_;
  std::map<std::tuple<int, E>, Value> memo_;
};

Value spread(hlo::Builder& b, Value scalar, const Value& like) {
  return like.rank() ? b.broadcast_in_dim(scalar, like.shape(), {}) : scalar;
}

const Value& element(const Args& args, size_t list, size_t i, const char* op) {
  const auto& t = args.at(list).tensors.at(i);
  TPU_CHECK(t.has_value(), ErrorKind::Runtime, op, ": a tensor list has a hole");
  return *t;
}

void check_lengths(const Args& args, const std::vector<size_t>& lists, size_t n, const char* op) {
  for (size_t l : lists)
    TPU_CHECK(args.at(l).tensors.size() == n, ErrorKind::Runtime, op,
              ": every tensor list must have as many tensors as params (", n, "), got ",
              args.at(l).tensors.size());
}

// What every fused step shares: gradient unscaling and the found_inf guard.
struct Step {
  Step(Context& ctx, const Arg& grad_scale, const Arg& found_inf) : ctx(ctx), scalars(ctx) {
    if (!grad_scale.is_none()) scale = grad_scale.tensor;
    if (!found_inf.is_none()) {
      Value f = Scalars::scalar_of(ctx.b, found_inf.tensor, E::F32);
      skip = ctx.b.compare(f, ctx.b.constant(0, E::F32), hlo::Compare::NE);
    }
  }

  // The gradient in compute type t, unscaled.
  Value grad(Value g, E t) {
    Value x = cast(ctx.b, g, t);
    if (scale) x = ctx.b.div(x, spread(ctx.b, Scalars::scalar_of(ctx.b, *scale, t), x));
    return x;
  }
  // What `grads` holds afterwards.
  Value stored_grad(Value g, Value unscaled) { return scale ? keep(g, cast(ctx.b, unscaled, g.dtype())) : g; }
  // `updated` (in compute type) stored in old's type, unless found_inf.
  Value keep(const Value& old, Value updated) {
    updated = cast(ctx.b, updated, old.dtype());
    return skip ? ctx.b.select(spread(ctx.b, *skip, old), old, updated) : updated;
  }
  Value s(const Arg& a, E t) { return scalars.get(a, t); }

  Context& ctx;
  Scalars scalars;
  std::optional<Value> scale, skip;
};

// 1 - beta^step, accurate for beta near 1 (see the top of the file).
Value bias_correction(hlo::Builder& b, Value beta, Value step) {
  return b.neg(b.expm1(b.mul(step, b.log(beta))));
}

// (self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, *, lr,
//  beta1, beta2, weight_decay, eps, amsgrad, maximize, grad_scale, found_inf)
template <bool kDecoupled>
Values adam(Context& ctx, const Args& args) {
  const char* op = kDecoupled ? "_fused_adamw_" : "_fused_adam_";
  hlo::Builder& b = ctx.b;
  const size_t n = args.at(0).tensors.size();
  const bool amsgrad = args.at(11).as_bool(), maximize = args.at(12).as_bool();
  check_lengths(args, {1, 2, 3, 5}, n, op);
  if (amsgrad) check_lengths(args, {4}, n, op);
  Step step(ctx, args.at(13), args.at(14));
  Values params, grads, avgs, sqs, maxes;
  for (size_t i = 0; i < n; ++i) {
    const Value &p = element(args, 0, i, op), &g = element(args, 1, i, op);
    const Value &m = element(args, 2, i, op), &v = element(args, 3, i, op);
    E t = opmath(p.dtype());
    Value lr = step.s(args.at(6), t), beta1 = step.s(args.at(7), t), beta2 = step.s(args.at(8), t);
    Value wd = step.s(args.at(9), t), eps = step.s(args.at(10), t);
    Value one = b.constant(1, t);
    Value x = cast(b, p, t);
    Value unscaled = step.grad(g, t);
    Value dx = maximize ? b.neg(unscaled) : unscaled;
    if (kDecoupled) x = b.mul(x, spread(b, b.sub(one, b.mul(lr, wd)), x));
    else dx = b.add(dx, b.mul(x, spread(b, wd, x)));
    Value avg = b.add(b.mul(cast(b, m, t), spread(b, beta1, x)),
                      b.mul(dx, spread(b, b.sub(one, beta1), x)));
    Value sq = b.add(b.mul(cast(b, v, t), spread(b, beta2, x)),
                     b.mul(b.mul(dx, dx), spread(b, b.sub(one, beta2), x)));
    Value count = Scalars::scalar_of(b, element(args, 5, i, op), t);
    Value step_size = b.div(lr, bias_correction(b, beta1, count));
    Value bc2_sqrt = b.sqrt(bias_correction(b, beta2, count));
    Value second = sq;
    if (amsgrad) {
      const Value& mx = element(args, 4, i, op);
      second = b.max(cast(b, mx, t), sq);
      maxes.push_back(step.keep(mx, second));
    }
    Value denom = b.add(b.div(b.sqrt(second), spread(b, bc2_sqrt, x)), spread(b, eps, x));
    x = b.sub(x, b.div(b.mul(spread(b, step_size, x), avg), denom));
    params.push_back(step.keep(p, x));
    grads.push_back(step.stored_grad(g, unscaled));
    avgs.push_back(step.keep(m, avg));
    sqs.push_back(step.keep(v, sq));
  }
  if (!amsgrad)  // written by the schema, untouched by the step
    for (size_t i = 0; i < args.at(4).tensors.size(); ++i) maxes.push_back(element(args, 4, i, op));
  Values out = params;
  for (const Values* l : {&grads, &avgs, &sqs, &maxes}) out.insert(out.end(), l->begin(), l->end());
  return out;
}

// (self, grads, momentum_buffer_list, *, weight_decay, momentum, lr,
//  dampening, nesterov, maximize, is_first_step, grad_scale, found_inf).
// An empty momentum_buffer_list means momentum == 0 (PyTorch passes none).
Values sgd(Context& ctx, const Args& args) {
  const char* op = "_fused_sgd_";
  hlo::Builder& b = ctx.b;
  const size_t n = args.at(0).tensors.size();
  const bool with_momentum = !args.at(2).tensors.empty();
  const bool nesterov = args.at(7).as_bool(), maximize = args.at(8).as_bool();
  const bool first = args.at(9).as_bool();
  check_lengths(args, {1}, n, op);
  if (with_momentum) check_lengths(args, {2}, n, op);
  Step step(ctx, args.at(10), args.at(11));
  Values params, grads, bufs;
  for (size_t i = 0; i < n; ++i) {
    const Value &p = element(args, 0, i, op), &g = element(args, 1, i, op);
    E t = opmath(p.dtype());
    Value wd = step.s(args.at(3), t), lr = step.s(args.at(5), t);
    Value x = cast(b, p, t);
    Value unscaled = step.grad(g, t);
    Value dx = maximize ? b.neg(unscaled) : unscaled;
    dx = b.add(dx, b.mul(x, spread(b, wd, x)));
    if (with_momentum) {
      const Value& buf = element(args, 2, i, op);
      Value momentum = spread(b, step.s(args.at(4), t), x);
      Value keep_grad = b.sub(b.constant(1, t), step.s(args.at(6), t));  // 1 - dampening
      Value m = first ? dx
                      : b.add(b.mul(cast(b, buf, t), momentum), b.mul(dx, spread(b, keep_grad, x)));
      bufs.push_back(step.keep(buf, m));
      dx = nesterov ? b.add(dx, b.mul(m, momentum)) : m;
    }
    x = b.sub(x, b.mul(dx, spread(b, lr, x)));
    params.push_back(step.keep(p, x));
    grads.push_back(step.stored_grad(g, unscaled));
  }
  Values out = params;
  out.insert(out.end(), grads.begin(), grads.end());
  out.insert(out.end(), bufs.begin(), bufs.end());
  return out;
}

// (self, grads, state_sums, state_steps, *, lr, lr_decay, weight_decay, eps,
//  maximize, grad_scale, found_inf). The float-lr overload lists state_steps
// among what it writes (it leaves them as they are); tensor_lr does not.
template <bool kStepsWritten>
Values adagrad(Context& ctx, const Args& args) {
  const char* op = "_fused_adagrad_";
  hlo::Builder& b = ctx.b;
  const size_t n = args.at(0).tensors.size();
  const bool maximize = args.at(8).as_bool();
  check_lengths(args, {1, 2, 3}, n, op);
  Step step(ctx, args.at(9), args.at(10));
  Values params, grads, sums, steps;
  for (size_t i = 0; i < n; ++i) {
    const Value &p = element(args, 0, i, op), &g = element(args, 1, i, op);
    const Value& sum = element(args, 2, i, op);
    E t = opmath(p.dtype());
    Value lr = step.s(args.at(4), t), decay = step.s(args.at(5), t);
    Value wd = step.s(args.at(6), t), eps = step.s(args.at(7), t);
    Value x = cast(b, p, t);
    Value unscaled = step.grad(g, t);
    Value dx = maximize ? b.neg(unscaled) : unscaled;
    dx = b.add(dx, b.mul(x, spread(b, wd, x)));
    Value acc = b.add(cast(b, sum, t), b.mul(dx, dx));
    Value count = Scalars::scalar_of(b, element(args, 3, i, op), t);
    // lr / (1 + (step - 1) * lr_decay)
    Value one = b.constant(1, t);
    Value clr = b.div(lr, b.add(one, b.mul(b.sub(count, one), decay)));
    Value denom = b.add(b.sqrt(acc), spread(b, eps, x));
    x = b.sub(x, b.div(b.mul(dx, spread(b, clr, x)), denom));
    params.push_back(step.keep(p, x));
    grads.push_back(step.stored_grad(g, unscaled));
    sums.push_back(step.keep(sum, acc));
    if (kStepsWritten) steps.push_back(element(args, 3, i, op));
  }
  Values out = params;
  for (const Values* l : {&grads, &sums, &steps}) out.insert(out.end(), l->begin(), l->end());
  return out;
}

}  // namespace

TPU_LOWERING("aten::_fused_adagrad", adagrad<true>, kFloatParams);
TPU_LOWERING("aten::_fused_adagrad.tensor_lr", adagrad<false>, kFloatParams);
TPU_LOWERING("aten::_fused_adam", adam<false>, kFloatParams);
TPU_LOWERING("aten::_fused_adam.tensor_lr", adam<false>, kFloatParams);
TPU_LOWERING("aten::_fused_adamw", adam<true>, kFloatParams);
TPU_LOWERING("aten::_fused_adamw.tensor_lr", adam<true>, kFloatParams);
TPU_LOWERING("aten::_fused_sgd", sgd, kFloatParams);
TPU_LOWERING("aten::_fused_sgd.tensor_lr", sgd, kFloatParams);

}  // namespace torch_tpu::lowering
