// Upsampling (nearest, nearest-exact, linear/bilinear/trilinear, antialiased
// bilinear and bicubic) and the gradients. Every mode is separable and its
// source rows and weights depend only on sizes and scales, so they are
// computed here, with PyTorch's arithmetic (float for float inputs, double
// for double), and applied one dimension at a time as gathers; the gradients
// are the matching scatter-adds. The .vec overloads are deliberately not
// registered: they are CompositeImplicitAutograd, and a backend kernel for
// them would replace their autograd decomposition (and with it the gradient)
// in eager mode.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "lowering/common.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

using hlo::Builder;
using E = ElementType;
using Ints = std::vector<int64_t>;
using Scales = std::vector<std::optional<double>>;

enum class Kind { Nearest, NearestExact, Linear };

E acc_type(E t) { return t == E::F64 ? E::F64 : E::F32; }

// PyTorch's compute_scales_value / area_pixel_compute_scale in type T.
template <typename T>
T scale_of(int64_t in, int64_t out, const std::optional<double>& scale, bool align_corners,
           bool linear) {
  if (linear && align_corners) return out > 1 ? T(in - 1) / T(out - 1) : T(0);
  if (scale && *scale > 0) return T(1.0 / *scale);
  return T(in) / T(out);
}

Ints nearest_rows(Kind kind, int64_t in, int64_t out, const std::optional<double>& scale) {
  float s = scale_of<float>(in, out, scale, false, false);
  Ints rows;
  for (int64_t o = 0; o < out; ++o) {
    int64_t r = kind == Kind::Nearest ? int64_t(std::floor(float(o) * s))
                                      : int64_t(std::floor((float(o) + 0.5f) * s));
    rows.push_back(std::min(r, in - 1));
  }
  return rows;
}

// Each output row blends rows i0 and i1 with weights w0 and w1.
struct Blend {
  Ints i0, i1;
  std::vector<double> w0, w1;
};

template <typename T>
Blend linear_rows(int64_t in, int64_t out, const std::optional<double>& scale, bool align) {
  T s = scale_of<T>(in, out, scale, align, true);
  Blend b;
  for (int64_t o = 0; o < out; ++o) {
    // One rounding (fma), as the CPU's vectorized kernels compile it: rounded
    // twice, a row's weight moved by an ulp of the coordinate (row 200 of
    // 345 -> 270: 4e-4 in the output).
    T src = align ? s * T(o) : std::max(std::fma(s, T(o) + T(0.5), T(-0.5)), T(0));
    int64_t i0 = std::min(int64_t(src), in - 1);
    int64_t i1 = i0 + (i0 < in - 1 ? 1 : 0);
    T l1 = std::min(src - T(i0), T(1));
    b.i0.push_back(i0);
    b.i1.push_back(i1);
    b.w0.push_back(double(T(1) - l1));
    b.w1.push_back(double(l1));
  }
  return b;
}

struct Resize {
  Kind kind;
  Ints in, out;  // spatial sizes
  Scales scales;
  bool align_corners = false;
};

Blend blend_of(const Resize& r, size_t i, E acc) {
  return acc == E::F64 ? linear_rows<double>(r.in[i], r.out[i], r.scales[i], r.align_corners)
                       : linear_rows<float>(r.in[i], r.out[i], r.scales[i], r.align_corners);
}

Value weights_along(Builder& b, const std::vector<double>& w, const Shape& shape, int64_t dim, E t) {
  return b.broadcast_in_dim(constant_vector(b, w, t), shape, {dim});
}

// Dimensions are resized last first, which is also the order in which
// PyTorch's kernels nest their interpolation weights.
Value resize(Builder& b, Value x, const Resize& r) {
  size_t n = r.in.size();
  int64_t lead = x.rank() - n;
  if (r.kind != Kind::Linear) {
    for (size_t i = n; i-- > 0;) x = take(b, x, lead + i, nearest_rows(r.kind, r.in[i], r.out[i], r.scales[i]));
    return x;
  }
  E t = x.dtype(), acc = acc_type(t);
  x = cast(b, x, acc);
  for (size_t i = n; i-- > 0;) {
    Blend bl = blend_of(r, i, acc);
    Value a = take(b, x, lead + i, bl.i0), c = take(b, x, lead + i, bl.i1);
    x = b.add(b.mul(weights_along(b, bl.w0, a.shape(), lead + i, acc), a),
              b.mul(weights_along(b, bl.w1, c.shape(), lead + i, acc), c));
  }
  return cast(b, x, t);
}

Value resize_grad(Builder& b, Value g, const Resize& r) {
  size_t n = r.in.size();
  int64_t lead = g.rank() - n;
  E t = g.dtype(), acc = acc_type(t);
  g = cast(b, g, acc);
  for (size_t i = 0; i < n; ++i) {
    int64_t dim = lead + i;
    if (r.kind != Kind::Linear) {
      g = take_grad(b, g, dim, nearest_rows(r.kind, r.in[i], r.out[i], r.scales[i]), r.in[i]);
      continue;
    }
    Blend bl = blend_of(r, i, acc);
    g = b.add(take_grad(b, b.mul(weights_along(b, bl.w0, g.shape(), dim, acc), g), dim, bl.i0, r.in[i]),
              take_grad(b, b.mul(weights_along(b, bl.w1, g.shape(), dim, acc), g), dim, bl.i1, r.in[i]));
  }
  return cast(b, g, t);
}

const char* op_name(Kind k, size_t n) {
  static const char* names[3][3] = {
      {"upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d"},
      {"_upsample_nearest_exact1d", "_upsample_nearest_exact2d", "_upsample_nearest_exact3d"},
      {"upsample_linear1d", "upsample_bilinear2d", "upsample_trilinear3d"}};
  return names[int(k)][n - 1];
}

std::optional<double> opt_float(const Arg& a) {
  if (a.is_none()) return std::nullopt;
  return a.as_float();
}

void check_input(Kind k, const Value& x, size_t n, const Ints& out) {
  const char* name = op_name(k, n);
  TPU_CHECK(x.rank() == int64_t(n) + 2, ErrorKind::Runtime, "Expected ", n + 2,
            "D input tensor for ", name, ", but got ", x.rank(), "D");
  TPU_CHECK(out.size() == n, ErrorKind::Runtime, "It is expected output_size equals to ", n,
            ", but got size ", out.size());
  for (size_t i = 0; i < n; ++i)
    TPU_CHECK(x.shape()[2 + i] > 0 && out[i] > 0, ErrorKind::Runtime,
              "Input and output sizes should be greater than 0, but got input size and output size");
  TPU_CHECK(x.dtype() != E::Bool && !hlo::is_complex(x.dtype()) &&
                (k != Kind::Linear || hlo::is_float(x.dtype())),
            ErrorKind::NotImplemented, "\"", name, "\" not implemented for '",
            scalar_type_name(x.dtype()), "'");
}

Ints spatial(const Shape& s, size_t n) { return Ints(s.end() - n, s.end()); }

// Schemas: default (self, output_size, [align_corners,] scales...),
// backward (grad_output, output_size, input_size, [align_corners,] scales...).
template <Kind k, size_t n>
std::vector<Value> lower_default(Context& ctx, const Args& a) {
  Value x = a[0].as_tensor();
  size_t first = k == Kind::Linear ? 3 : 2;
  Resize r{k, spatial(x.shape(), n), a[1].as_ints(), {}, k == Kind::Linear && a[2].as_bool()};
  check_input(k, x, n, r.out);
  for (size_t i = 0; i < n; ++i) r.scales.push_back(opt_float(a[first + i]));
  return {resize(ctx.b, x, r)};
}

template <Kind k, size_t n>
std::vector<Value> lower_backward(Context& ctx, const Args& a) {
  Value g = a[0].as_tensor();
  size_t first = k == Kind::Linear ? 4 : 3;
  const Ints& input_size = a[2].as_ints();
  TPU_CHECK(input_size.size() == n + 2, ErrorKind::Runtime, "It is expected input_size equals to ",
            n + 2, ", but got size ", input_size.size());
  Resize r{k, spatial(input_size, n), a[1].as_ints(), {}, k == Kind::Linear && a[3].as_bool()};
  for (size_t i = 0; i < n; ++i) r.scales.push_back(opt_float(a[first + i]));
  TPU_CHECK(spatial(g.shape(), n) == r.out, ErrorKind::Runtime,
            "Expected grad_output to have the output size of ", op_name(k, n));
  return {resize_grad(ctx.b, g, r)};
}

// ---- antialiased bilinear and bicubic (_upsample_*2d_aa)
//
// PIL's resampling, as PyTorch's aa kernels compute it: output row o is the
// normalized average of the input rows within `support` of its centre
// scale * (o + 0.5), weighted by the triangle (bilinear) or the Keys cubic
// with a = -0.5 (bicubic), stretched by the scale when downsampling. The
// forward resizes the last dimension first and leaves a dimension of
// unchanged size alone; the backward scatters through every dimension.

enum class Filter { Triangle, Cubic };

template <typename T>
T filter_at(Filter f, T x) {
  x = std::abs(x);
  if (f == Filter::Triangle) return x < T(1) ? T(1) - x : T(0);
  const T a = T(-0.5);
  if (x < T(1)) return ((a + T(2)) * x - (a + T(3))) * x * x + T(1);
  if (x < T(2)) return ((a * x - T(5) * a) * x + T(8) * a) * x - T(4) * a;
  return T(0);
}

// Tap k of output row o reads row idx[k][o] with weight w[k][o] (0 past the
// row's window, whose index is clamped into range).
struct AaTaps {
  std::vector<Ints> idx;
  std::vector<std::vector<double>> w;
};

template <typename T>
AaTaps aa_taps(Filter f, int64_t in, int64_t out, const std::optional<double>& scale, bool align) {
  T s = scale_of<T>(in, out, scale, align, true);
  T half = T(f == Filter::Triangle ? 1 : 2);
  T support = s >= T(1) ? half * s : half;
  int64_t max_taps = int64_t(std::ceil(support)) * 2 + 1;
  T invscale = s >= T(1) ? T(1) / s : T(1);
  AaTaps taps{std::vector<Ints>(max_taps, Ints(out, 0)),
              std::vector<std::vector<double>>(max_taps, std::vector<double>(out, 0.0))};
  for (int64_t o = 0; o < out; ++o) {
    T center = s * (T(o) + T(0.5));
    int64_t lo = std::max(int64_t(center - support + T(0.5)), int64_t(0));
    int64_t size = std::min(int64_t(center + support + T(0.5)), in) - lo;
    size = std::clamp(size, int64_t(0), max_taps);
    std::vector<T> w(size);
    T total = T(0);
    for (int64_t j = 0; j < size; ++j) {
      w[j] = filter_at<T>(f, (T(j + lo) - center + T(0.5)) * invscale);
      total += w[j];
    }
    for (int64_t j = 0; j < max_taps; ++j) {
      taps.idx[j][o] = std::min(lo + j, in - 1);
      if (j < size) taps.w[j][o] = double(total != T(0) ? w[j] / total : w[j]);
    }
  }
  return taps;
}

AaTaps aa_taps_of(Filter f, E acc, int64_t in, int64_t out, const std::optional<double>& scale, bool align) {
  return acc == E::F64 ? aa_taps<double>(f, in, out, scale, align) : aa_taps<float>(f, in, out, scale, align);
}

const char* aa_name(Filter f) {
  return f == Filter::Triangle ? "_upsample_bilinear2d_aa" : "_upsample_bicubic2d_aa";
}

// (self, output_size, align_corners, scales_h, scales_w)
template <Filter f>
std::vector<Value> lower_aa(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  const Ints& out = a[1].as_ints();
  bool align = a[2].as_bool();
  TPU_CHECK(x.rank() == 4, ErrorKind::Runtime, "Expected 4D input tensor for ", aa_name(f), ", but got ", x.rank(), "D");
  TPU_CHECK(out.size() == 2, ErrorKind::Runtime, "It is expected output_size equals to 2, but got size ", out.size());
  TPU_CHECK(x.shape()[2] > 0 && x.shape()[3] > 0 && out[0] > 0 && out[1] > 0, ErrorKind::Runtime,
            "Input and output sizes should be greater than 0, but got input (H: ", x.shape()[2], ", W: ",
            x.shape()[3], ") output (H: ", out[0], ", W: ", out[1], ")");
  // The CPU's uint8 path rounds through fixed-point weights; only floats here.
  check_dtype(hlo::is_float(x.dtype()), aa_name(f), x.dtype());
  E t = x.dtype(), acc = acc_type(t);
  x = cast(b, x, acc);
  std::optional<double> scales[2] = {opt_float(a[3]), opt_float(a[4])};
  for (int d = 1; d >= 0; --d) {
    int64_t dim = 2 + d;
    if (x.shape()[dim] == out[d]) continue;
    AaTaps tp = aa_taps_of(f, acc, x.shape()[dim], out[d], scales[d], align);
    Value sum;
    for (size_t k = 0; k < tp.idx.size(); ++k) {
      Value v = take(b, x, dim, tp.idx[k]);
      Value term = b.mul(weights_along(b, tp.w[k], v.shape(), dim, acc), v);
      sum = k == 0 ? term : b.add(sum, term);
    }
    x = sum;
  }
  return {cast(b, x, t)};
}

// (grad_output, output_size, input_size, align_corners, scales_h, scales_w)
template <Filter f>
std::vector<Value> lower_aa_backward(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value g = a[0].as_tensor();
  const Ints &out = a[1].as_ints(), &in = a[2].as_ints();
  bool align = a[3].as_bool();
  TPU_CHECK(out.size() == 2 && in.size() == 4, ErrorKind::Runtime, aa_name(f),
            "_backward expects an output_size of 2 and an input_size of 4 elements");
  TPU_CHECK(g.rank() == 4 && g.shape()[0] == in[0] && g.shape()[1] == in[1] && g.shape()[2] == out[0] &&
                g.shape()[3] == out[1],
            ErrorKind::Runtime, "Expected grad_output to have the output size of ", aa_name(f));
  E t = g.dtype(), acc = acc_type(t);
  g = cast(b, g, acc);
  std::optional<double> scales[2] = {opt_float(a[4]), opt_float(a[5])};
  for (int d = 0; d < 2; ++d) {
    int64_t dim = 2 + d;
    AaTaps tp = aa_taps_of(f, acc, in[dim], out[d], scales[d], align);
    Value sum;
    for (size_t k = 0; k < tp.idx.size(); ++k) {
      Value v = take_grad(b, b.mul(weights_along(b, tp.w[k], g.shape(), dim, acc), g), dim, tp.idx[k], in[dim]);
      sum = k == 0 ? v : b.add(sum, v);
    }
    g = sum;
  }
  return {cast(b, g, t)};
}

constexpr Kind kExact = Kind::NearestExact;
constexpr Kind kLinear = Kind::Linear;
constexpr Kind kNearest = Kind::Nearest;

}  // namespace

TPU_LOWERING("aten::_upsample_bicubic2d_aa", lower_aa<Filter::Cubic>);
TPU_LOWERING("aten::_upsample_bicubic2d_aa_backward", lower_aa_backward<Filter::Cubic>);
TPU_LOWERING("aten::_upsample_bilinear2d_aa", lower_aa<Filter::Triangle>);
TPU_LOWERING("aten::_upsample_bilinear2d_aa_backward", lower_aa_backward<Filter::Triangle>);
TPU_LOWERING("aten::_upsample_nearest_exact1d", lower_default<kExact, 1>);
TPU_LOWERING("aten::_upsample_nearest_exact1d_backward", lower_backward<kExact, 1>);
TPU_LOWERING("aten::_upsample_nearest_exact2d", lower_default<kExact, 2>);
TPU_LOWERING("aten::_upsample_nearest_exact2d_backward", lower_backward<kExact, 2>);
TPU_LOWERING("aten::_upsample_nearest_exact3d", lower_default<kExact, 3>);
TPU_LOWERING("aten::_upsample_nearest_exact3d_backward", lower_backward<kExact, 3>);
TPU_LOWERING("aten::upsample_bilinear2d", lower_default<kLinear, 2>);
TPU_LOWERING("aten::upsample_bilinear2d_backward", lower_backward<kLinear, 2>);
TPU_LOWERING("aten::upsample_linear1d", lower_default<kLinear, 1>);
TPU_LOWERING("aten::upsample_linear1d_backward", lower_backward<kLinear, 1>);
TPU_LOWERING("aten::upsample_nearest1d", lower_default<kNearest, 1>);
TPU_LOWERING("aten::upsample_nearest1d_backward", lower_backward<kNearest, 1>);
TPU_LOWERING("aten::upsample_nearest2d", lower_default<kNearest, 2>);
TPU_LOWERING("aten::upsample_nearest2d_backward", lower_backward<kNearest, 2>);
TPU_LOWERING("aten::upsample_nearest3d", lower_default<kNearest, 3>);
TPU_LOWERING("aten::upsample_nearest3d_backward", lower_backward<kNearest, 3>);
TPU_LOWERING("aten::upsample_trilinear3d", lower_default<kLinear, 3>);
TPU_LOWERING("aten::upsample_trilinear3d_backward", lower_backward<kLinear, 3>);

}  // namespace torch_tpu::lowering
