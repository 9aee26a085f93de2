// Pooling. Max and average pools are one stablehlo.reduce_window over the
// trailing spatial dimensions; max pooling carries each element's index
// within its plane alongside its value, so values and PyTorch's indices come
// from the same reduction. Adaptive pools have windows of varying size and
// position, so they are built from per-dimension maps fixed at build time: a
// 0/1 matrix (average: a dot_general per dimension) or a gather of each
// window's rows (max). Fractional max pools gather windows whose starts are
// computed on the device from their random samples. Backward passes
// scatter-add at the argmax indices (max) or spread each window's share back
// with a dilated window sum (avg).
#include <algorithm>
#include <limits>
#include <string>

#include "lowering/common.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

using hlo::Builder;
using hlo::Compare;
using E = ElementType;
using Ints = std::vector<int64_t>;
using Pads = std::vector<std::pair<int64_t, int64_t>>;

E acc_type(E t) { return t == E::F16 || t == E::BF16 ? E::F32 : t; }

std::string sizes_str(const Shape& s, const char* sep = ", ") {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) out += (i ? sep : "") + std::to_string(s[i]);
  return out;
}

// The geometry of a pool over the last `n` dimensions, computed as
// PyTorch's pooling_output_shape does (ceil_mode drops a last window that
// would start in the right padding).
struct Pool {
  size_t n = 0;
  Ints kernel, stride, pad, dilation, in, out;
  // Low/high padding that makes reduce_window produce exactly `out`. A
  // negative high (floor mode leaving trailing rows unread) is clamped to 0:
  // the window count then still floors to `out`.
  Pads window_pads(int64_t rank) const {
    Pads p(rank - n, {0, 0});
    for (size_t i = 0; i < n; ++i) {
      int64_t high = (out[i] - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1 - in[i] - pad[i];
      p.push_back({pad[i], std::max<int64_t>(high, 0)});
    }
    return p;
  }
  // Window attributes over the full rank: the leading dims are not pooled.
  Ints full(const Ints& v, int64_t rank) const {
    Ints r(rank - n, 1);
    r.insert(r.end(), v.begin(), v.end());
    return r;
  }
};

Ints expand(const Arg& a, size_t n, Ints fallback, const char* op, const char* what) {
  Ints v = a.is_none() ? Ints{} : a.as_ints();
  if (v.empty()) v = fallback;
  if (v.size() == 1) v = Ints(n, v[0]);
  TPU_CHECK(v.size() == n, ErrorKind::Runtime, op, ": ", what, " must either be a single int, or a tuple of ", n,
            " ints");
  return v;
}

// Checks and geometry of max_poolNd / avg_poolNd (avg: no dilation).
Pool pool_geometry(const Value& x, size_t n, const Args& a, bool has_dilation, const char* op) {
  Pool p;
  p.n = n;
  TPU_CHECK(x.rank() == int64_t(n) + 1 || x.rank() == int64_t(n) + 2, ErrorKind::Runtime,
            "non-empty ", n + 1, "D or ", n + 2, "D (batch mode) tensor expected for input");
  p.kernel = expand(a[1], n, {}, op, "kernel_size");
  p.stride = expand(a[2], n, p.kernel, op, "stride");
  p.pad = expand(a[3], n, {0}, op, "padding");
  p.dilation = has_dilation ? expand(a[4], n, {1}, op, "dilation") : Ints(n, 1);
  bool ceil = a[has_dilation ? 5 : 4].as_bool();
  for (size_t i = 0; i < n; ++i) {
    TPU_CHECK(p.stride[i] != 0, ErrorKind::Runtime, "stride should not be zero");
    TPU_CHECK(p.stride[i] > 0, ErrorKind::Runtime, "stride should be greater than zero, but got ",
              sizes_str(p.stride, " "));
    TPU_CHECK(p.kernel[i] > 0, ErrorKind::Runtime, "kernel size should be greater than zero");
    TPU_CHECK(p.dilation[i] > 0, ErrorKind::Runtime, "dilation should be greater than zero, but got ",
              sizes_str(p.dilation, " "));
    TPU_CHECK(p.pad[i] >= 0 && p.pad[i] <= (p.dilation[i] * (p.kernel[i] - 1) + 1) / 2,
              ErrorKind::Runtime, "pad should be at most half of effective kernel size, but got pad=",
              p.pad[i], ", kernel_size=", p.kernel[i], " and dilation=", p.dilation[i]);
    int64_t in = x.shape()[x.rank() - n + i];
    int64_t span = in + 2 * p.pad[i] - p.dilation[i] * (p.kernel[i] - 1) - 1 + (ceil ? p.stride[i] - 1 : 0);
    int64_t out = (span >= 0 ? span / p.stride[i] : -((-span + p.stride[i] - 1) / p.stride[i])) + 1;
    if (ceil && (out - 1) * p.stride[i] >= in + p.pad[i]) --out;
    p.in.push_back(in);
    p.out.push_back(out);
  }
  bool ok = std::all_of(p.out.begin(), p.out.end(), [](int64_t o) { return o >= 1; });
  Shape in_shape(x.shape().end() - n - 1, x.shape().end()), out_shape = p.out;
  out_shape.insert(out_shape.begin(), in_shape[0]);
  TPU_CHECK(ok, ErrorKind::Runtime, "Given input size: (", sizes_str(in_shape, "x"),
            "). Calculated output size: (", sizes_str(out_shape, "x"), "). Output size is too small");
  return p;
}

// Each element's flattened index within its plane (the last n dims), as
// PyTorch reports max-pool indices.
Value plane_indices(Builder& b, const Shape& shape, size_t n) {
  Shape plane(shape.end() - n, shape.end());
  int64_t count = 1;
  for (int64_t d : plane) count *= d;
  Value flat = b.reshape(b.iota(hlo::TensorType{E::I64, {count}}, 0), plane);
  Ints dims;
  for (size_t i = 0; i < n; ++i) dims.push_back(shape.size() - n + i);
  return b.broadcast_in_dim(flat, shape, dims);
}

// The (value, index) combiner of max pooling, matching PyTorch's scan
// `if (val > max || isnan(val))` in index order: the first of equal maxima,
// the last NaN. Written symmetric so any reduction order gives that answer.
std::vector<Value> argmax(Builder& r, const std::vector<Value>& a) {
  Value av = a[0], ai = a[1], bv = a[2], bi = a[3];
  Value earlier = r.compare(bi, ai, Compare::LT);
  Value take_b = r.or_(r.compare(bv, av, Compare::GT),
                       r.and_(r.compare(bv, av, Compare::EQ), earlier));
  if (hlo::is_float(av.dtype())) {
    Value a_nan = r.compare(av, av, Compare::NE), b_nan = r.compare(bv, bv, Compare::NE);
    Value later_nan = r.and_(b_nan, r.or_(r.not_(a_nan), r.not_(earlier)));
    take_b = r.or_(later_nan, r.and_(r.not_(a_nan), take_b));
  }
  return {r.select(take_b, bv, av), r.select(take_b, bi, ai)};
}

// Padding elements take the init value: the lowest value with an index that
// loses every tie, so a window never picks padding.
std::vector<Value> max_pool(Builder& b, Value x, const Pool& p) {
  int64_t r = x.rank();
  Value idx = plane_indices(b, x.shape(), p.n);
  return b.reduce_window({x, idx},
                         {b.min_value(x.dtype()),
                          b.constant_int(std::numeric_limits<int64_t>::max(), E::I64)},
                         p.full(p.kernel, r), p.full(p.stride, r), {}, p.full(p.dilation, r),
                         p.window_pads(r), argmax);
}

void check_max_dtype(const Value& x, const char* op) {
  TPU_CHECK(x.dtype() != E::Bool && !hlo::is_complex(x.dtype()), ErrorKind::NotImplemented, "\"",
            op, "\" not implemented for '", scalar_type_name(x.dtype()), "'");
}

template <size_t n>
std::vector<Value> lower_max_pool_with_indices(Context& ctx, const Args& a) {
  Value x = a[0].as_tensor();
  const char* op = n == 2 ? "max_pool2d" : "max_pool3d";
  check_max_dtype(x, op);
  return max_pool(ctx.b, x, pool_geometry(x, n, a, true, op));
}

// grad_input of a max pool: each output's gradient added at its argmax.
// Planes are flattened into one dimension so that one scatter serves them all.
Value scatter_at_indices(Builder& b, Value g, Value indices, const Shape& in_shape, size_t n) {
  int64_t plane = 1, planes = 1, outs = 1;
  for (size_t i = 0; i < in_shape.size(); ++i) (i + n < in_shape.size() ? planes : plane) *= in_shape[i];
  for (size_t i = g.rank() - n; i < size_t(g.rank()); ++i) outs *= g.shape()[i];
  Shape grid = {planes, outs};
  Value base = b.mul(b.iota(hlo::TensorType{E::I64, grid}, 0), b.full(double(plane), E::I64, grid));
  Value flat = b.add(base, b.reshape(cast(b, indices, E::I64), grid));
  E acc = acc_type(g.dtype());
  Builder::ScatterDims dims;
  dims.inserted_window_dims = {0};
  dims.scatter_dims_to_operand_dims = {0};
  dims.index_vector_dim = 1;
  Value sum = b.scatter(b.zeros(acc, {planes * plane}), b.reshape(flat, {planes * outs, 1}),
                        b.reshape(cast(b, g, acc), {planes * outs}), dims,
                        [](Builder& r, const std::vector<Value>& v) {
                          return std::vector<Value>{r.add(v[0], v[1])};
                        });
  return cast(b, b.reshape(sum, in_shape), g.dtype());
}

template <size_t n>
std::vector<Value> lower_max_pool_with_indices_backward(Context& ctx, const Args& a) {
  Value g = a[0].as_tensor(), x = a[1].as_tensor(), idx = a[7].as_tensor();
  return {scatter_at_indices(ctx.b, g, idx, x.shape(), n)};
}

// ---- average pooling

// How many elements each output averages over, per spatial dimension: the
// window clipped to the padded input (count_include_pad) or to the input.
std::vector<double> window_counts(const Pool& p, size_t i, bool include_pad) {
  std::vector<double> c;
  for (int64_t o = 0; o < p.out[i]; ++o) {
    int64_t start = o * p.stride[i] - p.pad[i];
    int64_t end = std::min(start + p.kernel[i], p.in[i] + p.pad[i]);
    if (!include_pad) {
      start = std::max<int64_t>(start, 0);
      end = std::min(end, p.in[i]);
    }
    c.push_back(double(end - start));
  }
  return c;
}

// The divisor of each output (broadcast to `shape`), in type t.
Value divisor(Builder& b, const Pool& p, const Shape& shape, bool include_pad,
              std::optional<int64_t> override_, E t) {
  if (override_) return b.full(double(*override_), t, shape);
  Value d;
  for (size_t i = 0; i < p.n; ++i) {
    int64_t dim = shape.size() - p.n + i;
    Value c = b.broadcast_in_dim(constant_vector(b, window_counts(p, i, include_pad), t), shape, {dim});
    d = d.valid() ? b.mul(d, c) : c;
  }
  return d;
}

struct AvgArgs {
  Pool pool;
  bool include_pad;
  std::optional<int64_t> override_;
};

// a = (self, kernel_size, stride, padding, ceil_mode, count_include_pad,
// divisor_override), the forward's schema.
AvgArgs avg_args(const Value& x, size_t n, const Args& a) {
  AvgArgs r{pool_geometry(x, n, a, false, n == 2 ? "avg_pool2d" : "avg_pool3d"), a[5].as_bool(),
            std::nullopt};
  if (!a[6].is_none()) {
    r.override_ = a[6].as_int();
    TPU_CHECK(*r.override_ != 0, ErrorKind::Runtime, "divisor must be not zero");
  }
  return r;
}

template <size_t n>
std::vector<Value> lower_avg_pool(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  TPU_CHECK(x.dtype() != E::Bool && !hlo::is_complex(x.dtype()), ErrorKind::NotImplemented,
            "\"avg_pool", n, "d\" not implemented for '", scalar_type_name(x.dtype()), "'");
  AvgArgs av = avg_args(x, n, a);
  const Pool& p = av.pool;
  int64_t r = x.rank();
  E acc = acc_type(x.dtype());
  Value sum = b.reduce_window({cast(b, x, acc)}, {b.constant(0, acc)}, p.full(p.kernel, r),
                              p.full(p.stride, r), {}, {}, p.window_pads(r),
                              [](Builder& rb, const std::vector<Value>& v) {
                                return std::vector<Value>{rb.add(v[0], v[1])};
                              })[0];
  Value d = divisor(b, p, sum.shape(), av.include_pad, av.override_, acc);
  return {cast(b, b.div(sum, d), x.dtype())};
}

// Each input element receives the divided gradient of every window that
// covers it: a window sum over grad_output dilated by the stride.
template <size_t n>
std::vector<Value> lower_avg_pool_backward(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value g = a[0].as_tensor(), x = a[1].as_tensor();
  Args shifted(a.begin() + 1, a.end());
  AvgArgs av = avg_args(x, n, shifted);
  const Pool& p = av.pool;
  int64_t r = x.rank();
  E acc = acc_type(g.dtype());
  Value share = b.div(cast(b, g, acc), divisor(b, p, g.shape(), av.include_pad, av.override_, acc));
  Pads pads(r - n, {0, 0});
  for (size_t i = 0; i < n; ++i)
    pads.push_back({p.kernel[i] - 1 - p.pad[i], p.in[i] + p.pad[i] - (p.out[i] - 1) * p.stride[i] - 1});
  Value gx = b.reduce_window({share}, {b.constant(0, acc)}, p.full(p.kernel, r), {},
                             p.full(p.stride, r), {}, pads,
                             [](Builder& rb, const std::vector<Value>& v) {
                               return std::vector<Value>{rb.add(v[0], v[1])};
                             })[0];
  return {cast(b, gx, g.dtype())};
}

// ---- adaptive pooling: window o along a dimension of `in` covers
// [floor(o*in/out), ceil((o+1)*in/out)).

int64_t window_start(int64_t o, int64_t in, int64_t out) { return (o * in) / out; }
int64_t window_end(int64_t o, int64_t in, int64_t out) { return ((o + 1) * in + out - 1) / out; }

Ints adaptive_sizes(const Value& x, const Arg& size_arg, size_t n, const char* op) {
  TPU_CHECK(x.rank() == int64_t(n) + 1 || x.rank() == int64_t(n) + 2, ErrorKind::Runtime, op,
            "(): Expected ", n + 1, "D or ", n + 2, "D tensor, but got ",
            "[" + sizes_str(x.shape()) + "]");
  Ints out = size_arg.as_ints();
  if (out.size() == 1) out = Ints(n, out[0]);
  TPU_CHECK(out.size() == n, ErrorKind::Runtime, op, ": output_size must be ", n);
  for (size_t i = 1; i < size_t(x.rank()); ++i)
    TPU_CHECK(x.shape()[i] > 0, ErrorKind::Runtime, op,
              "(): Expected input to have non-zero size for non-batch dimensions, but input has "
              "sizes [",
              sizes_str(x.shape()), "] with dimension ", i, " being empty");
  return out;
}

// Applies a [out, in] (or, transposed, [in, out]) matrix along each of the
// last n dimensions. Each dot_general moves the contracted dimension's
// result to the end, so after n of them the order is restored.
Value along_spatial(Builder& b, Value x, size_t n, const std::vector<Value>& matrices, bool transposed) {
  hlo::ExactProducts exact(b);  // an average, not a user's matmul
  for (size_t i = 0; i < n; ++i)
    x = b.dot_general(x, matrices[i], {}, {}, {x.rank() - int64_t(n)}, {transposed ? 0 : 1}, x.dtype());
  return x;
}

std::vector<Value> adaptive_matrices(Builder& b, const Ints& in, const Ints& out, E t) {
  std::vector<Value> ms;
  for (size_t i = 0; i < in.size(); ++i) {
    std::vector<double> m(out[i] * in[i], 0.0);
    for (int64_t o = 0; o < out[i]; ++o)
      for (int64_t j = window_start(o, in[i], out[i]); j < window_end(o, in[i], out[i]); ++j)
        m[o * in[i] + j] = 1;
    ms.push_back(b.reshape(constant_vector(b, m, t), {out[i], in[i]}));
  }
  return ms;
}

Value adaptive_counts(Builder& b, const Ints& in, const Ints& out, const Shape& shape, E t) {
  Value d;
  size_t n = in.size();
  for (size_t i = 0; i < n; ++i) {
    std::vector<double> c;
    for (int64_t o = 0; o < out[i]; ++o)
      c.push_back(double(window_end(o, in[i], out[i]) - window_start(o, in[i], out[i])));
    Value v = b.broadcast_in_dim(constant_vector(b, c, t), shape, {int64_t(shape.size() - n + i)});
    d = d.valid() ? b.mul(d, v) : v;
  }
  return d;
}

Ints spatial(const Shape& s, size_t n) { return Ints(s.end() - n, s.end()); }

template <size_t n>
std::vector<Value> lower_adaptive_avg_pool(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  const char* op = n == 2 ? "adaptive_avg_pool2d" : "adaptive_avg_pool3d";
  Ints out = adaptive_sizes(x, a[1], n, op);
  TPU_CHECK(hlo::is_float(x.dtype()), ErrorKind::NotImplemented, "\"", op,
            "\" not implemented for '", scalar_type_name(x.dtype()), "'");
  E acc = acc_type(x.dtype());
  Ints in = spatial(x.shape(), n);
  Value sum = along_spatial(b, cast(b, x, acc), n, adaptive_matrices(b, in, out, acc), false);
  return {cast(b, b.div(sum, adaptive_counts(b, in, out, sum.shape(), acc)), x.dtype())};
}

template <size_t n>
std::vector<Value> lower_adaptive_avg_pool_backward(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value g = a[0].as_tensor(), x = a[1].as_tensor();
  E acc = acc_type(g.dtype());
  Ints in = spatial(x.shape(), n), out = spatial(g.shape(), n);
  Value share = b.div(cast(b, g, acc), adaptive_counts(b, in, out, g.shape(), acc));
  return {cast(b, along_spatial(b, share, n, adaptive_matrices(b, in, out, acc), true), g.dtype())};
}

// Adaptive max pooling gathers every window's rows into an [out, K] grid per
// dimension (K the widest window; narrower windows repeat their last row,
// which changes neither the max nor the first index of it), then reduces the
// K dimensions with the max pool combiner.
template <size_t n>
std::vector<Value> lower_adaptive_max_pool(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  const char* op = n == 2 ? "adaptive_max_pool2d" : "adaptive_max_pool3d";
  Ints out = adaptive_sizes(x, a[1], n, op);
  TPU_CHECK(hlo::is_float(x.dtype()), ErrorKind::NotImplemented, "\"", op,
            "\" not implemented for '", scalar_type_name(x.dtype()), "'");
  Ints in = spatial(x.shape(), n);
  int64_t lead = x.rank() - int64_t(n);
  Value values = x;
  Shape grid;
  std::vector<Ints> rows(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t k = 0;
    for (int64_t o = 0; o < out[i]; ++o)
      k = std::max(k, window_end(o, in[i], out[i]) - window_start(o, in[i], out[i]));
    for (int64_t o = 0; o < out[i]; ++o)
      for (int64_t j = 0; j < k; ++j)
        rows[i].push_back(std::min(window_start(o, in[i], out[i]) + j, window_end(o, in[i], out[i]) - 1));
    values = take(b, values, lead + int64_t(i), rows[i]);
    grid.push_back(out[i]);
    grid.push_back(k);
  }
  // [lead.., out0*k0, out1*k1, ..] -> [lead.., out0, k0, out1, k1, ..], and
  // each element's index within its input plane.
  Shape split(x.shape().begin(), x.shape().begin() + lead);
  split.insert(split.end(), grid.begin(), grid.end());
  values = b.reshape(values, split);
  std::vector<double> plane = {0};
  for (size_t i = 0; i < n; ++i) {
    std::vector<double> next;
    for (double p0 : plane)
      for (int64_t r : rows[i]) next.push_back(p0 * double(in[i]) + double(r));
    plane.swap(next);
  }
  Value idx = b.reshape(constant_vector(b, plane, E::I64), grid);
  Ints grid_dims, window_dims;
  for (size_t i = 0; i < 2 * n; ++i) grid_dims.push_back(lead + int64_t(i));
  for (size_t i = 0; i < n; ++i) window_dims.push_back(lead + 2 * int64_t(i) + 1);
  idx = b.broadcast_in_dim(idx, split, grid_dims);
  return b.reduce({values, idx},
                  {b.min_value(x.dtype()), b.constant_int(std::numeric_limits<int64_t>::max(), E::I64)},
                  window_dims, argmax);
}

template <size_t n>
std::vector<Value> lower_adaptive_max_pool_backward(Context& ctx, const Args& a) {
  Value g = a[0].as_tensor(), x = a[1].as_tensor(), idx = a[2].as_tensor();
  return {scatter_at_indices(ctx.b, g, idx, x.shape(), n)};
}

// ---- max_unpool: out.view(planes, -1)[p, indices[p, i]] = self[p, i] into
// zeros of output_size per plane (the last n dims). The CPU raises for an
// index outside the plane; here such an update is dropped.
template <size_t n>
std::vector<Value> lower_max_unpool(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor(), indices = a[1].as_tensor();
  const char* op = n == 2 ? "max_unpooling2d_forward_out" : "max_unpooling3d_forward_out";
  Ints size = a[2].as_ints();
  TPU_CHECK(size.size() == n, ErrorKind::Runtime, "There should be exactly ", n,
            " elements (depth, height, width) in output_size, but got ", size.size(), " elements.");
  TPU_CHECK(x.rank() == int64_t(n) + 1 || x.rank() == int64_t(n) + 2, ErrorKind::Runtime, op,
            ": Input to max_unpooling", n, "d should be a ", n + 1, "d or ", n + 2, "d Tensor");
  TPU_CHECK(x.shape() == indices.shape(), ErrorKind::Runtime, op,
            ": Shape of input must match shape of indices");
  TPU_CHECK(hlo::is_integral(indices.dtype()), ErrorKind::Runtime, op,
            ": elements in indices should be type int64");
  int64_t planes = 1, ins = 1, outs = 1;
  for (int64_t i = 0; i < x.rank(); ++i) (i + int64_t(n) < x.rank() ? planes : ins) *= x.shape()[i];
  for (int64_t d : size) outs *= d;
  Shape grid = {planes, ins};
  Value idx = b.reshape(cast(b, indices, E::I64), grid);
  Value valid = b.and_(b.compare(idx, b.zeros(E::I64, grid), Compare::GE),
                       b.compare(idx, b.full(double(outs), E::I64, grid), Compare::LT));
  Value flat = b.add(b.mul(b.iota(hlo::TensorType{E::I64, grid}, 0), b.full(double(outs), E::I64, grid)), idx);
  flat = b.select(valid, flat, b.full(double(planes * outs), E::I64, grid));
  Builder::ScatterDims dims;
  dims.inserted_window_dims = {0};
  dims.scatter_dims_to_operand_dims = {0};
  dims.index_vector_dim = 1;
  Value r = b.zeros(x.dtype(), {planes * outs});
  if (planes * ins > 0)
    r = b.scatter(r, b.reshape(flat, {planes * ins, 1}), b.reshape(x, {planes * ins}), dims,
                  [](Builder&, const std::vector<Value>& v) { return std::vector<Value>{v[1]}; });
  Shape shape(x.shape().begin(), x.shape().end() - int64_t(n));
  shape.insert(shape.end(), size.begin(), size.end());
  return {b.reshape(r, shape)};
}

// ---- fractional max pooling: along each spatial dimension the windows of
// a plane start at an increasing pseudo-random sequence fixed by one sample
// u in [0, 1) per plane and dimension,
//   start[i] = int((i + u) * alpha) - int(u * alpha), alpha = (in - k) / (out - 1),
// and the last window ends where the input does. The samples arrive as a
// tensor, so the starts are computed on the device, in the input's type as
// the CPU computes them in scalar_t (so both pick the same windows); each
// window is gathered and reduced with the max pool combiner.

// The window starts along one dimension, [N, C, out] i64, from samples u [N, C].
Value fractional_starts(Builder& b, Value u, int64_t in, int64_t out, int64_t k) {
  Shape s = u.shape();
  s.push_back(out);
  Value i = b.iota(hlo::TensorType{E::I64, s}, 2);
  Value starts = b.zeros(E::I64, s);
  if (out > 1) {
    E t = u.dtype();
    Value alpha = b.div(b.full(double(in - k), t, s), b.full(double(out - 1), t, s));
    Value ub = b.broadcast_in_dim(u, s, {0, 1});
    starts = b.sub(b.convert(b.mul(b.add(b.convert(i, t), ub), alpha), E::I64),
                   b.convert(b.mul(ub, alpha), E::I64));
  }
  return b.select(b.compare(i, b.full(double(out - 1), E::I64, s), Compare::EQ),
                  b.full(double(in - k), E::I64, s), starts);
}

// The checks of PyTorch's fractional_max_pool{2,3}d, with its messages.
template <size_t n>
void check_fractional(const Value& x, const Value& u, const Ints& k, const Ints& out) {
  const char* op = n == 2 ? "fractional_max_pool2d" : "fractional_max_pool3d";
  const char* fn = n == 2 ? "fractional_max_pool2d()" : "fractional_max_pool3d_out()";
  const char* count = n == 2 ? "Ints" : "three Ints";
  TPU_CHECK(k.size() == n, ErrorKind::Runtime, op, ": kernel_size must either be a single Int or tuple of ", count);
  TPU_CHECK(out.size() == n, ErrorKind::Runtime, op, ": output_size must either be a single Int or tuple of ",
            count);
  int64_t r = x.rank();
  TPU_CHECK(r == int64_t(n) + 1 || r == int64_t(n) + 2, ErrorKind::Runtime, fn, ": Expected ", n + 1, "D or ",
            n + 2, "D tensor, but got: ", hlo::shape_str(x.shape()));
  for (int64_t d = r - int64_t(n) - 1; d < r; ++d)
    TPU_CHECK(x.shape()[d] > 0, ErrorKind::Runtime, fn,
              ": Expected input to have non-zero size for non-batch dimensions, but got", hlo::shape_str(x.shape()),
              " with dimension ", d, " being empty.");
  TPU_CHECK(u.dtype() == x.dtype(), ErrorKind::Runtime, "Expect _random_samples to have the same dtype as input");
  TPU_CHECK(u.rank() == 3, ErrorKind::Runtime, "Expect _random_samples to have 3 dimensions, got ", u.rank());
  int64_t batch = r == int64_t(n) + 2 ? x.shape()[0] : 1;
  TPU_CHECK(u.shape()[0] >= batch, ErrorKind::Runtime, "Expect _random_samples.size(0) no less then input batch size.");
  TPU_CHECK(u.shape()[1] == x.shape()[r - int64_t(n) - 1], ErrorKind::Runtime,
            "Expect _random_samples.size(1) equals to input channel size.");
  TPU_CHECK(u.shape()[2] == int64_t(n), ErrorKind::Runtime, "Expect _random_samples.size(2) equals to ", n,
            "; got ", u.shape()[2], ".");
  TPU_CHECK(hlo::is_float(x.dtype()), ErrorKind::NotImplemented, "\"", op, "_out_frame\" not implemented for '",
            scalar_type_name(x.dtype()), "'");
  static const char* names[] = {"time", "height", "width"};
  for (size_t i = 0; i < n; ++i) {
    int64_t in = x.shape()[r - int64_t(n) + int64_t(i)];
    // The 3-d kernel's check is strict: its last window may not end at the input's end.
    bool fits = n == 2 ? out[i] + k[i] - 1 <= in : out[i] + k[i] - 1 < in;
    TPU_CHECK(fits, ErrorKind::Runtime, n == 2 ? "fractional_max_pool2d()" : fn, ": pool ",
              names[i + 3 - n], " ", k[i], " too large relative to input ", names[i + 3 - n], " ", in);
  }
}

// a = (self, kernel_size, output_size, random_samples) -> (values, indices).
// The sample for spatial dimension i is u[..., i] in 3-d and u[..., 1 - i]
// in 2-d (the CPU reads width's first).
template <size_t n>
std::vector<Value> lower_fractional_max_pool(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor(), u = a[3].as_tensor();
  Ints k = a[1].as_ints(), out = a[2].as_ints();
  check_fractional<n>(x, u, k, out);
  bool batched = x.rank() == int64_t(n) + 2;
  Shape xs = x.shape();
  if (!batched) xs.insert(xs.begin(), 1);
  int64_t N = xs[0], C = xs[1], plane = 1;
  Ints in(xs.begin() + 2, xs.end());
  for (int64_t d : in) plane *= d;
  Shape out_shape = {N, C}, grid = {N, C};
  out_shape.insert(out_shape.end(), out.begin(), out.end());
  for (size_t i = 0; i < n; ++i) {
    grid.push_back(out[i]);
    grid.push_back(std::max<int64_t>(k[i], 0));
  }
  Shape result_shape = out_shape;
  if (!batched) result_shape.erase(result_shape.begin());
  int64_t count = 1;
  for (int64_t d : out_shape) count *= d;
  if (count == 0)
    return {b.zeros(x.dtype(), result_shape), b.zeros(E::I64, result_shape)};
  // Each window element's index within its plane, [N, C, o0, k0, o1, k1, ..],
  // and each window's first element's, [N, C, o0, o1, ..] (an empty window's
  // index: the CPU reports it).
  Value within = b.zeros(E::I64, grid), first = b.zeros(E::I64, out_shape);
  int64_t stride = plane;
  for (size_t i = 0; i < n; ++i) {
    stride /= in[i];
    int64_t pick = n == 2 ? 1 - int64_t(i) : int64_t(i);
    Value ui = b.reshape(b.slice(u, {0, 0, pick}, {N, C, pick + 1}, {1, 1, 1}), {N, C});
    Value starts = b.mul(fractional_starts(b, ui, in[i], out[i], k[i]), b.full(double(stride), E::I64, {N, C, out[i]}));
    Shape ws = {N, C, out[i], grid[3 + 2 * i]};
    Value pos = b.add(b.broadcast_in_dim(starts, ws, {0, 1, 2}),
                      b.mul(b.iota(hlo::TensorType{E::I64, ws}, 3), b.full(double(stride), E::I64, ws)));
    int64_t g = 2 + 2 * int64_t(i);
    within = b.add(within, b.broadcast_in_dim(pos, grid, {0, 1, g, g + 1}));
    first = b.add(first, b.broadcast_in_dim(starts, out_shape, {0, 1, 2 + int64_t(i)}));
  }
  Value planes = b.add(b.mul(b.iota(hlo::TensorType{E::I64, grid}, 0), b.full(double(C), E::I64, grid)),
                       b.iota(hlo::TensorType{E::I64, grid}, 1));
  Value flat = b.add(b.mul(planes, b.full(double(plane), E::I64, grid)), within);
  Value values = take_1d(b, b.reshape(x, {N * C * plane}), flat);
  Ints window_dims;
  for (size_t i = 0; i < n; ++i) window_dims.push_back(3 + 2 * int64_t(i));
  const Value none = b.constant_int(std::numeric_limits<int64_t>::max(), E::I64);
  auto r = b.reduce({values, within}, {b.min_value(x.dtype()), none}, window_dims, argmax);
  Value idx = b.select(b.compare(r[1], b.broadcast_in_dim(none, out_shape, {}), Compare::EQ), first, r[1]);
  return {b.reshape(r[0], result_shape), b.reshape(idx, result_shape)};
}

// a = (grad_output, self, kernel_size, output_size, indices).
template <size_t n>
std::vector<Value> lower_fractional_max_pool_backward(Context& ctx, const Args& a) {
  Value g = a[0].as_tensor(), x = a[1].as_tensor(), idx = a[4].as_tensor();
  Ints out = a[3].as_ints();
  const char* fn = n == 2 ? "fractional_max_pool2d_backward()" : "fractional_max_pool3d_backward_out()";
  static const char* names[] = {"time", "height", "width"};
  TPU_CHECK(idx.dtype() == E::I64, ErrorKind::Runtime, "expected scalar type Long but found ",
            scalar_type_name(idx.dtype()));
  TPU_CHECK(out.size() == n && g.rank() == x.rank(), ErrorKind::Runtime, fn, ": gradOutput sizes unexpected");
  for (size_t i = 0; i < n; ++i)
    TPU_CHECK(g.shape()[g.rank() - int64_t(n) + int64_t(i)] == out[i], ErrorKind::Runtime, fn, ": gradOutput ",
              n == 2 ? "sizes" : names[i], " unexpected");
  TPU_CHECK(idx.shape() == g.shape(), ErrorKind::Runtime, fn, ": indices sizes unexpected");
return {scatter_at_indices(ctx.b, g, idx, x.shape(), n)};
}

}  // namespace

TPU_LOWERING("aten::_adaptive_avg_pool2d", lower_adaptive_avg_pool<2>);
TPU_LOWERING("aten::_adaptive_avg_pool2d_backward", lower_adaptive_avg_pool_backward<2>);
TPU_LOWERING("aten::_adaptive_avg_pool3d", lower_adaptive_avg_pool<3>);
TPU_LOWERING("aten::_adaptive_avg_pool3d_backward", lower_adaptive_avg_pool_backward<3>);
// The CompositeImplicit adaptive_avg_pool2d/3d keep their decompositions
// (op_kernel.cpp skips them); these entries route their out= forms.
TPU_LOWERING("aten::adaptive_avg_pool2d", lower_adaptive_avg_pool<2>);
TPU_LOWERING("aten::adaptive_avg_pool3d", lower_adaptive_avg_pool<3>);
TPU_LOWERING("aten::adaptive_max_pool2d", lower_adaptive_max_pool<2>);
TPU_LOWERING("aten::adaptive_max_pool2d_backward", lower_adaptive_max_pool_backward<2>);
TPU_LOWERING("aten::adaptive_max_pool3d", lower_adaptive_max_pool<3>);
TPU_LOWERING("aten::adaptive_max_pool3d_backward", lower_adaptive_max_pool_backward<3>);
TPU_LOWERING("aten::avg_pool2d", lower_avg_pool<2>);
TPU_LOWERING("aten::avg_pool2d_backward", lower_avg_pool_backward<2>);
TPU_LOWERING("aten::avg_pool3d", lower_avg_pool<3>);
TPU_LOWERING("aten::avg_pool3d_backward", lower_avg_pool_backward<3>);
TPU_LOWERING("aten::fractional_max_pool2d", lower_fractional_max_pool<2>);
TPU_LOWERING("aten::fractional_max_pool2d_backward", lower_fractional_max_pool_backward<2>);
TPU_LOWERING("aten::fractional_max_pool3d", lower_fractional_max_pool<3>);
TPU_LOWERING("aten::fractional_max_pool3d_backward", lower_fractional_max_pool_backward<3>);
TPU_LOWERING("aten::max_pool2d_with_indices", lower_max_pool_with_indices<2>);
TPU_LOWERING("aten::max_pool2d_with_indices_backward", lower_max_pool_with_indices_backward<2>);
TPU_LOWERING("aten::max_pool3d_with_indices", lower_max_pool_with_indices<3>);
TPU_LOWERING("aten::max_pool3d_with_indices_backward", lower_max_pool_with_indices_backward<3>);
TPU_LOWERING("aten::max_unpool2d", lower_max_unpool<2>);
TPU_LOWERING("aten::max_unpool3d", lower_max_unpool<3>);

}  // namespace torch_tpu::lowering
