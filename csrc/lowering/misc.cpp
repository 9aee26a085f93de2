// Ops that fit no other family: masked fills and scatters, the functional
// *_scatter inverses of view ops (what functionalization and torch.compile
// emit for writes through views), scalar_tensor, pairwise distances and FFTs.
#include <cmath>
#include <string>

#include "lowering/common.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

using hlo::Builder;
using hlo::Compare;
using hlo::TensorType;
using E = ElementType;
using Dims = std::vector<int64_t>;
using Values = std::vector<Value>;

Dims iota_dims(int64_t n) {
  Dims d(n);
  for (int64_t i = 0; i < n; ++i) d[i] = i;
  return d;
}


// A rank-1 i64 constant.
Value i64_array(Builder& b, const std::vector<int64_t>& v) {
  TensorType t{E::I64, {static_cast<int64_t>(v.size())}};
  std::string lit = "[";
  for (size_t i = 0; i < v.size(); ++i) lit += (i ? ", " : "") + std::to_string(v[i]);
  lit += "]";
  return b.op("stablehlo.constant", {}, t, "value = dense<" + lit + "> : " + t.str());
}

// ---- masked_fill / masked_scatter

void check_mask(const Value& mask, const char* op) {
  TPU_CHECK(mask.dtype() == E::Bool, ErrorKind::Runtime, op, " only supports boolean masks, but got mask with dtype ",
            cpp_type_name(mask.dtype()));
}

Values lower_masked_fill(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor(), mask = a[1].as_tensor();
  check_mask(mask, "masked_fill_");
  if (a[2].kind == Arg::Kind::Tensor)
    TPU_CHECK(a[2].tensor.rank() == 0, ErrorKind::Runtime,
              "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ", a[2].tensor.rank(),
              " dimension(s).");
  Shape shape = broadcast_shapes(x.shape(), mask.shape());
  Value v = broadcast_to(b, operand(ctx, a[2], x.dtype()), shape);
  return {b.select(broadcast_to(b, mask, shape), v, broadcast_to(b, x, shape))};
}

// For each element of a flattened mask, how many trues come before it.
Value exclusive_count(Builder& b, Value flat_mask) {
  int64_t n = flat_mask.shape()[0];
  Value ones = b.convert(flat_mask, E::I64);
  auto sums = b.reduce_window({ones}, {b.constant_int(0, E::I64)}, {n}, {1}, {1}, {1}, {{n - 1, 0}},
                              [](Builder& r, const Values& v) { return Values{r.add(v[0], v[1])}; });
  return b.sub(sums[0], ones);
}

// masked_scatter(self, mask, source): the true positions of the broadcast
// mask take source's elements in order.
Values lower_masked_scatter(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor(), mask = a[1].as_tensor(), src = a[2].as_tensor();
  check_mask(mask, "masked_scatter_");
  TPU_CHECK(src.dtype() == x.dtype(), ErrorKind::Runtime,
            "masked_scatter_: expected self and source to have same dtypes but got ", scalar_type_name(x.dtype()),
            " and ", scalar_type_name(src.dtype()));
  Shape shape = broadcast_shapes(x.shape(), mask.shape());
  Value xb = broadcast_to(b, x, shape);
  int64_t n = 1, k = src.type.numel();
  for (int64_t d : shape) n *= d;
  if (n == 0 || k == 0) return {xb};
  Value m = b.reshape(broadcast_to(b, mask, shape), {n});
  Value pos = b.clamp(b.constant_int(0, E::I64), exclusive_count(b, m), b.constant_int(k - 1, E::I64));
  Value picked = take_1d(b, b.reshape(src, {k}), pos);
  return {b.reshape(b.select(m, picked, b.reshape(xb, {n})), shape)};
}

// masked_scatter_backward(grad_output, mask, sizes): the gradient of source,
// the mask's true positions of grad in order, zeros past them.
Values lower_masked_scatter_backward(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value g = a[0].as_tensor(), mask = a[1].as_tensor();
  const auto& sizes = a[2].as_ints();
  int64_t k = 1;
  for (int64_t d : sizes) k *= d;
  Shape shape = broadcast_shapes(g.shape(), mask.shape());
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (n == 0 || k == 0) return {b.zeros(g.dtype(), sizes)};
  Value m = b.reshape(broadcast_to(b, mask, shape), {n});
  // Positions of false entries point past the end, where scatter drops them.
  Value pos = b.select(m, exclusive_count(b, m), b.full(double(k), E::I64, {n}));
  Builder::ScatterDims d;
  d.inserted_window_dims = {0};
  d.scatter_dims_to_operand_dims = {0};
  d.index_vector_dim = 1;
  Value out = b.scatter(b.zeros(g.dtype(), {k}), b.reshape(pos, {n, 1}), b.reshape(broadcast_to(b, g, shape), {n}),
                        d, [](Builder&, const Values& v) { return Values{v[1]}; });
  return {b.reshape(out, sizes)};
}

Values lower_scalar_tensor(Context& ctx, const Args& a) {
  E t = a[1].opt_dtype().value_or(ctx.default_float);
  return {ctx.number(a[0], t)};
}

// ---- *_scatter: the functional inverse of a view, `src` written through it

void check_src(const Value& src, const Shape& view, const char* op) {
  TPU_CHECK(src.shape() == view, ErrorKind::Runtime, op, ": expected src to have a size equal to the slice of self. src size = ",
            hlo::shape_str(src.shape()), ", slice size = ", hlo::shape_str(view));
}

// select_scatter(self, src, dim, index)
Values lower_select_scatter(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  Value src = cast(b, a[1].as_tensor(), x.dtype());
  TPU_CHECK(x.rank() > 0, ErrorKind::Index, "select() cannot be applied to a 0-dim tensor.");
  int64_t dim = wrap_dim(a[2].as_int(), x.rank());
  int64_t size = x.shape()[dim], index = a[3].as_int();
  TPU_CHECK(index >= -size && index < size, ErrorKind::Index, "select(): index ", index,
            " out of range for tensor of size ", hlo::shape_str(x.shape()), " at dimension ", dim);
  if (index < 0) index += size;
  check_src(src, reduced_shape(x.shape(), {dim}, false), "select_scatter");
  std::vector<Value> starts;
  for (int64_t d = 0; d < x.rank(); ++d) starts.push_back(b.constant_int(d == dim ? index : 0, E::I64));
  return {b.dynamic_update_slice(x, b.reshape(src, reduced_shape(x.shape(), {dim}, true)), starts)};
}

// Writes `src` into the strided positions start, start + step, ... of dim.
Value write_strided(Builder& b, Value x, Value src, int64_t dim, int64_t start, int64_t step) {
  int64_t size = x.shape()[dim], len = src.shape()[dim];
  if (len == 0) return x;
  Dims lo(x.rank(), 0), hi(x.rank(), 0), interior(x.rank(), 0);
  lo[dim] = start;
  interior[dim] = step - 1;
  hi[dim] = size - (start + (len - 1) * step + 1);
  Value placed = b.pad(src, b.constant(0, x.dtype()), lo, hi, interior);
  Value where = b.pad(b.full(1, E::Bool, src.shape()), b.constant_bool(false), lo, hi, interior);
  return b.select(where, placed, x);
}

// slice_scatter(self, src, dim, start, end, step), bounds clamped as slice does.
Values lower_slice_scatter(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  Value src = cast(b, a[1].as_tensor(), x.dtype());
  TPU_CHECK(x.rank() > 0, ErrorKind::Index, "slice() cannot be applied to a 0-dim tensor.");
  int64_t dim = wrap_dim(a[2].as_int(), x.rank());
  int64_t size = x.shape()[dim];
  int64_t step = a[5].as_int();
  TPU_CHECK(step > 0, ErrorKind::Runtime, "slice step must be positive");
  int64_t start = a[3].opt_int().value_or(0), end = a[4].opt_int().value_or(size);
  if (start < 0) start += size;
  if (end < 0) end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  Shape view = x.shape();
  view[dim] = (end - start + step - 1) / step;
  check_src(src, view, "slice_scatter");
  return {write_strided(b, x, src, dim, start, step)};
}

// diagonal_scatter(self, src, offset, dim1, dim2): src holds the diagonal
// as its last dim, the other dims in order.
Values lower_diagonal_scatter(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  Value src = cast(b, a[1].as_tensor(), x.dtype());
  int64_t offset = a[2].as_int();
  int64_t d1 = wrap_dim(a[3].as_int(), x.rank()), d2 = wrap_dim(a[4].as_int(), x.rank());
  TPU_CHECK(d1 != d2, ErrorKind::Runtime, "diagonal dimensions cannot be identical ", a[3].as_int(), ", ",
            a[4].as_int());
  const Shape& s = x.shape();
  int64_t len = offset >= 0 ? std::max<int64_t>(0, std::min(s[d1], s[d2] - offset))
                            : std::max<int64_t>(0, std::min(s[d1] + offset, s[d2]));
  Shape view;
  Dims others;
  for (int64_t d = 0; d < x.rank(); ++d)
    if (d != d1 && d != d2) {
      view.push_back(s[d]);
      others.push_back(d);
    }
  view.push_back(len);
  check_src(src, view, "diagonal_scatter");
  // Element (i along d1, j along d2) is diagonal entry i when offset >= 0,
  // else j; pad the diagonal to that dim's length and lay it along it.
  int64_t along = offset >= 0 ? d1 : d2;
  int64_t r = src.rank();
  Dims lo(r, 0), hi(r, 0), in(r, 0);
  hi[r - 1] = s[along] - len;
  Value padded = b.pad(src, b.constant(0, x.dtype()), lo, hi, in);
  Dims dims = others;
  dims.push_back(along);
  Value spread = b.broadcast_in_dim(padded, s, dims);
  Value i = b.iota(TensorType{E::I64, s}, d1), j = b.iota(TensorType{E::I64, s}, d2);
  Value on = b.compare(b.sub(j, i), b.full(double(offset), E::I64, s), Compare::EQ);
  return {b.select(on, spread, x)};
}

// as_strided_scatter(self, src, size, stride, storage_offset): self seen as
// its row-major elements, the strided positions replaced by src.
Values lower_as_strided_scatter(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  Value src = cast(b, a[1].as_tensor(), x.dtype());
  const auto& size = a[2].as_ints();
  const auto& stride = a[3].as_ints();
  int64_t offset = a[4].opt_int().value_or(0);
  TPU_CHECK(size.size() == stride.size(), ErrorKind::Runtime, "mismatch in length of strides and shape");
  check_src(src, size, "as_strided_scatter");
  int64_t n = x.type.numel(), m = src.type.numel();
  if (m == 0) return {x};
  int64_t last = offset;
  for (size_t d = 0; d < size.size(); ++d) last += (size[d] - 1) * stride[d];
  TPU_CHECK(offset >= 0 && last < n, ErrorKind::Runtime, "setStorage: sizes ", hlo::shape_str(size), ", strides ",
            hlo::shape_str(stride), ", storage offset ", offset, " out of bounds for storage of ", n, " elements");
  Value pos = b.full(double(offset), E::I64, size);
  for (size_t d = 0; d < size.size(); ++d)
    pos = b.add(pos, b.mul(b.iota(TensorType{E::I64, size}, d), b.full(double(stride[d]), E::I64, size)));
  Builder::ScatterDims sd;
  sd.inserted_window_dims = {0};
  sd.scatter_dims_to_operand_dims = {0};
  sd.index_vector_dim = 1;
  Value out = b.scatter(b.reshape(x, {n}), b.reshape(pos, {m, 1}), b.reshape(src, {m}), sd,
                        [](Builder&, const Values& v) { return Values{v[1]}; });
  return {b.reshape(out, x.shape())};
}

// ---- pairwise distances

E dist_type(const Value& x, const char* op) {
  TPU_CHECK(hlo::is_float(x.dtype()), ErrorKind::Runtime, op,
            " only supports floating-point dtypes, X1 got: ", scalar_type_name(x.dtype()));
  return x.dtype() == E::F16 || x.dtype() == E::BF16 ? E::F32 : x.dtype();
}

// x1 [..., P, M] - x2 [..., R, M] -> [..., P, R, M]
Value differences(Builder& b, Value x1, Value x2) {
  int64_t r = x1.rank();
  Shape s = x1.shape();
  s.insert(s.begin() + (r - 1), x2.shape()[r - 2]);
  Dims d1 = iota_dims(r), d2 = iota_dims(r);
  d1[r - 1] = r;
  d2[r - 2] = r - 1;
  d2[r - 1] = r;
  return b.sub(b.broadcast_in_dim(x1, s, d1), b.broadcast_in_dim(x2, s, d2));
}

// The p-norm over the last dim: p = 0 counts nonzeros, p = inf takes the max.
Value p_norm(Builder& b, Value diff, double p) {
  int64_t last = diff.rank() - 1;
  E t = diff.dtype();
  Value ad = b.abs(diff);
  if (p == 0) return b.reduce_sum(b.convert(b.compare(ad, b.zeros(t, ad.shape()), Compare::NE), t), {last});
  if (std::isinf(p)) return b.reduce_max(ad, {last});
  if (p == 1) return b.reduce_sum(ad, {last});
  if (p == 2) return b.sqrt(b.reduce_sum(b.mul(ad, ad), {last}));
  Value s = b.reduce_sum(b.pow(ad, b.full(p, t, ad.shape())), {last});
  return b.pow(s, b.full(1 / p, t, s.shape()));
}

// d dist / d x1 for each pair, given diff = x1 - x2 and the distance.
Value norm_grad(Builder& b, Value diff, Value dist, double p) {
  int64_t last = diff.rank() - 1;
  E t = diff.dtype();
  Shape s = diff.shape();
  Value zero = b.zeros(t, s);
  Value d = b.broadcast_in_dim(dist, s, iota_dims(last));
  if (p == 0) return zero;
  Value sign = b.sign(diff);
  if (p == 1) return sign;
  Value ad = b.abs(diff);
  if (std::isinf(p)) return b.mul(sign, b.convert(b.compare(ad, d, Compare::EQ), t));
  Value nonzero = b.compare(d, zero, Compare::NE);
  Value g = p == 2 ? b.div(diff, d)
                   : b.div(b.mul(sign, b.pow(ad, b.full(p - 1, t, s))), b.pow(d, b.full(p - 1, t, s)));
  return b.select(nonzero, g, zero);
}

void check_p(double p, const char* op) {
  TPU_CHECK(p >= 0, ErrorKind::Runtime, op, " only supports non-negative p values");
}

// _cdist_forward(x1, x2, p, compute_mode): the direct difference form, which
// is at least as accurate as the CPU's matmul shortcut for p = 2.
Values lower_cdist_forward(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x1 = a[0].as_tensor(), x2 = a[1].as_tensor();
  double p = a[2].as_float();
  check_p(p, "cdist");
  E acc = dist_type(x1, "cdist");
  TPU_CHECK(x1.rank() >= 2 && x2.rank() == x1.rank() && x1.shape().back() == x2.shape().back(), ErrorKind::Runtime,
            "X1 and X2 must have the same number of columns. X1: ", x1.shape().empty() ? 0 : x1.shape().back(),
            " X2: ", x2.shape().empty() ? 0 : x2.shape().back());
  Value d = p_norm(b, differences(b, cast(b, x1, acc), cast(b, x2, acc)), p);
  return {cast(b, d, x1.dtype())};
}

// _cdist_backward(grad, x1, x2, p, cdist): the gradient of x1.
Values lower_cdist_backward(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value g = a[0].as_tensor(), x1 = a[1].as_tensor(), x2 = a[2].as_tensor(), dist = a[4].as_tensor();
  double p = a[3].as_float();
  E acc = dist_type(x1, "cdist");
  Value diff = differences(b, cast(b, x1, acc), cast(b, x2, acc));
  Value pg = norm_grad(b, diff, cast(b, dist, acc), p);
  int64_t last = diff.rank() - 1;
  Value w = b.broadcast_in_dim(cast(b, g, acc), diff.shape(), iota_dims(last));
  return {cast(b, b.reduce_sum(b.mul(w, pg), {last - 1}), x1.dtype())};
}

// The (i, j) pairs with i < j in row-major order: pdist's layout.
std::pair<std::vector<int64_t>, std::vector<int64_t>> pairs(int64_t n) {
  std::vector<int64_t> is, js;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j) {
      is.push_back(i);
      js.push_back(j);
    }
  return {is, js};
}

Value rows(Builder& b, Value x, const std::vector<int64_t>& idx) {
  Builder::GatherDims d;
  d.offset_dims = {1};
  d.collapsed_slice_dims = {0};
  d.start_index_map = {0};
  d.index_vector_dim = 1;
  int64_t k = static_cast<int64_t>(idx.size());
  return b.gather(x, b.reshape(i64_array(b, idx), {k, 1}), d, {1, x.shape()[1]}, {k, x.shape()[1]});
}

Values lower_pdist_forward(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  double p = a[1].as_float();
  check_p(p, "pdist");
  TPU_CHECK(x.rank() == 2, ErrorKind::Runtime, "pdist only supports 2D tensors, got: ", x.rank(), "D");
  E acc = dist_type(x, "pdist");
  auto [is, js] = pairs(x.shape()[0]);
  if (is.empty()) return {b.zeros(x.dtype(), {0})};
  Value xa = cast(b, x, acc);
  return {cast(b, p_norm(b, b.sub(rows(b, xa, is), rows(b, xa, js)), p), x.dtype())};
}

// _pdist_backward(grad, self, p, pdist): each pair pushes row i along the
// norm's gradient and row j against it.
Values lower_pdist_backward(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value g = a[0].as_tensor(), x = a[1].as_tensor(), dist = a[3].as_tensor();
  double p = a[2].as_float();
  E acc = dist_type(x, "pdist");
  int64_t n = x.shape()[0], m = x.shape()[1];
  auto [is, js] = pairs(n);
  if (is.empty()) return {b.zeros(x.dtype(), x.shape())};
  int64_t k = static_cast<int64_t>(is.size());
  Value xa = cast(b, x, acc);
  Value diff = b.sub(rows(b, xa, is), rows(b, xa, js));
  Value pg = b.mul(norm_grad(b, diff, cast(b, dist, acc), p), b.broadcast_in_dim(cast(b, g, acc), {k, m}, {0}));
  Builder::ScatterDims sd;
  sd.update_window_dims = {1};
  sd.inserted_window_dims = {0};
  sd.scatter_dims_to_operand_dims = {0};
  sd.index_vector_dim = 1;
  auto add = [](Builder& r, const Values& v) { return Values{r.add(v[0], v[1])}; };
  Value out = b.scatter(b.zeros(acc, {n, m}), b.reshape(i64_array(b, is), {k, 1}), pg, sd, add);
  out = b.scatter(out, b.reshape(i64_array(b, js), {k, 1}), b.neg(pg), sd, add);
  return {cast(b, out, x.dtype())};
}


// ---- FFT: stablehlo.fft along one dim at a time (the op transforms the
// innermost dims, so each dim is moved last and back). XLA's inverse
// transforms divide by n; PyTorch's `normalization` (0: none, 1: 1/sqrt(n),
// 2: 1/n) is applied instead, once, over the whole signal.

E complex_of(E t) { return t == E::F64 || t == E::C128 ? E::C128 : E::C64; }

Value fft_1d(Builder& b, Value x, int64_t dim, const char* kind, int64_t length, E out_type) {
  int64_t r = x.rank();
  Dims perm = iota_dims(r);
  std::swap(perm[dim], perm[r - 1]);
  Value t = dim == r - 1 ? x : b.transpose(x, perm);
  Shape out = t.shape();
  if (std::string(kind) == "RFFT") out[r - 1] = length / 2 + 1;
  if (std::string(kind) == "IRFFT") out[r - 1] = length;
  Value f = b.op("stablehlo.fft", {t}, TensorType{out_type, out},
                 std::string("fft_type = #stablehlo<fft_type ") + kind + ">, fft_length = array<i64: " +
                     std::to_string(length) + ">");
  return dim == r - 1 ? f : b.transpose(f, perm);
}

// Undoes XLA's 1/n on inverse transforms and applies PyTorch's normalization.
Value fft_scale(Builder& b, Value x, int64_t n, int mode, bool inverse) {
  double s = inverse ? double(n) : 1.0;
  if (mode == 1) s /= std::sqrt(double(n));
  if (mode == 2) s /= double(n);
  if (s == 1.0) return x;
  E real = x.dtype() == E::C128 ? E::F64 : E::F32;
  Value c = b.complex(b.full(s, real, x.shape()), b.zeros(real, x.shape()));
  return b.mul(x, c);
}

void check_fft_input(const Value& x, const char* op) {
  TPU_CHECK(x.dtype() == E::F32 || x.dtype() == E::F64 || x.dtype() == E::C64 || x.dtype() == E::C128,
            ErrorKind::Runtime, op, ": Unsupported dtype ", scalar_type_name(x.dtype()));
}

// _fft_c2c(self, dim, normalization, forward)
Values lower_fft_c2c(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  check_fft_input(x, "_fft_c2c");
  Dims dims = wrap_dims(a[1].as_ints(), x.rank());
  int mode = static_cast<int>(a[2].as_int());
  bool forward = a[3].as_bool();
  E ct = complex_of(x.dtype());
  Value y = cast(b, x, ct);
  int64_t n = 1;
  for (int64_t d : dims) {
    n *= x.shape()[d];
    y = fft_1d(b, y, d, forward ? "FFT" : "IFFT", x.shape()[d], ct);
  }
  return {fft_scale(b, y, n, mode, !forward)};
}

// _fft_r2c(self, dim, normalization, onesided): the last dim is the halved one.
Values lower_fft_r2c(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  TPU_CHECK(x.dtype() == E::F32 || x.dtype() == E::F64, ErrorKind::Runtime,
            "_fft_r2c: Unsupported dtype ", scalar_type_name(x.dtype()));
  Dims dims = wrap_dims(a[1].as_ints(), x.rank());
  int mode = static_cast<int>(a[2].as_int());
  bool onesided = a[3].as_bool();
  E ct = complex_of(x.dtype());
  int64_t n = 1;
  for (int64_t d : dims) n *= x.shape()[d];
  Value y;
  size_t rest = dims.size();
  if (onesided && !dims.empty()) {
    int64_t last = dims.back();
    y = fft_1d(b, x, last, "RFFT", x.shape()[last], ct);
    rest -= 1;
  } else {
    y = cast(b, x, ct);
  }
  for (size_t i = 0; i < rest; ++i) y = fft_1d(b, y, dims[i], "FFT", x.shape()[dims[i]], ct);
  return {fft_scale(b, y, n, mode, false)};
}

// _fft_c2r(self, dim, normalization, last_dim_size)
Values lower_fft_c2r(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  check_fft_input(x, "_fft_c2r");
  Dims dims = wrap_dims(a[1].as_ints(), x.rank());
  TPU_CHECK(!dims.empty(), ErrorKind::Runtime, "_fft_c2r: expected at least one dim");
  int mode = static_cast<int>(a[2].as_int());
  int64_t last_size = a[3].as_int();
  E ct = complex_of(x.dtype());
  E rt = ct == E::C128 ? E::F64 : E::F32;
  Value y = cast(b, x, ct);
  int64_t n = last_size;
  for (size_t i = 0; i + 1 < dims.size(); ++i) {
    n *= x.shape()[dims[i]];
    y = fft_1d(b, y, dims[i], "IFFT", x.shape()[dims[i]], ct);
  }
  // IRFFT reads exactly n/2 + 1 inputs along the last dim.
  int64_t last = dims.back(), want = last_size / 2 + 1, have = y.shape()[last];
  if (have > want) {
    Dims lo(y.rank(), 0), hi = y.shape(), st(y.rank(), 1);
    hi[last] = want;
    y = b.slice(y, lo, hi, st);
  } else if (have < want) {
    Dims lo(y.rank(), 0), hi(y.rank(), 0), in(y.rank(), 0);
    hi[last] = want - have;
    y = b.pad(y, b.constant(0, ct), lo, hi, in);
  }
  y = fft_1d(b, y, last, "IRFFT", last_size, rt);
  double s = double(n);
  if (mode == 1) s /= std::sqrt(double(n));
  if (mode == 2) s /= double(n);
  return {s == 1.0 ? y : b.mul(y, b.full(s, rt, y.shape()))};
}

// equal(self, other) -> bool: same shape and every element equal. The aten
// layer reads the 0-dim result back as the Python bool the schema returns.
Values lower_equal(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor(), y = a[1].as_tensor();
  if (x.shape() != y.shape()) return {b.constant_bool(false)};
  E t = promote(x.dtype(), y.dtype());
  Value eq = b.compare(cast(b, x, t), cast(b, y, t), Compare::EQ);
  if (eq.rank() == 0) return {eq};
  Dims all(eq.rank());
  for (int64_t i = 0; i < eq.rank(); ++i) all[i] = i;
  return {b.reduce_and(eq, all)};
}

}  // namespace

TPU_LOWERING("aten::_cdist_backward", lower_cdist_backward);
TPU_LOWERING("aten::_cdist_forward", lower_cdist_forward);
TPU_LOWERING("aten::_fft_c2c", lower_fft_c2c);
TPU_LOWERING("aten::_fft_c2r", lower_fft_c2r);
TPU_LOWERING("aten::_fft_r2c", lower_fft_r2c);
TPU_LOWERING("aten::_pdist_backward", lower_pdist_backward);
TPU_LOWERING("aten::_pdist_forward", lower_pdist_forward);
TPU_LOWERING("aten::as_strided_scatter", lower_as_strided_scatter);
TPU_LOWERING("aten::diagonal_scatter", lower_diagonal_scatter);
TPU_LOWERING("aten::equal", lower_equal);
TPU_LOWERING("aten::masked_fill.Scalar", lower_masked_fill);
TPU_LOWERING("aten::masked_fill.Tensor", lower_masked_fill);
TPU_LOWERING("aten::masked_scatter", lower_masked_scatter);
TPU_LOWERING("aten::masked_scatter_backward", lower_masked_scatter_backward);
TPU_LOWERING("aten::scalar_tensor", lower_scalar_tensor);
TPU_LOWERING("aten::select_scatter", lower_select_scatter);
TPU_LOWERING("aten::slice_scatter", lower_slice_scatter);

}  // namespace torch_tpu::lowering
