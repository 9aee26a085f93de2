// Batch norm and group norm, forward and backward. Half-precision inputs are
// normalized in f32 and rounded once, as PyTorch's CPU kernels do. When the
// parameters or running statistics have another float type than the input
// (an f32 module run on bf16 activations), the saved statistics take the
// parameters' type, as on the CPU.
//
// Running statistics: `_native_batch_norm_legit` and
// `_native_batch_norm_legit_functional` return the updated running mean and
// variance after the schema's three results, so that the aten layer can write
// them into the mutable arguments in the same program.
#include "lowering/common.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

using hlo::Builder;
using E = ElementType;
using Dims = std::vector<int64_t>;
using Values = std::vector<Value>;

E acc_type(E t) { return t == E::F16 || t == E::BF16 ? E::F32 : t; }

void check_float(const char* kernel, E t) {
  TPU_CHECK(hlo::is_float(t), ErrorKind::NotImplemented, "\"", kernel, "\" not implemented for '",
            scalar_type_name(t), "'");
}

// The statistics' type: the first parameter whose type differs from the input's.
E stat_type(const Value& x, const std::vector<std::optional<Value>>& params) {
  for (const auto& p : params)
    if (p && p->dtype() != x.dtype()) return p->dtype();
  return x.dtype();
}

// A per-channel [C] vector laid over dim 1 of `like`.
Value per_channel(Builder& b, Value c, const Shape& like, E t) {
  return b.broadcast_in_dim(cast(b, c, t), like, {1});
}

// ---- batch norm: statistics over every dim but the channel dim (1)

struct BatchNorm {
  Value x;
  std::optional<Value> w, bias, running_mean, running_var;
  bool training = true;
  double momentum = 0.1, eps = 1e-5;
};

Dims batch_dims(const Value& x) {
  TPU_CHECK(x.rank() >= 2, ErrorKind::Runtime, "batch_norm: expected input with at least 2 dims, got ",
            x.rank());
  Dims d{0};
  for (int64_t i = 2; i < x.rank(); ++i) d.push_back(i);
  return d;
}

void check_channels(const std::optional<Value>& p, const char* what, int64_t c) {
  if (p)
    TPU_CHECK(p->type.numel() == c, ErrorKind::Runtime, what, " should contain ", c,
              " elements not ", p->type.numel());
}

// (out, save_mean, save_invstd, new_running_mean, new_running_var); the last
// two are absent without running statistics. In eval the saved statistics
// are empty, as on the CPU.
Values batch_norm(Builder& b, const BatchNorm& p) {
  const Value& x = p.x;
  check_float("batch_norm", x.dtype());
  Dims dims = batch_dims(x);
  int64_t c = x.shape()[1];
  check_channels(p.w, "weight", c);
  check_channels(p.bias, "bias", c);
  check_channels(p.running_mean, "running_mean", c);
  check_channels(p.running_var, "running_var", c);
  E acc = acc_type(x.dtype());
  E stat = stat_type(x, {p.w, p.bias, p.running_mean, p.running_var});
  const Shape& shape = x.shape();
  Value xa = cast(b, x, acc);
  int64_t n = shape[0];
  for (int64_t i = 2; i < x.rank(); ++i) n *= shape[i];

  Value mean, invstd, var;
  if (p.training) {
    Value count = b.full(double(n), acc, {c});
    mean = b.div(b.reduce_sum(xa, dims), count);
    Value centered = b.sub(xa, per_channel(b, mean, shape, acc));
    var = b.div(b.reduce_sum(b.mul(centered, centered), dims), count);
    invstd = b.rsqrt(b.add(var, b.full(p.eps, acc, {c})));
  } else {
    TPU_CHECK(p.running_mean && p.running_var, ErrorKind::Runtime,
              "running_mean and running_var must be defined in evaluation mode");
    mean = cast(b, *p.running_mean, acc);
    invstd = b.rsqrt(b.add(cast(b, *p.running_var, acc), b.full(p.eps, acc, {c})));
  }
  Value y = b.mul(b.sub(xa, per_channel(b, mean, shape, acc)), per_channel(b, invstd, shape, acc));
  if (p.w) y = b.mul(y, per_channel(b, *p.w, shape, acc));
  if (p.bias) y = b.add(y, per_channel(b, *p.bias, shape, acc));

  Values out{cast(b, y, x.dtype())};
  if (p.training) {
    out.push_back(cast(b, mean, stat));
    out.push_back(cast(b, invstd, stat));
  } else {
    out.push_back(b.zeros(stat, {0}));
    out.push_back(b.zeros(stat, {0}));
  }
  if (p.running_mean && p.running_var) {
    if (p.training) {
      // The running variance is unbiased (n / (n - 1)), the saved one is not.
      auto blend = [&](Value running, Value batch) {
        Value keep = b.full(1 - p.momentum, acc, {c}), take = b.full(p.momentum, acc, {c});
        return cast(b, b.add(b.mul(keep, cast(b, running, acc)), b.mul(take, batch)), running.dtype());
      };
      Value unbiased = b.mul(var, b.full(double(n) / double(n - 1), acc, {c}));
      out.push_back(blend(*p.running_mean, mean));
      out.push_back(blend(*p.running_var, unbiased));
    } else {
      out.push_back(*p.running_mean);
      out.push_back(*p.running_var);
    }
  }
  return out;
}

BatchNorm read(const Args& a, size_t stats_at, std::optional<size_t> training_at, size_t momentum_at) {
  BatchNorm p;
  p.x = a[0].as_tensor();
  p.w = a[1].opt_tensor();
  p.bias = a[2].opt_tensor();
  if (stats_at) {
    p.running_mean = a[stats_at].opt_tensor();
    p.running_var = a[stats_at + 1].opt_tensor();
  }
  p.training = training_at ? a[*training_at].as_bool() : false;
  p.momentum = a[momentum_at].as_float();
  p.eps = a[momentum_at + 1].as_float();
  return p;
}

Values first3(Values v) {
  v.resize(3);
  return v;
}

// native_batch_norm(input, weight, bias, running_mean, running_var, training,
// momentum, eps): what nn.BatchNorm*d reaches. Its schema does not mark the
// running statistics as written, so only the three results come back here.
Values lower_native_batch_norm(Context& ctx, const Args& a) {
  return first3(batch_norm(ctx.b, read(a, 3, 5, 6)));
}

// _native_batch_norm_legit(..., Tensor(a!) running_mean, Tensor(b!)
// running_var, training, momentum, eps) and its functional twin: the three
// results, then the new running mean and variance.
Values lower_batch_norm_legit(Context& ctx, const Args& a) {
  BatchNorm p = read(a, 3, 5, 6);
  TPU_CHECK(p.running_mean && p.running_var, ErrorKind::Runtime,
            "_native_batch_norm_legit: running_mean and running_var must be defined");
  return batch_norm(ctx.b, p);
}

Values lower_batch_norm_legit_no_stats(Context& ctx, const Args& a) {
  BatchNorm p = read(a, 0, 3, 4);
  TPU_CHECK(p.training, ErrorKind::Runtime,
            "_native_batch_norm_legit.no_stats: running statistics are required in evaluation mode");
  return batch_norm(ctx.b, p);
}

Values lower_batch_norm_legit_no_training(Context& ctx, const Args& a) {
  return first3(batch_norm(ctx.b, read(a, 3, std::nullopt, 5)));
}

// The batch_norm entry points of torch >= 2.3 (what F.batch_norm reaches
// through export / AOTAutograd): _batch_norm_with_update(input, weight, bias,
// Tensor(a!) running_mean, Tensor(b!) running_var, momentum, eps) ->
// (out, save_mean, save_invstd, reserve), then the new running statistics;
// its functional twin returns the same six. `reserve` is an empty uint8
// tensor on the CPU.
Values lower_batch_norm_with_update(Context& ctx, const Args& a) {
  BatchNorm p = read(a, 3, std::nullopt, 5);
  p.training = true;
  TPU_CHECK(p.running_mean && p.running_var, ErrorKind::Runtime,
            "_batch_norm_with_update: running_mean and running_var must be defined");
  Values r = batch_norm(ctx.b, p);
  r.insert(r.begin() + 3, ctx.b.zeros(E::U8, {0}));
  return r;
}

// _batch_norm_no_update: evaluation with running statistics (training without
// them when they are absent), the saved statistics empty.
Values lower_batch_norm_no_update(Context& ctx, const Args& a) {
  BatchNorm p = read(a, 3, std::nullopt, 5);
  p.training = !(p.running_mean && p.running_var);
  Values r = first3(batch_norm(ctx.b, p));
  if (p.training) {
    r[1] = ctx.b.zeros(r[1].dtype(), {0});
    r[2] = ctx.b.zeros(r[2].dtype(), {0});
  }
  r.push_back(ctx.b.zeros(E::U8, {0}));
  return r;
}

Values lower_native_batch_norm_backward(Context& ctx, const Args& a);

// batch_norm_backward(grad_out, input, weight, running_mean, running_var,
// save_mean, save_var, update, eps, output_mask, reserve): save_var holds the
// saved invstd, `update` says training; the rest is native_batch_norm_backward.
Values lower_batch_norm_backward(Context& ctx, const Args& a) {
  Args head(a.begin(), a.begin() + 10);
  return lower_native_batch_norm_backward(ctx, head);
}

// (grad_input, grad_weight, grad_bias), all three always (see layer norm).
Values lower_native_batch_norm_backward(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value g = a[0].as_tensor(), x = a[1].as_tensor();
  auto w = a[2].opt_tensor(), rm = a[3].opt_tensor(), rv = a[4].opt_tensor();
  auto save_mean = a[5].opt_tensor(), save_invstd = a[6].opt_tensor();
  bool train = a[7].as_bool();
  double eps = a[8].as_float();
  Dims dims = batch_dims(x);
  int64_t c = x.shape()[1];
  const Shape& shape = x.shape();
  E acc = acc_type(promote(x.dtype(), g.dtype()));

  Value mean, invstd;
  if (train) {
    TPU_CHECK(save_mean && save_invstd, ErrorKind::Runtime,
              "native_batch_norm_backward: save_mean and save_invstd are required in training mode");
    mean = cast(b, *save_mean, acc);
    invstd = cast(b, *save_invstd, acc);
  } else {
    TPU_CHECK(rm && rv, ErrorKind::Runtime,
              "native_batch_norm_backward: running_mean and running_var are required in evaluation mode");
    mean = cast(b, *rm, acc);
    invstd = b.rsqrt(b.add(cast(b, *rv, acc), b.full(eps, acc, {c})));
  }
  Value ga = cast(b, g, acc);
  Value invstd_b = per_channel(b, invstd, shape, acc);
  Value xhat = b.mul(b.sub(cast(b, x, acc), per_channel(b, mean, shape, acc)), invstd_b);
  Value scale = w ? b.mul(invstd_b, per_channel(b, *w, shape, acc)) : invstd_b;
  Value dx;
  if (train) {
    // The batch statistics depend on x: dx = w * invstd * (g - mean(g) - xhat * mean(g * xhat)).
    int64_t n = x.type.numel() / std::max<int64_t>(c, 1);
    Value count = b.full(double(n), acc, {c});
    Value mean_g = per_channel(b, b.div(b.reduce_sum(ga, dims), count), shape, acc);
    Value mean_gx = per_channel(b, b.div(b.reduce_sum(b.mul(ga, xhat), dims), count), shape, acc);
    dx = b.mul(scale, b.sub(b.sub(ga, mean_g), b.mul(xhat, mean_gx)));
  } else {
    dx = b.mul(ga, scale);
  }
  E pt = w ? w->dtype() : x.dtype();
  return {cast(b, dx, x.dtype()), cast(b, b.reduce_sum(b.mul(ga, xhat), dims), pt),
          cast(b, b.reduce_sum(ga, dims), pt)};
}

// ---- group norm: the input is [N, C, *], seen as [N, group, C/group * HxW]

struct GroupShape {
  int64_t n, c, hw, g;
  Shape grouped() const { return {n, g, c / g * hw}; }
  Shape flat() const { return {n, c, hw}; }
};

GroupShape group_shape(const Value& x, const Args& a, size_t at) {
  GroupShape s{a[at].as_int(), a[at + 1].as_int(), a[at + 2].as_int(), a[at + 3].as_int()};
  TPU_CHECK(s.g > 0 && s.c % s.g == 0, ErrorKind::Runtime,
            "Expected number of channels in input to be divisible by num_groups, but got input of shape ",
            hlo::shape_str(x.shape()), " and num_groups=", s.g);
  TPU_CHECK(x.type.numel() == s.n * s.c * s.hw, ErrorKind::Runtime, "Expected input of ", s.n * s.c * s.hw,
            " elements, got ", hlo::shape_str(x.shape()));
  return s;
}

// A per-(sample, group) [N, G] statistic laid over [N, C, HxW].
Value per_group(Builder& b, Value s, const GroupShape& gs) {
  Value wide = b.broadcast_in_dim(s, {gs.n, gs.g, gs.c / gs.g, gs.hw}, {0, 1});
  return b.reshape(wide, gs.flat());
}

// (out, mean [N, group], rstd [N, group]).
Values lower_native_group_norm(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  auto w = a[1].opt_tensor(), bias = a[2].opt_tensor();
  GroupShape gs = group_shape(x, a, 3);
  double eps = a[7].as_float();
  check_float("GroupNormKernelImpl", x.dtype());
  check_channels(w, "weight", gs.c);
  check_channels(bias, "bias", gs.c);
  E acc = acc_type(x.dtype());
  E stat = stat_type(x, {w, bias});
  int64_t d = gs.c / gs.g * gs.hw;

  Value xg = b.reshape(cast(b, x, acc), gs.grouped());
  Shape ng{gs.n, gs.g};
  Value count = b.full(double(d), acc, ng);
  Value mean = b.div(b.reduce_sum(xg, {2}), count);
  Value centered = b.sub(xg, b.broadcast_in_dim(mean, gs.grouped(), {0, 1}));
  Value var = b.div(b.reduce_sum(b.mul(centered, centered), {2}), count);
  Value rstd = b.rsqrt(b.add(var, b.full(eps, acc, ng)));
  Value y = b.reshape(b.mul(centered, b.broadcast_in_dim(rstd, gs.grouped(), {0, 1})), gs.flat());
  if (w) y = b.mul(y, per_channel(b, *w, gs.flat(), acc));
  if (bias) y = b.add(y, per_channel(b, *bias, gs.flat(), acc));
  return {cast(b, b.reshape(y, x.shape()), x.dtype()), cast(b, mean, stat), cast(b, rstd, stat)};
}

// (grad_input, grad_weight, grad_bias).
Values lower_native_group_norm_backward(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value g = a[0].as_tensor(), x = a[1].as_tensor();
  Value mean = a[2].as_tensor(), rstd = a[3].as_tensor();
  auto w = a[4].opt_tensor();
  GroupShape gs = group_shape(x, a, 5);
  E acc = acc_type(promote(x.dtype(), g.dtype()));
  int64_t d = gs.c / gs.g * gs.hw;

  Value ga = b.reshape(cast(b, g, acc), gs.flat());
  Value rstd_b = per_group(b, cast(b, rstd, acc), gs);
  Value xhat = b.mul(b.sub(b.reshape(cast(b, x, acc), gs.flat()), per_group(b, cast(b, mean, acc), gs)), rstd_b);
  Value gw = w ? b.mul(ga, per_channel(b, *w, gs.flat(), acc)) : ga;
  // dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)), means over each group.
  Shape ng{gs.n, gs.g};
  Value count = b.full(double(d), acc, ng);
  auto group_mean = [&](Value v) {
    return per_group(b, b.div(b.reduce_sum(b.reshape(v, gs.grouped()), {2}), count), gs);
  };
  Value dx = b.mul(rstd_b, b.sub(b.sub(gw, group_mean(gw)), b.mul(xhat, group_mean(b.mul(gw, xhat)))));
  E pt = w ? w->dtype() : x.dtype();
  return {cast(b, b.reshape(dx, x.shape()), x.dtype()), cast(b, b.reduce_sum(b.mul(ga, xhat), {0, 2}), pt),
          cast(b, b.reduce_sum(ga, {0, 2}), pt)};
}

}  // namespace

TPU_LOWERING("aten::_batch_norm_no_update", lower_batch_norm_no_update);
TPU_LOWERING("aten::_batch_norm_with_update", lower_batch_norm_with_update);
TPU_LOWERING("aten::_batch_norm_with_update_functional", lower_batch_norm_with_update);
TPU_LOWERING("aten::_native_batch_norm_legit", lower_batch_norm_legit);
TPU_LOWERING("aten::_native_batch_norm_legit.no_stats", lower_batch_norm_legit_no_stats);
TPU_LOWERING("aten::_native_batch_norm_legit_functional", lower_batch_norm_legit);
TPU_LOWERING("aten::_native_batch_norm_legit_no_training", lower_batch_norm_legit_no_training);
TPU_LOWERING("aten::batch_norm_backward", lower_batch_norm_backward);
TPU_LOWERING("aten::native_batch_norm", lower_native_batch_norm);
TPU_LOWERING("aten::native_batch_norm_backward", lower_native_batch_norm_backward);
TPU_LOWERING("aten::native_group_norm", lower_native_group_norm);
TPU_LOWERING("aten::native_group_norm_backward", lower_native_group_norm_backward);

}  // namespace torch_tpu::lowering
