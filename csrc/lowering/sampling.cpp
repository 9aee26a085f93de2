// Sampling and rearranging ops: grid_sampler_2d (bilinear/nearest/bicubic; zeros,
// border, reflection padding), grid_sampler_3d (trilinear/nearest) and their
// backwards, im2col/col2im, pixel (un)shuffle, channel_shuffle, bicubic
// upsampling and its backward, glu and prelu with their backwards. Half types compute in float and round once.
#include <cmath>
#include <optional>
#include <string>
#include <tuple>

#include "lowering/common.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

using hlo::Builder;
using hlo::Compare;
using E = ElementType;
using Ints = std::vector<int64_t>;
using Values = std::vector<Value>;

Ints iota_perm(int64_t n) {
  Ints p;
  for (int64_t i = 0; i < n; ++i) p.push_back(i);
  return p;
}

// ---- pixel_shuffle / pixel_unshuffle / channel_shuffle

Values lower_pixel_shuffle(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  int64_t r = a[1].as_int();
  TPU_CHECK(x.rank() >= 3, ErrorKind::Runtime, "pixel_shuffle expects input to have at least 3 dimensions, but got input with ", x.rank(), " dimension(s)");
  TPU_CHECK(r > 0, ErrorKind::Runtime, "pixel_shuffle expects a positive upscale_factor, but got ", r);
  const Shape& s = x.shape();
  int64_t n = x.rank(), c = s[n - 3], h = s[n - 2], w = s[n - 1];
  TPU_CHECK(c % (r * r) == 0, ErrorKind::Runtime, "pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of upscale_factor, but input.size(-3)=", c, " is not divisible by ", r * r);
  Shape lead(s.begin(), s.end() - 3);
  int64_t k = lead.size();
  Shape s6 = lead;
  for (int64_t v : {c / (r * r), r, r, h, w}) s6.push_back(v);
  Ints perm = iota_perm(k);
  for (int64_t v : {k, k + 3, k + 1, k + 4, k + 2}) perm.push_back(v);
  Shape out = lead;
  for (int64_t v : {c / (r * r), h * r, w * r}) out.push_back(v);
  return {b.reshape(b.transpose(b.reshape(x, s6), perm), out)};
}

Values lower_pixel_unshuffle(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  int64_t r = a[1].as_int();
  TPU_CHECK(x.rank() >= 3, ErrorKind::Runtime, "pixel_unshuffle expects input to have at least 3 dimensions, but got input with ", x.rank(), " dimension(s)");
  TPU_CHECK(r > 0, ErrorKind::Runtime, "pixel_unshuffle expects a positive downscale_factor, but got ", r);
  const Shape& s = x.shape();
  int64_t n = x.rank(), c = s[n - 3], h = s[n - 2], w = s[n - 1];
  TPU_CHECK(h % r == 0, ErrorKind::Runtime, "pixel_unshuffle expects height to be divisible by downscale_factor, but input.size(-2)=", h, " is not divisible by ", r);
  TPU_CHECK(w % r == 0, ErrorKind::Runtime, "pixel_unshuffle expects width to be divisible by downscale_factor, but input.size(-1)=", w, " is not divisible by ", r);
  Shape lead(s.begin(), s.end() - 3);
  int64_t k = lead.size();
  Shape s6 = lead;
  for (int64_t v : {c, h / r, r, w / r, r}) s6.push_back(v);
  Ints perm = iota_perm(k);
  for (int64_t v : {k, k + 2, k + 4, k + 1, k + 3}) perm.push_back(v);
  Shape out = lead;
  for (int64_t v : {c * r * r, h / r, w / r}) out.push_back(v);
  return {b.reshape(b.transpose(b.reshape(x, s6), perm), out)};
}

Values lower_channel_shuffle(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  int64_t g = a[1].as_int();
  TPU_CHECK(x.rank() > 2, ErrorKind::Runtime, "channel_shuffle expects input to have at least 3 dimensions, but got input with ", x.rank(), " dimension(s)");
  TPU_CHECK(g > 0, ErrorKind::Runtime, "Number of groups to divide channels in must be positive. Value of groups:", g);
  int64_t c = x.shape()[1];
  TPU_CHECK(c % g == 0, ErrorKind::Runtime, "Number of channels must be divisible by groups. Got ", c, " channels and ", g, " groups.");
  Shape s5 = {x.shape()[0], g, c / g};
  for (int64_t i = 2; i < x.rank(); ++i) s5.push_back(x.shape()[i]);
  Ints perm = iota_perm(s5.size());
  std::swap(perm[1], perm[2]);
  return {b.reshape(b.transpose(b.reshape(x, s5), perm), x.shape())};
}

// ---- glu, prelu

std::pair<Value, Value> halves(Builder& b, Value x, int64_t dim) {
  Ints start(x.rank(), 0), lim = x.shape(), st(x.rank(), 1);
  int64_t h = x.shape()[dim] / 2;
  lim[dim] = h;
  Value a = b.slice(x, start, lim, st);
  start[dim] = h;
  lim[dim] = 2 * h;
  return {a, b.slice(x, start, lim, st)};
}

Values lower_glu(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value x = args[0].as_tensor();
  TPU_CHECK(x.rank() > 0, ErrorKind::Runtime, "glu does not support scalars because halving size must be even");
  int64_t dim = wrap_dim(args[1].as_int(), x.rank());
  TPU_CHECK(x.shape()[dim] % 2 == 0, ErrorKind::Runtime, "Halving dimension must be even, but dimension ", dim, " is size ", x.shape()[dim]);
  check_dtype(hlo::is_float(x.dtype()), "glu", x.dtype());
  E t = x.dtype();
  auto [p, q] = halves(b, cast(b, x, opmath(t)), dim);
  return {cast(b, b.mul(p, b.logistic(q)), t)};
}

Values lower_glu_backward(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value g = args[0].as_tensor(), x = args[1].as_tensor();
  int64_t dim = wrap_dim(args[2].as_int(), x.rank());
  E t = x.dtype(), c = opmath(t);
  auto [p, q] = halves(b, cast(b, x, c), dim);
  Value gg = cast(b, g, c);
  Value s = b.logistic(q);
  Value ga = b.mul(gg, s);
  Value gb = b.mul(b.mul(b.mul(gg, p), s), b.sub(splat(b, 1, s), s));
  return {cast(b, b.concatenate({ga, gb}, dim), t)};
}

Values lower_prelu(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value x = args[0].as_tensor(), w = args[1].as_tensor();
  E t = promote(x.dtype(), w.dtype());
  Shape s = broadcast_shapes(x.shape(), w.shape());
  Value xv = broadcast_to(b, cast(b, x, t), s), wv = broadcast_to(b, cast(b, w, t), s);
  return {b.select(b.compare(xv, splat(b, 0, xv), Compare::GT), xv, b.mul(wv, xv))};
}

Values lower_prelu_backward(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value g = args[0].as_tensor(), x = args[1].as_tensor(), w = args[2].as_tensor();
  E t = promote(x.dtype(), w.dtype());
  Shape s = broadcast_shapes(broadcast_shapes(x.shape(), w.shape()), g.shape());
  Value xv = broadcast_to(b, cast(b, x, t), s), wv = broadcast_to(b, cast(b, w, t), s);
  Value gv = broadcast_to(b, cast(b, g, t), s);
  Value pos = b.compare(xv, splat(b, 0, xv), Compare::GT);
  return {b.select(pos, gv, b.mul(wv, gv)), b.select(pos, splat(b, 0, xv), b.mul(xv, gv))};
}

// ---- im2col / col2im

struct Patches {
  int64_t kh, kw, dh, dw, ph, pw, sh, sw;
};

Patches patches_of(const Args& a, size_t first) {
  const Ints &k = a[first].as_ints(), &d = a[first + 1].as_ints(), &p = a[first + 2].as_ints(),
             &s = a[first + 3].as_ints();
  TPU_CHECK(k.size() == 2 && d.size() == 2 && p.size() == 2 && s.size() == 2, ErrorKind::Runtime,
            "It is expected kernel_size, dilation, padding and stride to have 2 elements");
  Patches r{k[0], k[1], d[0], d[1], p[0], p[1], s[0], s[1]};
  TPU_CHECK(r.kh > 0 && r.kw > 0, ErrorKind::Runtime, "kernel size should be greater than zero, but got kernel_height: ", r.kh, " kernel_width: ", r.kw);
  TPU_CHECK(r.dh > 0 && r.dw > 0, ErrorKind::Runtime, "dilation should be greater than zero, but got dilation_height: ", r.dh, " dilation_width: ", r.dw);
  TPU_CHECK(r.sh > 0 && r.sw > 0, ErrorKind::Runtime, "stride should be greater than zero, but got stride_height: ", r.sh, " stride_width: ", r.sw);
  TPU_CHECK(r.ph >= 0 && r.pw >= 0, ErrorKind::Runtime, "padding should be non-negative, but got pad_height: ", r.ph, " pad_width: ", r.pw);
  return r;
}

Values lower_im2col(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  Patches p = patches_of(a, 1);
  bool batched = x.rank() == 4;
  check_dtype(x.dtype() == E::Bool || hlo::is_float(x.dtype()) || hlo::is_complex(x.dtype()), "im2col_out_cpu", x.dtype());
  TPU_CHECK(x.rank() == 3 || x.rank() == 4, ErrorKind::Runtime, "Expected 3D or 4D (batch mode) tensor for input with possibly 0 batch size and non-zero dimensions for input, but got: ", x.rank(), "D");
  if (!batched) x = b.reshape(x, {1, x.shape()[0], x.shape()[1], x.shape()[2]});
  int64_t n = x.shape()[0], c = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
  int64_t oh = (h + 2 * p.ph - (p.dh * (p.kh - 1) + 1)) / p.sh + 1;
  int64_t ow = (w + 2 * p.pw - (p.dw * (p.kw - 1) + 1)) / p.sw + 1;
  TPU_CHECK(oh >= 1 && ow >= 1, ErrorKind::Runtime, "Given input with spatial size (", h, ", ", w, "), kernel_size=(", p.kh, ", ", p.kw, "), dilation=(", p.dh, ", ", p.dw, "), padding=(", p.ph, ", ", p.pw, "), calculated shape of the array of sliding blocks as (", oh, ", ", ow, "), but its components must be at least one.");
  Value xp = b.pad(x, b.constant(0, x.dtype()), {0, 0, p.ph, p.pw}, {0, 0, p.ph, p.pw}, {0, 0, 0, 0});
  Values cols;
  for (int64_t i = 0; i < p.kh; ++i)
    for (int64_t j = 0; j < p.kw; ++j) {
      Value s = b.slice(xp, {0, 0, i * p.dh, j * p.dw},
                        {n, c, i * p.dh + (oh - 1) * p.sh + 1, j * p.dw + (ow - 1) * p.sw + 1}, {1, 1, p.sh, p.sw});
      cols.push_back(b.reshape(s, {n, c, 1, oh * ow}));
    }
  Value r = b.reshape(b.concatenate(cols, 2), {n, c * p.kh * p.kw, oh * ow});
  if (!batched) r = b.reshape(r, {c * p.kh * p.kw, oh * ow});
  return {r};
}

Values lower_col2im(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  const Ints& out = a[1].as_ints();
  Patches p = patches_of(a, 2);
  TPU_CHECK(out.size() == 2, ErrorKind::Runtime, "It is expected output_size equals to 2, but got size ", out.size());
  bool batched = x.rank() == 3;
  check_dtype(x.dtype() == E::Bool || hlo::is_float(x.dtype()) || hlo::is_complex(x.dtype()), "col2im_out_cpu", x.dtype());
  TPU_CHECK(x.rank() == 2 || x.rank() == 3, ErrorKind::Runtime, "Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero dimensions for input, but got: ", x.rank(), "D");
  if (!batched) x = b.reshape(x, {1, x.shape()[0], x.shape()[1]});
  int64_t n = x.shape()[0], ck = x.shape()[1], l = x.shape()[2];
  TPU_CHECK(ck % (p.kh * p.kw) == 0, ErrorKind::Runtime, "Expected size of input's dimension 1 to be divisible by the product of kernel_size, but got input.size(1)=", ck, " and kernel_size=(", p.kh, ", ", p.kw, ")");
  int64_t c = ck / (p.kh * p.kw), h = out[0], w = out[1];
  int64_t oh = (h + 2 * p.ph - (p.dh * (p.kh - 1) + 1)) / p.sh + 1;
  int64_t ow = (w + 2 * p.pw - (p.dw * (p.kw - 1) + 1)) / p.sw + 1;
  TPU_CHECK(oh * ow == l, ErrorKind::Runtime, "Given output_size=(", h, ", ", w, "), kernel_size=(", p.kh, ", ", p.kw, "), dilation=(", p.dh, ", ", p.dw, "), padding=(", p.ph, ", ", p.pw, "), stride=(", p.sh, ", ", p.sw, "), expected size of input's dimension 2 to match the calculated number of sliding blocks ", oh, " * ", ow, " = ", oh * ow, ", but got input.size(2)=", l, ".");
  E t = x.dtype(), acc = t == E::Bool ? E::Bool : opmath(t);
  Value cols = b.reshape(cast(b, x, acc), {n, c, p.kh, p.kw, oh, ow});
  int64_t hp = h + 2 * p.ph, wp = w + 2 * p.pw;
  Value sum = b.zeros(acc, {n, c, hp, wp});
  Value zero = b.constant(0, acc);
  for (int64_t i = 0; i < p.kh; ++i)
    for (int64_t j = 0; j < p.kw; ++j) {
      Value s = b.reshape(b.slice(cols, {0, 0, i, j, 0, 0}, {n, c, i + 1, j + 1, oh, ow}, {1, 1, 1, 1, 1, 1}), {n, c, oh, ow});
      int64_t lo_h = i * p.dh, lo_w = j * p.dw;
      int64_t hi_h = hp - lo_h - ((oh - 1) * p.sh + 1), hi_w = wp - lo_w - ((ow - 1) * p.sw + 1);
      Value padded = b.pad(s, zero, {0, 0, lo_h, lo_w}, {0, 0, hi_h, hi_w}, {0, 0, p.sh - 1, p.sw - 1});
      sum = acc == E::Bool ? b.or_(sum, padded) : b.add(sum, padded);
    }
  Value r = b.slice(sum, {0, 0, p.ph, p.pw}, {n, c, p.ph + h, p.pw + w}, {1, 1, 1, 1});
  r = cast(b, r, t);
  if (!batched) r = b.reshape(r, {c, h, w});
  return {r};
}

// ---- grid_sampler_2d, grid_sampler_3d

enum Interp { kBilinear = 0, kNearest = 1, kBicubic = 2 };
enum Padding { kZeros = 0, kBorder = 1, kReflection = 2 };

// The pixel coordinate of grid values `coord` along a dimension of `size`,
// and d(coordinate)/d(grid value), as PyTorch's grid_sampler_unnormalize.
std::pair<Value, Value> unnormalize(Builder& b, Value coord, int64_t size, bool align) {
  double scale = align ? double(size - 1) / 2 : double(size) / 2;
  Value x = align ? b.mul(b.div(b.add(coord, splat(b, 1, coord)), splat(b, 2, coord)), splat(b, double(size - 1), coord))
                  : b.div(b.sub(b.mul(b.add(coord, splat(b, 1, coord)), splat(b, double(size), coord)), splat(b, 1, coord)), splat(b, 2, coord));
  return {x, splat(b, scale, coord)};
}

// A pixel coordinate brought inside by the padding mode (border clips,
// reflection reflects then clips), and `grad` times its derivative, as
// PyTorch's compute_coordinates and its *_set_grad twins.
std::pair<Value, Value> pad_coordinate(Builder& b, Value x, Value grad, int64_t size, int padding, bool align) {
  auto clip = [&](Value in, Value g) {
    Value mx = splat(b, double(size - 1), in);
    Value inside = b.and_(b.compare(in, splat(b, 0, in), Compare::GT), b.compare(in, mx, Compare::LT));
    Value v = b.select(b.compare(in, splat(b, 0, in), Compare::LE), splat(b, 0, in), b.select(b.compare(in, mx, Compare::GE), mx, in));
    return std::make_pair(v, b.mul(g, b.select(inside, splat(b, 1, in), splat(b, 0, in))));
  };
  if (padding == kBorder) return clip(x, grad);
  if (padding == kReflection) {
    int64_t lo = align ? 0 : -1, hi = align ? 2 * (size - 1) : 2 * size - 1;
    if (lo == hi) return {splat(b, 0, x), splat(b, 0, x)};
    double mn = double(lo) / 2, span = double(hi - lo) / 2;
    Value in = b.sub(x, splat(b, mn, x));
    Value negative = b.compare(in, splat(b, 0, in), Compare::LT);
    in = b.abs(in);
    Value extra = b.rem(in, splat(b, span, in));
    Value flips = b.floor(b.div(in, splat(b, span, in)));
    Value even = b.compare(b.rem(flips, splat(b, 2, in)), splat(b, 0, in), Compare::EQ);
    Value v = b.select(even, b.add(extra, splat(b, mn, in)), b.add(b.sub(splat(b, span, in), extra), splat(b, mn, in)));
    Value sgn = b.select(negative, splat(b, -1, in), splat(b, 1, in));
    Value g = b.mul(grad, b.select(even, sgn, b.neg(sgn)));
    return clip(v, g);
  }
  return {x, grad};
}

// One input point a grid point reads: a corner of its cell (2^K of them,
// K = 2 or 3 spatial dimensions), its nearest point, or a bicubic tap.
struct Corner {
  Value index;           // (P, 1) i64 row of the flattened (N*spatial, C) input
  Value weight;          // (N, *out) weight where in bounds, else 0
  Value valid;           // (N, *out) bool: in bounds. An out-of-bounds tap (zeros padding) is
                         // skipped, as the CPU skips it: its clamped row may hold inf or NaN
  std::vector<Value> d;  // d(weight)/d(coordinate k) (bilinear, bicubic)
};

// Coordinate k of a grid point is its k-th last value: x (the input's last
// dimension), then y, then z.
struct Sampler {
  int64_t n = 0, c = 0, points = 0;  // points: N times the output's spatial size
  Shape size;                        // the input's spatial size along coordinate k
  Shape at;                          // (N, *out): the shape of a per-point value
  std::vector<Value> g, m;           // source coordinates and their gradients wrt the grid
  std::vector<Corner> corners;
};

Sampler make_sampler(Builder& b, const Shape& in_shape, Value grid, int interp, int padding, bool align) {
  Sampler s;
  int64_t k_dims = grid.shape().back(), rank = grid.rank();
  s.n = in_shape[0], s.c = in_shape[1];
  s.at = Shape(grid.shape().begin(), grid.shape().end() - 1);
  s.points = 1;
  for (int64_t v : s.at) s.points *= v;
  for (int64_t k = 0; k < k_dims; ++k) s.size.push_back(in_shape[in_shape.size() - 1 - k]);
  // Coordinates in the grid's type, as the CPU kernel computes them.
  E f = opmath(grid.dtype());
  for (int64_t k = 0; k < k_dims; ++k) {
    Ints lo(rank, 0), hi = grid.shape(), st(rank, 1);
    lo.back() = k, hi.back() = k + 1;
    auto [x, mx] = unnormalize(b, b.reshape(b.slice(grid, lo, hi, st), s.at), s.size[k], align);
    // Bicubic pads each of its 16 taps instead of the sampled point.
    if (interp != kBicubic) std::tie(x, mx) = pad_coordinate(b, x, mx, s.size[k], padding, align);
    s.g.push_back(cast(b, x, f)), s.m.push_back(cast(b, mx, f));
  }
  Value batch = b.iota({E::I64, s.at}, 0);
  int64_t volume = 1;
  for (int64_t v : s.size) volume *= v;
  auto corner = [&](const std::vector<Value>& point, Value wgt, std::vector<Value> d) {
    Value valid, idx = b.mul(batch, b.full(double(volume), E::I64, s.at));
    int64_t stride = 1;
    for (int64_t k = 0; k < k_dims; ++k) {
      Value ck = point[k], top = splat(b, double(s.size[k] - 1), ck);
      Value inside = b.and_(b.compare(ck, splat(b, 0, ck), Compare::GE), b.compare(ck, top, Compare::LE));
      valid = k == 0 ? inside : b.and_(valid, inside);
      Value ik = b.convert(b.clamp(splat(b, 0, ck), ck, top), E::I64);
      idx = b.add(idx, b.mul(ik, b.full(double(stride), E::I64, s.at)));
      stride *= s.size[k];
    }
    s.corners.push_back({b.reshape(idx, {s.points, 1}), b.select(valid, wgt, splat(b, 0, wgt)), valid, std::move(d)});
  };
  if (interp == kBicubic) {
    // Taps x0 - 1 .. x0 + 2 around x0 = floor(x), weighted by the cubic
    // convolution (A = -0.75) of t = x - x0; d(weight)/dt for the grid's
    // gradient. A padded tap's coordinate is truncated, as the CPU does.
    Value x0 = b.floor(s.g[0]), y0 = b.floor(s.g[1]);
    auto taps = [&](Value t, Value w[4], Value dw[4]) {
      const double A = -0.75;
      Value one = splat(b, 1, t), two = splat(b, 2, t);
      auto c1 = [&](Value v) {  // ((A + 2) v - (A + 3)) v^2 + 1
        return b.add(b.mul(b.sub(b.mul(splat(b, A + 2, v), v), splat(b, A + 3, v)), b.mul(v, v)), one);
      };
      auto c2 = [&](Value v) {  // ((A v - 5A) v + 8A) v - 4A
        return b.sub(b.mul(b.add(b.mul(b.sub(b.mul(splat(b, A, v), v), splat(b, 5 * A, v)), v), splat(b, 8 * A, v)), v), splat(b, 4 * A, v));
      };
      auto d1 = [&](Value v) {  // 3 (A + 2) v^2 - 2 (A + 3) v
        return b.mul(b.sub(b.mul(splat(b, 3 * (A + 2), v), v), splat(b, 2 * (A + 3), v)), v);
      };
      auto d2 = [&](Value v) {  // 3 A v^2 - 10 A v + 8 A
        return b.add(b.mul(b.sub(b.mul(splat(b, 3 * A, v), v), splat(b, 10 * A, v)), v), splat(b, 8 * A, v));
      };
      Value u = b.sub(one, t);
      w[0] = c2(b.add(t, one)), w[1] = c1(t), w[2] = c1(u), w[3] = c2(b.add(u, one));
      dw[0] = d2(b.add(t, one)), dw[1] = d1(t), dw[2] = b.neg(d1(u)), dw[3] = b.neg(d2(b.sub(two, t)));
    };
    Value wx[4], dwx[4], wy[4], dwy[4];
    taps(b.sub(s.g[0], x0), wx, dwx);
    taps(b.sub(s.g[1], y0), wy, dwy);
    Value unit = splat(b, 1, x0);
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) {
        Value px = b.add(x0, splat(b, double(j - 1), x0)), py = b.add(y0, splat(b, double(i - 1), y0));
        px = pad_coordinate(b, px, unit, s.size[0], padding, align).first;
        py = pad_coordinate(b, py, unit, s.size[1], padding, align).first;
        corner({b.floor(px), b.floor(py)}, b.mul(wx[j], wy[i]), {b.mul(dwx[j], wy[i]), b.mul(wx[j], dwy[i])});
      }
    return s;
  }
  if (interp == kNearest) {
    std::vector<Value> point, zero;
    for (const Value& g : s.g) point.push_back(b.round_nearest_even(g)), zero.push_back(splat(b, 0, g));
    corner(point, splat(b, 1, s.g[0]), zero);
    return s;
  }
  // Corner `mask` takes x0 + 1 along coordinate k where bit k is set, in the
  // CPU's order (nw, ne, sw, se; then the same a layer deeper). Its weight is
  // the product of the distances to the opposite side along each coordinate.
  std::vector<Value> lo, hi, to_lo, to_hi;
  for (const Value& g : s.g) {
    lo.push_back(b.floor(g));
    hi.push_back(b.add(lo.back(), splat(b, 1, g)));
    to_lo.push_back(b.sub(g, lo.back()));
    to_hi.push_back(b.sub(hi.back(), g));
  }
  for (int64_t mask = 0; mask < (int64_t{1} << k_dims); ++mask) {
    std::vector<Value> point, factor;
    for (int64_t k = 0; k < k_dims; ++k) {
      bool up = (mask >> k) & 1;
      point.push_back(up ? hi[k] : lo[k]);
      factor.push_back(up ? to_lo[k] : to_hi[k]);
    }
    auto product = [&](int64_t skip) {
      Value r;
      for (int64_t k = 0; k < k_dims; ++k)
        if (k != skip) r = r.valid() ? b.mul(r, factor[k]) : factor[k];
      return r;
    };
    std::vector<Value> d;
    for (int64_t k = 0; k < k_dims; ++k) d.push_back((mask >> k) & 1 ? product(k) : b.neg(product(k)));
    corner(point, product(-1), d);
  }
  return s;
}

Value gather_rows(Builder& b, Value flat, Value idx) {
  Builder::GatherDims d;
  d.offset_dims = {1};
  d.collapsed_slice_dims = {0};
  d.start_index_map = {0};
  d.index_vector_dim = 1;
  int64_t c = flat.shape()[1];
  return b.gather(flat, idx, d, {1, c}, {idx.shape()[0], c});
}

Value scatter_rows(Builder& b, Value upd, Value idx, int64_t rows) {
  Builder::ScatterDims d;
  d.update_window_dims = {1};
  d.inserted_window_dims = {0};
  d.scatter_dims_to_operand_dims = {0};
  d.index_vector_dim = 1;
  return b.scatter(b.zeros(upd.dtype(), {rows, upd.shape()[1]}), idx, upd, d,
                   [](Builder& r, const Values& v) { return Values{r.add(v[0], v[1])}; });
}

// The CPU's checks; `spatial` is 2 (grid_sampler_2d) or 3.
void check_grid(const Value& input, const Value& grid, int64_t interp, int64_t spatial) {
  int64_t rank = spatial + 2;
  TPU_CHECK(input.rank() == rank && grid.rank() == rank, ErrorKind::Runtime, "grid_sampler(): expected ", rank, "D input and grid with same number of dimensions, but got input with sizes ", hlo::shape_str(input.shape()), " and grid with sizes ", hlo::shape_str(grid.shape()));
  TPU_CHECK(spatial == 2 || interp != kBicubic, ErrorKind::Runtime, "grid_sampler(): bicubic interpolation only supports 4D input");
  TPU_CHECK(input.shape()[0] == grid.shape()[0], ErrorKind::Runtime, "grid_sampler(): expected grid and input to have same batch size, but got input with sizes ", hlo::shape_str(input.shape()), " and grid with sizes ", hlo::shape_str(grid.shape()));
  TPU_CHECK(grid.shape().back() == spatial, ErrorKind::Runtime, "grid_sampler(): expected grid to have size ", spatial, " in last dimension, but got grid with sizes ", hlo::shape_str(grid.shape()));
  for (int64_t d = 2; d < rank; ++d)
    TPU_CHECK(input.shape()[d] > 0, ErrorKind::Runtime, "grid_sampler(): expected input to have non-empty spatial dimensions, but input has sizes ", hlo::shape_str(input.shape()), " with dimension ", d, " being empty");
  check_dtype(hlo::is_float(input.dtype()), spatial == 2 ? "grid_sampler_2d_cpu" : "grid_sampler_3d_cpu", input.dtype());
}

// (N, C, *spatial) <-> (N, *spatial, C): channels last, and back.
Ints channels_last(int64_t rank) {
  Ints p{0};
  for (int64_t d = 2; d < rank; ++d) p.push_back(d);
  p.push_back(1);
  return p;
}
Ints channels_first(int64_t rank) {
  Ints p{0, rank - 1};
  for (int64_t d = 1; d < rank - 1; ++d) p.push_back(d);
  return p;
}

// (N, C, *spatial) -> (N * spatial, C)
Value rows_of(Builder& b, Value x) {
  int64_t rows = x.type.numel() / x.shape()[1];
  return b.reshape(b.transpose(x, channels_last(x.rank())), {rows, x.shape()[1]});
}

// (points, C) -> (N, C, *out)
Value unrows(Builder& b, Value x, Shape at) {
  at.push_back(x.shape()[1]);
  return b.transpose(b.reshape(x, at), channels_first(int64_t(at.size())));
}

template <int64_t Spatial>
Values lower_grid_sampler(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value input = a[0].as_tensor(), grid = a[1].as_tensor();
  int interp = int(a[2].as_int()), padding = int(a[3].as_int());
  bool align = a[4].as_bool();
  check_grid(input, grid, interp, Spatial);
  E t = input.dtype(), acc = opmath(t);
  Sampler s = make_sampler(b, input.shape(), grid, interp, padding, align);
  Value flat = rows_of(b, cast(b, input, acc));
  int64_t k = s.points;
  Value out = b.zeros(acc, {k, s.c});
  for (const Corner& c : s.corners) {
    Value wv = b.broadcast_in_dim(b.reshape(c.weight, {k}), {k, s.c}, {0});
    out = b.add(out, keep_rows(b, b.reshape(c.valid, {k}), b.mul(gather_rows(b, flat, c.index), wv)));
  }
  return {cast(b, unrows(b, out, s.at), t)};
}

// (grad_output, input, grid, interpolation, padding, align_corners, output_mask)
template <int64_t Spatial>
Values lower_grid_sampler_backward(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value go = a[0].as_tensor(), input = a[1].as_tensor(), grid = a[2].as_tensor();
  int interp = int(a[3].as_int()), padding = int(a[4].as_int());
  bool align = a[5].as_bool();
  check_grid(input, grid, interp, Spatial);
  E t = input.dtype(), acc = opmath(t);
  Sampler s = make_sampler(b, input.shape(), grid, interp, padding, align);
  int64_t k = s.points, rows = input.type.numel() / s.c;
  Value g = rows_of(b, cast(b, go, acc));
  Value flat = rows_of(b, cast(b, input, acc));
  Value gin = b.zeros(acc, {rows, s.c});
  std::vector<Value> gc(Spatial, b.zeros(acc, {k}));
  for (const Corner& c : s.corners) {
    Value wv = b.broadcast_in_dim(b.reshape(c.weight, {k}), {k, s.c}, {0});
    Value inside = b.reshape(c.valid, {k});
    gin = b.add(gin, scatter_rows(b, keep_rows(b, inside, b.mul(g, wv)), c.index, rows));
    if (interp != kNearest) {
      Value vg = keep_rows(b, inside, b.reduce_sum(b.mul(gather_rows(b, flat, c.index), g), {1}));  // (k)
      for (int64_t j = 0; j < Spatial; ++j) gc[j] = b.add(gc[j], b.mul(vg, b.reshape(c.d[j], {k})));
    }
  }
  Shape in_at{input.shape()[0]};
  for (int64_t d = 2; d < input.rank(); ++d) in_at.push_back(input.shape()[d]);
  Shape one = s.at;
  one.push_back(1);
  Values parts;
  for (int64_t j = 0; j < Spatial; ++j) parts.push_back(b.reshape(b.mul(gc[j], b.reshape(s.m[j], {k})), one));
  return {cast(b, unrows(b, gin, in_at), t), cast(b, b.concatenate(parts, Spatial + 1), grid.dtype())};
}

// ---- upsample_bicubic2d

template <typename T>
T cubic1(T x, T A) { return ((A + 2) * x - (A + 3)) * x * x + 1; }
template <typename T>
T cubic2(T x, T A) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; }

struct Taps {
  Ints idx[4];
  std::vector<double> w[4];
};

// The source coordinate scale * (o + 0.5) - 0.5 is rounded once (fma) in
// the forward, as the CPU's vectorized kernel compiles it, and twice in the
// backward, as its plain kernel does: the row weights then match the CPU's
// to the bit, where an ulp of the coordinate moves the result by 1e-5..4e-4.
template <typename T>
Taps cubic_taps(int64_t in, int64_t out, const std::optional<double>& scale, bool align, bool fused) {
  T s;
  if (align) s = out > 1 ? T(in - 1) / T(out - 1) : T(0);
  else s = scale && *scale > 0 ? T(1.0 / *scale) : T(in) / T(out);
  Taps taps;
  for (int64_t o = 0; o < out; ++o) {
    T real = align ? s * T(o) : fused ? std::fma(s, T(o) + T(0.5), T(-0.5)) : s * (T(o) + T(0.5)) - T(0.5);
    int64_t i0 = std::min(int64_t(std::floor(real)), in - 1);
    T t = std::min(std::max(real - T(i0), T(0)), T(1));
    T A = T(-0.75);
    T c[4] = {cubic2<T>(t + T(1), A), cubic1<T>(t, A), cubic1<T>(T(1) - t, A), cubic2<T>(T(2) - t, A)};
    for (int j = 0; j < 4; ++j) {
      taps.idx[j].push_back(std::min(std::max(i0 - 1 + j, int64_t(0)), in - 1));
      taps.w[j].push_back(double(c[j]));
    }
  }
  return taps;
}

Taps taps_of(E acc, int64_t in, int64_t out, const std::optional<double>& scale, bool align, bool fused) {
  return acc == E::F64 ? cubic_taps<double>(in, out, scale, align, fused)
                       : cubic_taps<float>(in, out, scale, align, fused);
}

std::optional<double> opt_float(const Arg& a) {
  if (a.is_none()) return std::nullopt;
  return a.as_float();
}

Values lower_bicubic(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  const Ints& out = a[1].as_ints();
  bool align = a[2].as_bool();
  TPU_CHECK(x.rank() == 4, ErrorKind::Runtime, "Expected 4D input tensor for upsample_bicubic2d, but got ", x.rank(), "D");
  TPU_CHECK(out.size() == 2, ErrorKind::Runtime, "It is expected output_size equals to 2, but got size ", out.size());
  TPU_CHECK(x.shape()[2] > 0 && x.shape()[3] > 0 && out[0] > 0 && out[1] > 0, ErrorKind::Runtime,
            "Input and output sizes should be greater than 0, but got input (H: ", x.shape()[2], ", W: ",
            x.shape()[3], ") output (H: ", out[0], ", W: ", out[1], ")");
  check_dtype(hlo::is_float(x.dtype()), "upsample_bicubic2d_out_frame", x.dtype());
  E t = x.dtype(), acc = opmath(t);
  x = cast(b, x, acc);
  std::optional<double> scales[2] = {opt_float(a[3]), opt_float(a[4])};
  for (int d = 1; d >= 0; --d) {
    int64_t dim = 2 + d;
    Taps tp = taps_of(acc, x.shape()[dim], out[d], scales[d], align, /*fused=*/true);
    Value sum;
    for (int j = 0; j < 4; ++j) {
      Value v = take(b, x, dim, tp.idx[j]);
      Value w = b.broadcast_in_dim(constant_vector(b, tp.w[j], acc), v.shape(), {dim});
      sum = j == 0 ? b.mul(v, w) : b.add(sum, b.mul(v, w));
    }
    x = sum;
  }
  return {cast(b, x, t)};
}

Values lower_bicubic_backward(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value g = a[0].as_tensor();
  const Ints& out = a[1].as_ints();
  const Ints& in = a[2].as_ints();
  bool align = a[3].as_bool();
  TPU_CHECK(in.size() == 4 && out.size() == 2, ErrorKind::Runtime, "upsample_bicubic2d_backward: bad output_size or input_size");
  E t = g.dtype(), acc = opmath(t);
  g = cast(b, g, acc);
  std::optional<double> scales[2] = {opt_float(a[4]), opt_float(a[5])};
  for (int d = 0; d < 2; ++d) {
    int64_t dim = 2 + d;
    Taps tp = taps_of(acc, in[dim], out[d], scales[d], align, /*fused=*/false);
    Value sum;
    for (int j = 0; j < 4; ++j) {
      Value w = b.broadcast_in_dim(constant_vector(b, tp.w[j], acc), g.shape(), {dim});
      Value v = take_grad(b, b.mul(g, w), dim, tp.idx[j], in[dim]);
      sum = j == 0 ? v : b.add(sum, v);
    }
    g = sum;
  }
  return {cast(b, g, t)};
}

}  // namespace

TPU_LOWERING("aten::_prelu_kernel", lower_prelu);
TPU_LOWERING("aten::_prelu_kernel_backward", lower_prelu_backward);
TPU_LOWERING("aten::channel_shuffle", lower_channel_shuffle);
TPU_LOWERING("aten::col2im", lower_col2im);
TPU_LOWERING("aten::glu", lower_glu);
TPU_LOWERING("aten::glu_backward", lower_glu_backward);
TPU_LOWERING("aten::grid_sampler_2d", lower_grid_sampler<2>);
TPU_LOWERING("aten::grid_sampler_2d_backward", lower_grid_sampler_backward<2>);
TPU_LOWERING("aten::grid_sampler_3d", lower_grid_sampler<3>);
TPU_LOWERING("aten::grid_sampler_3d_backward", lower_grid_sampler_backward<3>);
TPU_LOWERING("aten::im2col", lower_im2col);
TPU_LOWERING("aten::pixel_shuffle", lower_pixel_shuffle);
TPU_LOWERING("aten::pixel_unshuffle", lower_pixel_unshuffle);
TPU_LOWERING("aten::upsample_bicubic2d", lower_bicubic);
TPU_LOWERING("aten::upsample_bicubic2d_backward", lower_bicubic_backward);

}  // namespace torch_tpu::lowering
