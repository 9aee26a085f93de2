// Convolutions. PyTorch's conv1d/2d/3d and conv_transpose* are composite and
// reach the backend as aten::convolution and aten::convolution_backward.
// Everything here is one stablehlo.convolution:
//  - a transposed convolution is a convolution of the stride-dilated input
//    with the spatially flipped kernel;
//  - grad_input of a convolution is the transposed convolution of grad_output
//    (and grad_input of a transposed convolution is a plain convolution);
//  - grad_weight is a convolution of the input with grad_output in which the
//    batch is the contracted ("feature") dimension.
#include <string>

#include "lowering/common.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

using hlo::Builder;
using E = ElementType;
using Ints = std::vector<int64_t>;
using Pads = std::vector<std::pair<int64_t, int64_t>>;

// Half-precision products accumulate in f32 (as PyTorch's CPU and CUDA
// kernels do, and as the MXU does natively) and are rounded once, after the
// bias is added.
E acc_type(E t) { return t == E::F16 || t == E::BF16 ? E::F32 : t; }

std::string join(const Ints& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out;
}

std::string array(const Ints& v) { return v.empty() ? "array<i64>" : "array<i64: " + join(v) + ">"; }

std::string sizes_str(const Shape& s) { return "[" + join(s) + "]"; }

// One stablehlo.convolution. Spatial dimensions are always 2.. in order on
// all three operands; `lhs`, `rhs`, `out` say what dimensions 0 and 1 are
// ("bf"/"fb" for lhs and out, "oi"/"io" for the kernel), which is all the
// layouts the gradients need.
struct Window {
  Ints strides, lhs_dilation, rhs_dilation;
  Pads padding;
  int64_t feature_groups = 1, batch_groups = 1;
};

Value conv(Builder& b, Value lhs, Value rhs, const char* lhs_layout, const char* rhs_layout,
           const char* out_layout, const Window& w, E result) {
  size_t n = lhs.shape().size() - 2;
  auto dim_of = [](const char* layout, char c) -> int64_t { return layout[0] == c ? 0 : 1; };
  auto labels = [n](const char* layout) {
    std::string s = std::string("[") + layout[0] + ", " + layout[1];
    for (size_t i = 0; i < n; ++i) s += ", " + std::to_string(i);
    return s + "]";
  };
  int64_t batch = lhs.shape()[dim_of(lhs_layout, 'b')];
  int64_t features = rhs.shape()[dim_of(rhs_layout, 'o')];
  Shape out(2 + n);
  out[dim_of(out_layout, 'b')] = batch / w.batch_groups;
  out[dim_of(out_layout, 'f')] = features;
  std::string pads;
  for (size_t i = 0; i < n; ++i) {
    int64_t in = lhs.shape()[2 + i], k = rhs.shape()[2 + i];
    int64_t dilated_in = (in > 0 ? (in - 1) * w.lhs_dilation[i] + 1 : 0) + w.padding[i].first +
                         w.padding[i].second;
    int64_t dilated_k = k > 0 ? (k - 1) * w.rhs_dilation[i] + 1 : 0;
    out[2 + i] = dilated_in < dilated_k ? 0 : (dilated_in - dilated_k) / w.strides[i] + 1;
    pads += std::string(i ? ", " : "") + "[" + std::to_string(w.padding[i].first) + ", " +
            std::to_string(w.padding[i].second) + "]";
  }
  std::string attrs =
      "batch_group_count = " + std::to_string(w.batch_groups) +
      " : i64, dimension_numbers = #stablehlo.conv<" + labels(lhs_layout) + "x" +
      labels(rhs_layout) + "->" + labels(out_layout) +
      ">, feature_group_count = " + std::to_string(w.feature_groups) +
      " : i64, lhs_dilation = " + array(w.lhs_dilation) + ", padding = dense<" +
      (n ? "[" + pads + "]" : std::string("0")) + "> : tensor<" + std::to_string(n) +
      "x2xi64>, rhs_dilation = " + array(w.rhs_dilation) + ", window_strides = " +
      array(w.strides);
  std::string precision = b.precision_attr(lhs.dtype());
  if (!precision.empty()) attrs += ", " + precision;
  return b.op("stablehlo.convolution", {lhs, rhs}, hlo::TensorType{result, out}, attrs);
}

// The attributes of aten::convolution, with one-element lists expanded to
// every spatial dimension as PyTorch does.
struct Params {
  Ints stride, padding, dilation, output_padding;
  bool transposed = false;
  int64_t groups = 1;
};

Ints expand(const Ints& v, size_t n, const char* what) {
  if (v.size() == 1 && n != 1) return Ints(n, v[0]);
  TPU_CHECK(v.size() == n, ErrorKind::Runtime, "expected ", what, " to be a single integer value or a list of ",
            n, " values to match the convolution dimensions, but got ", what, "=", sizes_str(v));
  return v;
}

Params params(const Args& a, size_t first, size_t n) {
  Params p;
  p.stride = expand(a[first].as_ints(), n, "stride");
  p.padding = expand(a[first + 1].as_ints(), n, "padding");
  p.dilation = expand(a[first + 2].as_ints(), n, "dilation");
  p.transposed = a[first + 3].as_bool();
  p.output_padding = expand(a[first + 4].as_ints(), n, "output_padding");
  p.groups = a[first + 5].as_int();
  return p;
}

// PyTorch's check_shape_forward, with its messages.
void check_forward(const Value& x, const Value& w, const std::optional<Value>& bias,
                   const Params& p) {
  const Shape &xs = x.shape(), &ws = w.shape();
  TPU_CHECK(ws.size() >= 3, ErrorKind::Runtime, "weight should have at least three dimensions");
  TPU_CHECK(xs.size() == ws.size(), ErrorKind::Runtime, "Expected ", ws.size(),
            "-dimensional input for ", ws.size(), "-dimensional weight ", sizes_str(ws), ", but got ",
            xs.size(), "-dimensional input of size ", sizes_str(xs), " instead");
  TPU_CHECK(p.groups > 0, ErrorKind::Runtime, "non-positive groups is not supported");
  for (size_t i = 0; i < p.stride.size(); ++i) {
    TPU_CHECK(p.stride[i] > 0, ErrorKind::Runtime, "non-positive stride is not supported");
    TPU_CHECK(p.padding[i] >= 0, ErrorKind::Runtime, "negative padding is not supported");
    TPU_CHECK(p.dilation[i] > 0, ErrorKind::Runtime, "dilation should be greater than zero");
  }
  TPU_CHECK(ws[0] % p.groups == 0, ErrorKind::Runtime,
            "Given groups=", p.groups, ", expected weight to be divisible by ", p.groups,
            " at dimension 0, but got weight of size ", sizes_str(ws), " instead");
  if (!p.transposed) {
    TPU_CHECK(xs[1] == ws[1] * p.groups, ErrorKind::Runtime, "Given groups=", p.groups,
              ", weight of size ", sizes_str(ws), ", expected input", sizes_str(xs), " to have ",
              ws[1] * p.groups, " channels, but got ", xs[1], " channels instead");
    bool fits = true;
    Shape padded, kernel;
    for (size_t i = 2; i < xs.size(); ++i) {
      padded.push_back(xs[i] + 2 * p.padding[i - 2]);
      kernel.push_back(p.dilation[i - 2] * (ws[i] - 1) + 1);
      fits = fits && padded.back() >= kernel.back();
    }
    auto by = [](const Shape& s) {
      std::string out;
      for (size_t i = 0; i < s.size(); ++i) out += (i ? " x " : "") + std::to_string(s[i]);
      return out;
    };
    TPU_CHECK(fits, ErrorKind::Runtime, "Calculated padded input size per channel: (", by(padded),
              "). Kernel size: (", by(kernel), "). Kernel size can't be greater than actual input size");
  } else {
    TPU_CHECK(xs[1] == ws[0], ErrorKind::Runtime, "Given transposed=1, weight of size ",
              sizes_str(ws), ", expected input", sizes_str(xs), " to have ", ws[0],
              " channels, but got ", xs[1], " channels instead");
    for (size_t i = 0; i < p.output_padding.size(); ++i)
      TPU_CHECK(p.output_padding[i] < p.stride[i] || p.output_padding[i] < p.dilation[i],
                ErrorKind::Runtime,
                "output padding must be smaller than either stride or dilation, but got "
                "output_padding_height: ",
                p.output_padding[i], " stride: ", p.stride[i], " dilation: ", p.dilation[i]);
  }
  int64_t out_channels = p.transposed ? ws[1] * p.groups : ws[0];
  if (bias)
    TPU_CHECK(bias->rank() == 1 && bias->shape()[0] == out_channels, ErrorKind::Runtime,
              "Given weight of size ", sizes_str(ws), ", expected bias to be 1-dimensional with ",
              out_channels, " elements, but got bias of size ", sizes_str(bias->shape()),
              " instead");
  auto type_name = [](E t) { return std::string("torch.tpu.") + scalar_type_name(t) + "Tensor"; };
  TPU_CHECK(x.dtype() == w.dtype(), ErrorKind::Runtime, "Input type (", type_name(x.dtype()),
            ") and weight type (", type_name(w.dtype()), ") should be the same");
  if (bias)
    TPU_CHECK(x.dtype() == bias->dtype(), ErrorKind::Runtime, "Input type (",
              type_name(x.dtype()), ") and bias type (", type_name(bias->dtype()),
              ") should be the same");
  TPU_CHECK(x.dtype() != E::Bool && !hlo::is_complex(x.dtype()), ErrorKind::NotImplemented,
            "\"convolution\" not implemented for '", scalar_type_name(x.dtype()), "'");
}

// A convolution's output (or a transposed one's, whose extra output_padding
// rows are the high padding), accumulated in `acc`.
Value convolve(Builder& b, Value x, Value w, const Params& p, E acc) {
  size_t n = x.shape().size() - 2;
  Window win;
  win.feature_groups = p.groups;
  win.rhs_dilation = p.dilation;
  if (!p.transposed) {
    win.strides = p.stride;
    win.lhs_dilation = Ints(n, 1);
    for (size_t i = 0; i < n; ++i) win.padding.push_back({p.padding[i], p.padding[i]});
    return conv(b, x, w, "bf", "oi", "bf", win, acc);
  }
  // The weight is [C_in, C_out/g, k...]; the convolution wants each group's
  // input channels as the kernel's input features and all C_out outputs
  // grouped in order: [C_in/g, C_out, k...].
  const Shape& ws = w.shape();
  int64_t g = p.groups, cin = ws[0] / g, cout = ws[1];
  Shape split = {g, cin, cout};
  split.insert(split.end(), ws.begin() + 2, ws.end());
  Ints perm = {1, 0, 2};
  for (size_t i = 0; i < n; ++i) perm.push_back(3 + i);
  Shape merged = {cin, g * cout};
  merged.insert(merged.end(), ws.begin() + 2, ws.end());
  Ints spatial;
  for (size_t i = 0; i < n; ++i) spatial.push_back(2 + i);
  Value k = b.reverse(b.reshape(b.transpose(b.reshape(w, split), perm), merged), spatial);
  win.strides = Ints(n, 1);
  win.lhs_dilation = p.stride;
  for (size_t i = 0; i < n; ++i) {
    int64_t edge = p.dilation[i] * (ws[2 + i] - 1) - p.padding[i];
    win.padding.push_back({edge, edge + p.output_padding[i]});
  }
  return conv(b, x, k, "bf", "io", "bf", win, acc);
}

// d(loss)/d(weight) of a plain convolution of x giving an output like g: the
// batch is contracted and x's channels are the batch of the product.
Value weight_grad(Builder& b, Value x, Value g, const Params& p, const Shape& kernel, E acc) {
  size_t n = x.shape().size() - 2;
  Window win;
  win.strides = p.dilation;
  win.rhs_dilation = p.stride;
  win.lhs_dilation = Ints(n, 1);
  for (size_t i = 0; i < n; ++i) {
    int64_t in = x.shape()[2 + i], out = g.shape()[2 + i];
    // High padding that makes the result exactly kernel-sized; negative when
    // the forward window never reached the input's last rows.
    int64_t high = p.dilation[i] * (kernel[i] - 1) + p.stride[i] * (out - 1) + 1 - in - p.padding[i];
    win.padding.push_back({p.padding[i], high});
  }
  if (p.groups == 1) return conv(b, x, g, "fb", "io", "fb", win, acc);
  // With groups each block of output channels sees only its block of x's
  // channels. batch_group_count says exactly that, but XLA's CPU compiler
  // expands it into a dense convolution masked per group, quadratic in the
  // channels (seconds for a depthwise one of 2304); the same sums as a
  // feature-grouped convolution, whose groups hold (group, batch) features
  // of x, run as fast as the forward one.
  const Shape& xs = x.shape();
  int64_t groups = p.groups, batch = xs[0], per_group = xs[1] / groups;
  Shape split = {batch, groups, per_group};
  split.insert(split.end(), xs.begin() + 2, xs.end());
  Ints to_front = {2, 1, 0}, g_perm = {1, 0};
  for (size_t i = 0; i < n; ++i) {
    to_front.push_back(3 + i);
    g_perm.push_back(2 + i);
  }
  Shape merged = {per_group, groups * batch};
  merged.insert(merged.end(), xs.begin() + 2, xs.end());
  Value lhs = b.reshape(b.transpose(b.reshape(x, split), to_front), merged);
  win.feature_groups = groups;
  return conv(b, lhs, b.transpose(g, g_perm), "bf", "oi", "fb", win, acc);
}

Value with_bias(Builder& b, Value y, const std::optional<Value>& bias) {
  if (!bias) return y;
  return b.add(y, b.broadcast_in_dim(cast(b, *bias, y.dtype()), y.shape(), {1}));
}

std::vector<Value> lower_convolution(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor(), w = a[1].as_tensor();
  auto bias = a[2].opt_tensor();
  TPU_CHECK(w.rank() >= 3, ErrorKind::Runtime, "weight should have at least three dimensions");
  Params p = params(a, 3, w.rank() - 2);
  check_forward(x, w, bias, p);
  E acc = acc_type(x.dtype());
  Value y = convolve(b, x, w, p, acc);
  return {cast(b, with_bias(b, y, bias), x.dtype())};
}

// (grad_input, grad_weight, grad_bias). All three are computed whatever
// output_mask says (the aten layer returns what the caller asked for); a
// gradient nobody needs costs a convolution, so the masked-off ones are zeros.
std::vector<Value> lower_convolution_backward(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value g = a[0].as_tensor(), x = a[1].as_tensor(), w = a[2].as_tensor();
  TPU_CHECK(w.rank() >= 3, ErrorKind::Runtime, "weight should have at least three dimensions");
  size_t n = w.rank() - 2;
  Params p = params(a, 4, n);
  const auto& mask = a[10].bools;
  auto wanted = [&](size_t i) { return i >= mask.size() || mask[i]; };
  E out = x.dtype(), acc = acc_type(out);
  Shape bias_shape = {p.transposed ? w.shape()[1] * p.groups : w.shape()[0]};
  if (!a[3].is_none()) bias_shape = a[3].as_ints();

  Value gx = b.zeros(out, x.shape()), gw = b.zeros(out, w.shape()), gb = b.zeros(out, bias_shape);
  if (wanted(0)) {
    // The input gradient of a convolution is the opposite kind of
    // convolution with the same weight; output_padding recovers the input
    // rows the forward strides skipped.
    Params q = p;
    q.transposed = !p.transposed;
    if (q.transposed)
      for (size_t i = 0; i < n; ++i)
        q.output_padding[i] = x.shape()[2 + i] - ((g.shape()[2 + i] - 1) * p.stride[i] -
                                                  2 * p.padding[i] +
                                                  p.dilation[i] * (w.shape()[2 + i] - 1) + 1);
    gx = convolve(b, g, w, q, acc);
    // A transposed convolution's output_padding may reach a stride or more
    // (allowed when the dilation is larger): the plain convolution back then
    // yields floor(output_padding / stride) rows past the input, which no
    // input row produced.
    if (gx.shape() != x.shape()) gx = b.slice(gx, Ints(x.rank(), 0), x.shape(), Ints(x.rank(), 1));
    gx = cast(b, gx, out);
  }
  if (wanted(1)) {
    Shape kernel(w.shape().begin() + 2, w.shape().end());
    // A transposed convolution is the adjoint of a plain one from its output
    // to its input, so its weight gradient swaps the roles of x and g.
    gw = p.transposed ? weight_grad(b, g, x, p, kernel, acc) : weight_grad(b, x, g, p, kernel, acc);
    gw = cast(b, gw, out);
  }
  if (wanted(2)) {
    Ints dims = {0};
    for (size_t i = 0; i < n; ++i) dims.push_back(2 + i);
    gb = b.reshape(cast(b, b.reduce_sum(cast(b, g, acc), dims), out), bias_shape);
  }
  return {gx, gw, gb};
}

}  // namespace

TPU_LOWERING("aten::convolution", lower_convolution);
TPU_LOWERING("aten::convolution_backward", lower_convolution_backward);

}  // namespace torch_tpu::lowering
