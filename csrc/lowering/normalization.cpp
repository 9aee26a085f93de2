// Softmax, log-softmax, layer norm and weight norm, forward and backward.
// F.softmax, F.layer_norm, cross_entropy and nn.utils.weight_norm are composite
// and reach the backend as these ops. Half-precision inputs are computed in f32 and rounded once at the end,
// as PyTorch's kernels do.
#include "lowering/common.h"
#include "lowering/sum_kernel.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

using hlo::Builder;
using E = ElementType;
using Dims = std::vector<int64_t>;

E acc_type(E t) { return t == E::F16 || t == E::BF16 ? E::F32 : t; }

void check_float(const char* kernel, E t) {
  TPU_CHECK(hlo::is_float(t), ErrorKind::NotImplemented, "\"", kernel,
            "\" not implemented for '", scalar_type_name(t), "'");
}

// A statistic over `dims`, stretched back over `like` (keepdim + broadcast).
Value spread(Builder& b, Value r, const Shape& like, const Dims& dims) {
  return broadcast_to(b, b.reshape(r, reduced_shape(like, dims, true)), like);
}

// Softmax-family ops see a rank-0 tensor as a 1-element vector.
struct Along {
  Shape shape;  // the caller's
  Dims dims;    // the one softmax dim, of the vector view
  Value view(Builder& b, Value v) const { return shape.empty() ? b.reshape(v, {1}) : v; }
  Value back(Builder& b, Value v) const { return shape.empty() ? b.reshape(v, {}) : v; }
};

Along along(const Value& x, const Arg& dim) {
  return Along{x.shape(), {wrap_dim(dim.as_int(), x.rank())}};
}

enum class Softmax { Plain, Log };

Value softmax_forward(Context& ctx, const Args& a, Softmax kind) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  check_float(kind == Softmax::Log ? "log_softmax" : "softmax", x.dtype());
  // half_to_float (a CUDA-only flag in PyTorch) asks for an f32 result.
  E out = a[2].as_bool() ? E::F32 : x.dtype();
  Along ax = along(x, a[1]);
  Value v = cast(b, ax.view(b, x), acc_type(x.dtype()));
  // Rows whose max is -inf (all -inf) come out NaN, as on the CPU.
  Value shifted = b.sub(v, spread(b, b.reduce_max(v, ax.dims), v.shape(), ax.dims));
  Value e = b.exp(shifted);
  Value s = spread(b, b.reduce_sum(e, ax.dims), v.shape(), ax.dims);
  Value r = kind == Softmax::Log ? b.sub(shifted, b.log(s)) : b.div(e, s);
  return cast(b, ax.back(b, r), out);
}

Value softmax_backward(Context& ctx, const Args& a, Softmax kind) {
  Builder& b = ctx.b;
  Value g = a[0].as_tensor(), y = a[1].as_tensor();
  E out = a[3].as_dtype();
  Along ax = along(y, a[2]);
  E acc = acc_type(promote(g.dtype(), y.dtype()));
  Value gv = cast(b, ax.view(b, g), acc), yv = cast(b, ax.view(b, y), acc);
  Value r;
  if (kind == Softmax::Log) {
    // d/dx of x - logsumexp(x): g - softmax(x) * sum(g)
    Value s = spread(b, b.reduce_sum(gv, ax.dims), gv.shape(), ax.dims);
    r = b.sub(gv, b.mul(b.exp(yv), s));
  } else {
    // y * (g - sum(g * y))
    Value s = spread(b, b.reduce_sum(b.mul(gv, yv), ax.dims), gv.shape(), ax.dims);
    r = b.mul(yv, b.sub(gv, s));
  }
  return cast(b, ax.back(b, r), out);
}

// Layer norm normalizes the trailing normalized_shape.size() dims.
struct LayerNormDims {
  Dims norm, batch;
  Shape stat_shape;  // input shape with the normalized dims set to 1 (PyTorch CPU's layout)
  int64_t n = 1;     // elements per normalized group
};

LayerNormDims layer_norm_dims(const Value& x, const std::vector<int64_t>& normalized) {
  int64_t k = static_cast<int64_t>(normalized.size());
  TPU_CHECK(k >= 1, ErrorKind::Runtime,
            "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least "
            "one element, but got normalized_shape = ",
            hlo::shape_str(normalized));
  bool fits = x.rank() >= k;
  for (int64_t i = 0; fits && i < k; ++i) fits = x.shape()[x.rank() - k + i] == normalized[i];
  if (!fits) {
    std::string star = "[*";
    for (int64_t d : normalized) star += ", " + std::to_string(d);
    fail(ErrorKind::Runtime, "Given normalized_shape=", hlo::shape_str(normalized),
         ", expected input with shape ", star, "], but got input of size",
         hlo::shape_str(x.shape()));
  }
  LayerNormDims d;
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (i < x.rank() - k) {
      d.batch.push_back(i);
    } else {
      d.norm.push_back(i);
      d.n *= x.shape()[i];
    }
  }
  d.stat_shape = reduced_shape(x.shape(), d.norm, true);
  return d;
}

void check_param(const std::optional<Value>& p, const char* what, const Shape& normalized) {
  if (p)
    TPU_CHECK(p->shape() == normalized, ErrorKind::Runtime, "Expected ", what,
              " to be of same shape as normalized_shape, but got ", what, " of shape ",
              hlo::shape_str(p->shape()), " and normalized_shape = ", hlo::shape_str(normalized));
}

// An affine parameter laid over the trailing dims of `like`.
Value over_trailing(Builder& b, Value p, const Shape& like, E t) {
  return broadcast_to(b, cast(b, p, t), like);
}

std::vector<Value> lower_log_softmax(Context& ctx, const Args& a) {
  return {softmax_forward(ctx, a, Softmax::Log)};
}
std::vector<Value> lower_log_softmax_backward(Context& ctx, const Args& a) {
  return {softmax_backward(ctx, a, Softmax::Log)};
}
std::vector<Value> lower_softmax(Context& ctx, const Args& a) {
  return {softmax_forward(ctx, a, Softmax::Plain)};
}
std::vector<Value> lower_softmax_backward(Context& ctx, const Args& a) {
  return {softmax_backward(ctx, a, Softmax::Plain)};
}

// (out, mean, rstd). With half-precision input and f32 parameters (mixed
// types), PyTorch keeps mean and rstd in the parameters' type.
std::vector<Value> lower_native_layer_norm(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  const auto& normalized = a[1].as_ints();
  auto w = a[2].opt_tensor(), bias = a[3].opt_tensor();
  double eps = a[4].as_float();
  check_float("LayerNormKernelImpl", x.dtype());
  check_param(w, "weight", normalized);
  check_param(bias, "bias", normalized);
  LayerNormDims d = layer_norm_dims(x, normalized);
  E acc = acc_type(x.dtype());
  E stat = x.dtype();
  if (w && w->dtype() != x.dtype()) stat = w->dtype();
  else if (bias && bias->dtype() != x.dtype()) stat = bias->dtype();

  Value xa = cast(b, x, acc);
  Value n = b.full(double(d.n), acc, d.stat_shape);
  Value mean = b.div(b.reshape(b.reduce_sum(xa, d.norm), d.stat_shape), n);
  Value centered = b.sub(xa, broadcast_to(b, mean, x.shape()));
  Value var = b.div(b.reshape(b.reduce_sum(b.mul(centered, centered), d.norm), d.stat_shape), n);
  Value rstd = b.rsqrt(b.add(var, b.full(eps, acc, d.stat_shape)));
  Value y = b.mul(centered, broadcast_to(b, rstd, x.shape()));
  if (w) y = b.mul(y, over_trailing(b, *w, x.shape(), acc));
  if (bias) y = b.add(y, over_trailing(b, *bias, x.shape(), acc));
  return {cast(b, y, x.dtype()), cast(b, mean, stat), cast(b, rstd, stat)};
}

// (grad_input, grad_weight, grad_bias). All three are always computed:
// output_mask only says which the caller keeps, and the aten layer drops the
// others (a missing weight or bias still gets a gradient of its shape).
std::vector<Value> lower_native_layer_norm_backward(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value g = a[0].as_tensor(), x = a[1].as_tensor();
  const auto& normalized = a[2].as_ints();
  Value mean = a[3].as_tensor(), rstd = a[4].as_tensor();
  auto w = a[5].opt_tensor(), bias = a[6].opt_tensor();
  LayerNormDims d = layer_norm_dims(x, normalized);
  E acc = acc_type(promote(x.dtype(), g.dtype()));
  const Shape& shape = x.shape();

  Value ga = cast(b, g, acc);
  Value rstd_b = broadcast_to(b, b.reshape(cast(b, rstd, acc), d.stat_shape), shape);
  Value mean_b = broadcast_to(b, b.reshape(cast(b, mean, acc), d.stat_shape), shape);
  Value xhat = b.mul(b.sub(cast(b, x, acc), mean_b), rstd_b);
  Value gw = w ? b.mul(ga, over_trailing(b, *w, shape, acc)) : ga;

  // dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)), means over the group
  Value n = b.full(double(d.n), acc, reduced_shape(shape, d.norm, false));
  Value mean_gw = spread(b, b.div(b.reduce_sum(gw, d.norm), n), shape, d.norm);
  Value mean_gwx = spread(b, b.div(b.reduce_sum(b.mul(gw, xhat), d.norm), n), shape, d.norm);
  Value dx = b.mul(rstd_b, b.sub(b.sub(gw, mean_gw), b.mul(xhat, mean_gwx)));

  // With no batch dims the parameter gradients need no reduction at all.
  auto over_batch = [&](Value v) { return d.batch.empty() ? v : sum_by_kernel(ctx, v, d.batch); };
  Value dw = over_batch(b.mul(ga, xhat));
  Value db = over_batch(ga);
  return {cast(b, dx, x.dtype()), cast(b, dw, w ? w->dtype() : x.dtype()),
          cast(b, db, bias ? bias->dtype() : x.dtype())};
}

// Weight norm: w = v * (g / ||v||), the norm over every dim but `dim` (0 or the
// last, as torch._weight_norm calls it). The norms take g's shape; a bfloat16 g
// keeps them in f32, as the CPU kernel does.
struct WeightNorm {
  Dims others;  // the dims each norm runs over
  E acc, norm_type;
  Shape g_shape;
};

WeightNorm weight_norm_plan(const Value& v, const Value& g, const Arg& dim) {
  check_float("weight_norm", v.dtype());
  TPU_CHECK(v.rank() >= 1, ErrorKind::Runtime, "weight_norm: v must have at least one dim");
  int64_t d = wrap_dim(dim.as_int(), v.rank());
  TPU_CHECK(d == 0 || d == v.rank() - 1, ErrorKind::Runtime,
            "_weight_norm_interface: the fused kernel applies only to the first or last dim, got ",
            d, " (torch._weight_norm takes the composite path for the others)");
  WeightNorm w;
  for (int64_t i = 0; i < v.rank(); ++i)
    if (i != d) w.others.push_back(i);
  TPU_CHECK(g.shape() == reduced_shape(v.shape(), w.others, true), ErrorKind::Runtime,
            "weight_norm: g of shape ", hlo::shape_str(g.shape()), " does not match v of shape ",
            hlo::shape_str(v.shape()), " along dim ", d);
  w.acc = acc_type(promote(v.dtype(), g.dtype()));
  w.norm_type = g.dtype() == E::BF16 ? E::F32 : g.dtype();
  w.g_shape = g.shape();
  return w;
}

// sum over `others` of x, in g's shape
Value sum_others(Builder& b, Value x, const WeightNorm& w) {
  return w.others.empty() ? x : b.reshape(b.reduce_sum(x, w.others), w.g_shape);
}

// (w, norms)
std::vector<Value> lower_weight_norm_interface(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value v = a[0].as_tensor(), g = a[1].as_tensor();
  WeightNorm p = weight_norm_plan(v, g, a[2]);
  Value va = cast(b, v, p.acc);
  Value norm = b.sqrt(sum_others(b, b.mul(va, va), p));
  Value scale = b.div(cast(b, g, p.acc), norm);
  Value out = b.mul(va, broadcast_to(b, scale, v.shape()));
  return {cast(b, out, v.dtype()), cast(b, norm, p.norm_type)};
}

// (grad_v, grad_g) from (grad_w, v, g, norms):
// grad_g = sum(grad_w * v) / norm, grad_v = (g / norm) * (grad_w - v * grad_g / norm)
std::vector<Value> lower_weight_norm_interface_backward(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value gw = a[0].as_tensor(), v = a[1].as_tensor(), g = a[2].as_tensor();
  Value norms = a[3].as_tensor();
  WeightNorm p = weight_norm_plan(v, g, a[4]);
  const Shape& shape = v.shape();
  Value gwa = cast(b, gw, p.acc), va = cast(b, v, p.acc);
  Value norm = cast(b, norms, p.acc);
  Value grad_g = b.div(sum_others(b, b.mul(gwa, va), p), norm);
  Value per_norm = b.div(grad_g, norm);
  Value scale = b.div(cast(b, g, p.acc), norm);
  Value grad_v = b.mul(broadcast_to(b, scale, shape),
                       b.sub(gwa, b.mul(va, broadcast_to(b, per_norm, shape))));
  return {cast(b, grad_v, v.dtype()), cast(b, grad_g, g.dtype())};
}

}  // namespace

TPU_LOWERING("aten::_log_softmax", lower_log_softmax);
TPU_LOWERING("aten::_log_softmax_backward_data", lower_log_softmax_backward);
TPU_LOWERING("aten::_softmax", lower_softmax);
TPU_LOWERING("aten::_softmax_backward_data", lower_softmax_backward);
TPU_LOWERING("aten::_weight_norm_interface", lower_weight_norm_interface);
TPU_LOWERING("aten::_weight_norm_interface_backward", lower_weight_norm_interface_backward);
TPU_LOWERING("aten::native_layer_norm", lower_native_layer_norm);
TPU_LOWERING("aten::native_layer_norm_backward", lower_native_layer_norm_backward);

}  // namespace torch_tpu::lowering
