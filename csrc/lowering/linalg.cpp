// Linear algebra and small vector ops: trace, vdot, linalg_cross,
// triangular solves and Cholesky (StableHLO's own ops) and what is built from
// them (cholesky_inverse, cholesky_solve, triangular_solve), isin, bucketize and
// searchsorted (as counts of comparisons), tril/triu_indices (constants).
#include <string>

#include "lowering/common.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

using hlo::Builder;
using hlo::Compare;
using E = ElementType;
using Ints = std::vector<int64_t>;
using Values = std::vector<Value>;

// i1 mask of shape (.., n, m) that is true where col - row (op) offset.
Value diag_mask(Builder& b, const Shape& shape, int64_t offset, Compare dir) {
  int64_t r = shape.size();
  hlo::TensorType it{E::I64, shape};
  Value row = b.iota(it, r - 2), col = b.iota(it, r - 1);
  return b.compare(b.sub(col, row), b.full(double(offset), E::I64, shape), dir);
}

Values lower_trace(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  TPU_CHECK(x.rank() == 2, ErrorKind::Runtime, "trace: expected a matrix, but got tensor with dim ", x.rank());
  E t = x.dtype();
  check_dtype(t != E::Bool, "trace", t);
  E out = hlo::is_integral(t) ? E::I64 : t;
  E acc = opmath(out);
  Value v = cast(b, x, acc);
  Value m = b.select(diag_mask(b, x.shape(), 0, Compare::EQ), v, b.zeros(acc, x.shape()));
  return {cast(b, b.reduce_sum(m, {0, 1}), out)};
}

Value conj(Builder& b, Value x) {
  if (!hlo::is_complex(x.dtype())) return x;
  return b.complex(b.real(x), b.neg(b.imag(x)));
}

Values lower_vdot(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor(), y = a[1].as_tensor();
  TPU_CHECK(x.rank() == 1 && y.rank() == 1, ErrorKind::Runtime, "1D tensors expected, but got ", x.rank(), "D and ", y.rank(), "D tensors");
  TPU_CHECK(x.dtype() == y.dtype(), ErrorKind::Runtime, "vdot : expected both vectors to have same dtype, but found ",
            scalar_type_name(x.dtype()), " and ", scalar_type_name(y.dtype()));
  TPU_CHECK(x.shape()[0] == y.shape()[0], ErrorKind::Runtime, "inconsistent tensor size, expected tensor [", x.shape()[0],
            "] and src [", y.shape()[0], "] to have the same number of elements, but got ", x.shape()[0], " and ",
            y.shape()[0], " elements respectively");
  E t = x.dtype(), acc = opmath(t);
  check_dtype(t != E::Bool, "vdot", t);
  Value p = b.mul(conj(b, cast(b, x, acc)), cast(b, y, acc));
  return {cast(b, b.reduce_sum(p, {0}), t)};
}

Value slice1(Builder& b, Value x, int64_t dim, int64_t i) {
  Ints lo(x.rank(), 0), hi = x.shape(), st(x.rank(), 1);
  lo[dim] = i, hi[dim] = i + 1;
  return b.slice(x, lo, hi, st);
}

Values lower_linalg_cross(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor(), y = a[1].as_tensor();
  TPU_CHECK(x.rank() == y.rank(), ErrorKind::Runtime, "linalg.cross: inputs must have the same number of dimensions.");
  E t = result_type(ctx, {&a[0], &a[1]});
  Shape s = broadcast_shapes(x.shape(), y.shape());
  int64_t dim = wrap_dim(a[2].as_int(), s.size());
  TPU_CHECK(x.shape()[dim] == 3 && y.shape()[dim] == 3, ErrorKind::Runtime, "linalg.cross: inputs dimension ", dim,
            " must have length 3. Got ", x.shape()[dim], " and ", y.shape()[dim]);
  x = broadcast_to(b, cast(b, x, t), s), y = broadcast_to(b, cast(b, y, t), s);
  Value x0 = slice1(b, x, dim, 0), x1 = slice1(b, x, dim, 1), x2 = slice1(b, x, dim, 2);
  Value y0 = slice1(b, y, dim, 0), y1 = slice1(b, y, dim, 1), y2 = slice1(b, y, dim, 2);
  return {b.concatenate({b.sub(b.mul(x1, y2), b.mul(x2, y1)), b.sub(b.mul(x2, y0), b.mul(x0, y2)),
                         b.sub(b.mul(x0, y1), b.mul(x1, y0))},
                        dim)};
}

// ---- triangular solve, Cholesky

void check_square(const Value& a, const char* fn) {
  TPU_CHECK(a.rank() >= 2, ErrorKind::Runtime, fn, ": The input tensor A must have at least 2 dimensions.");
  TPU_CHECK(a.shape()[a.rank() - 1] == a.shape()[a.rank() - 2], ErrorKind::Runtime, fn,
            ": A must be batches of square matrices, but they are ", a.shape()[a.rank() - 2], " by ",
            a.shape()[a.rank() - 1], " matrices");
}

void check_linalg_dtype(E t, const char* fn) {
  TPU_CHECK(t == E::F32 || t == E::F64 || t == E::C64 || t == E::C128, ErrorKind::Runtime, fn,
            ": Expected a floating point or complex tensor as input. Got ", scalar_type_name(t));
}

Ints batch_of(const Shape& s) { return Ints(s.begin(), s.end() - 2); }

Value with_batch(Builder& b, Value x, const Ints& batch) {
  Shape s = batch;
  s.push_back(x.shape()[x.rank() - 2]);
  s.push_back(x.shape()[x.rank() - 1]);
  return broadcast_to(b, x, s);
}

enum class Trans { None, Transpose, Adjoint };

// op(A) X = B (left) or X op(A) = B for A and B of one type and batch. Only
// A's `lower` or upper triangle is read, as LAPACK's trtrs/potrs/potri do.
Value tri_solve(Builder& b, Value A, Value B, bool left, bool lower, bool unit, Trans trans) {
  // Nothing to solve; the plugin need not accept zero-sized operands.
  if (B.type.numel() == 0) return b.zeros(B.dtype(), B.shape());
  const char* t = trans == Trans::None ? "NO_TRANSPOSE" : trans == Trans::Transpose ? "TRANSPOSE" : "ADJOINT";
  std::string attrs = std::string("left_side = ") + (left ? "true" : "false") + ", lower = " + (lower ? "true" : "false") +
                      ", unit_diagonal = " + (unit ? "true" : "false") + ", transpose_a = #stablehlo<transpose " + t + ">";
  return b.op("stablehlo.triangular_solve", {A, B}, B.type, attrs);
}

Values lower_solve_triangular(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value A = a[0].as_tensor(), B = a[1].as_tensor();
  bool upper = a[2].as_bool(), left = a[3].as_bool(), unit = a[4].as_bool();
  check_square(A, "linalg.solve_triangular");
  TPU_CHECK(B.rank() >= 2, ErrorKind::Runtime, "linalg.solve_triangular: The input tensor B must have at least 2 dimensions.");
  E t = promote(A.dtype(), B.dtype());
  check_linalg_dtype(t, "linalg.solve_triangular");
  int64_t n = A.shape()[A.rank() - 1];
  int64_t bn = left ? B.shape()[B.rank() - 2] : B.shape()[B.rank() - 1];
  TPU_CHECK(bn == n, ErrorKind::Runtime, "linalg.solve_triangular: Incompatible shapes of A and B for the equation ",
            left ? "AX = B" : "XA = B", " (", A.shape()[A.rank() - 2], "x", n, " and ", B.shape()[B.rank() - 2], "x",
            B.shape()[B.rank() - 1], ")");
  Ints batch = broadcast_shapes(batch_of(A.shape()), batch_of(B.shape()));
  A = with_batch(b, cast(b, A, t), batch), B = with_batch(b, cast(b, B, t), batch);
  return {tri_solve(b, A, B, left, !upper, unit, Trans::None)};
}

// torch.triangular_solve(b, A): A X = b, or A^T X = b (a plain transpose, also for
// complex A); it also returns A broadcast to the common batch.
Values lower_triangular_solve(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value B = a[0].as_tensor(), A = a[1].as_tensor();
  bool upper = a[2].as_bool(), transpose = a[3].as_bool(), unit = a[4].as_bool();
  TPU_CHECK(B.rank() >= 2, ErrorKind::Runtime, "torch.triangular_solve: Expected b to have at least 2 dimensions, but it has ",
            B.rank(), " dimensions instead");
  TPU_CHECK(A.rank() >= 2, ErrorKind::Runtime, "torch.triangular_solve: Expected A to have at least 2 dimensions, but it has ",
            A.rank(), " dimensions instead");
  int64_t n = A.shape()[A.rank() - 1];
  TPU_CHECK(A.shape()[A.rank() - 2] == n, ErrorKind::Runtime, "A must be batches of square matrices, but they are ",
            A.shape()[A.rank() - 2], " by ", n, " matrices");
  TPU_CHECK(B.shape()[B.rank() - 2] == n, ErrorKind::Runtime, "Incompatible matrix sizes for triangular_solve: each A matrix is ",
            n, " by ", n, " but each b matrix is ", B.shape()[B.rank() - 2], " by ", B.shape()[B.rank() - 1]);
  TPU_CHECK(A.dtype() == B.dtype(), ErrorKind::Runtime, "Expected b and A to have the same dtype, but found b of type ",
            scalar_type_name(B.dtype()), " and A of type ", scalar_type_name(A.dtype()), " instead.");
  E t = A.dtype();
  check_dtype(t == E::F32 || t == E::F64 || t == E::C64 || t == E::C128, "triangular_solve_cpu", t);
  Ints batch = broadcast_shapes(batch_of(A.shape()), batch_of(B.shape()));
  A = with_batch(b, A, batch), B = with_batch(b, B, batch);
  return {tri_solve(b, A, B, true, !upper, unit, transpose ? Trans::Transpose : Trans::None), A};
}

Values lower_cholesky_ex(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value A = a[0].as_tensor();
  bool upper = a[1].as_bool();
  check_square(A, "linalg.cholesky");
  check_linalg_dtype(A.dtype(), "linalg.cholesky");
  int64_t r = A.rank(), n = A.shape()[r - 1];
  Value L = b.op("stablehlo.cholesky", {A}, A.type, "lower = true");
  L = b.select(diag_mask(b, A.shape(), 0, Compare::LE), L, b.zeros(A.dtype(), A.shape()));
  // info: 0 on success. On failure XLA's factor is NaN throughout, so info is
  // the first column whose pivot is not finite and positive: 1 where LAPACK
  // would name the failing minor (nonzero either way).
  Value d = L;
  if (hlo::is_complex(d.dtype())) d = b.real(d);
  Value diag = b.reduce_sum(b.select(diag_mask(b, d.shape(), 0, Compare::EQ), d, b.zeros(d.dtype(), d.shape())), {r - 1});
  Value good = b.and_(b.compare(diag, b.zeros(diag.dtype(), diag.shape()), Compare::GT), b.is_finite(diag));
  Value idx = b.iota({E::I32, diag.shape()}, r - 2);
  Value first_bad = b.reduce_min(b.select(good, b.full(double(n), E::I32, diag.shape()), idx), {r - 2});
  // GE, not EQ: a 0x0 matrix reduces over nothing to the i32 maximum.
  Value info = b.select(b.compare(first_bad, b.full(double(n), E::I32, first_bad.shape()), Compare::GE),
                        b.full(0, E::I32, first_bad.shape()), b.add(first_bad, b.full(1, E::I32, first_bad.shape())));
  if (upper) {
    Ints perm;
    for (int64_t i = 0; i < r; ++i) perm.push_back(i);
    std::swap(perm[r - 1], perm[r - 2]);
    L = b.transpose(L, perm);
    if (hlo::is_complex(L.dtype())) L = conj(b, L);
  }
  return {L, info};
}

// The inverse of A = L L^H (or U^H U) from its factor: L^-H L^-1 (U^-1 U^-H), two
// triangular solves against the identity.
Values lower_cholesky_inverse(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value F = a[0].as_tensor();
  bool upper = a[1].as_bool();
  TPU_CHECK(F.rank() >= 2, ErrorKind::Runtime, "cholesky_inverse: The input tensor A must have at least 2 dimensions.");
  check_square(F, "cholesky_inverse");
  E t = F.dtype();
  check_dtype(t == E::F32 || t == E::F64 || t == E::C64 || t == E::C128, "cholesky_inverse_out_cpu", t);
  Value eye = b.select(diag_mask(b, F.shape(), 0, Compare::EQ), b.full(1, t, F.shape()), b.zeros(t, F.shape()));
  Value inner = tri_solve(b, F, eye, true, !upper, false, upper ? Trans::Adjoint : Trans::None);
  return {tri_solve(b, F, inner, true, !upper, false, upper ? Trans::None : Trans::Adjoint)};
}

// cholesky_solve's kernel, after it has checked and broadcast its operands:
// A X = B for A = L L^H (or U^H U) is two triangular solves.
Values lower_cholesky_solve_helper(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value B = a[0].as_tensor(), F = a[1].as_tensor();
  bool upper = a[2].as_bool();
  E t = F.dtype();
  check_dtype(t == E::F32 || t == E::F64 || t == E::C64 || t == E::C128, "cholesky_solve_cpu", t);
  Value y = tri_solve(b, F, B, true, !upper, false, upper ? Trans::Adjoint : Trans::None);
  return {tri_solve(b, F, y, true, !upper, false, upper ? Trans::None : Trans::Adjoint)};
}

// ---- isin, bucketize, searchsorted

// The CPU refuses the types its sort-based path cannot order, whichever
// path it takes; a Number counts as the type it would wrap into.
void check_isin_operand(const Arg& a) {
  E t = a.kind == Arg::Kind::Tensor ? a.tensor.dtype()
        : a.number.kind == Number::Kind::Bool    ? E::Bool
        : a.number.kind == Number::Kind::Complex ? E::C128
                                                 : E::F64;
  TPU_CHECK(t != E::Bool && !hlo::is_complex(t), ErrorKind::Runtime,
            "Unsupported input type encountered for isin(): ", scalar_type_name(t));
}

// isin for each overload: a[0] elements, a[1] test elements (either may be a
// Number), a[3] invert. Every element is compared with every test element.
Values lower_isin(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  check_isin_operand(a[0]);
  check_isin_operand(a[1]);
  bool invert = a[3].as_bool();
  E t = result_type(ctx, {&a[0], &a[1]});
  Value x = operand(ctx, a[0], t), y = operand(ctx, a[1], t);
  int64_t m = y.type.numel();
  Value yv = b.reshape(y, {m});
  Shape s = x.shape();
  s.push_back(m);
  Ints xd;
  for (int64_t i = 0; i < x.rank(); ++i) xd.push_back(i);
  Value xe = b.broadcast_in_dim(x, s, xd);
  Value ye = b.broadcast_in_dim(yv, s, {int64_t(s.size()) - 1});
  Value any = b.reduce_or(b.compare(xe, ye, Compare::EQ), {int64_t(s.size()) - 1});
  return {invert ? b.not_(any) : any};
}

// For each value, how many entries of its sorted row are < value (or <= for
// the right side). `seq` is (.., m) with the leading dims of `vals`, or 1-D.
Value count_below(Builder& b, Value seq, Value vals, bool right, bool int32) {
  E t = promote(seq.dtype(), vals.dtype());
  TPU_CHECK(t != E::Bool && !hlo::is_complex(t), ErrorKind::NotImplemented,
            "\"searchsorted_out\" not implemented for '", scalar_type_name(t), "'");
  seq = cast(b, seq, t), vals = cast(b, vals, t);
  int64_t m = seq.shape()[seq.rank() - 1];
  Shape s = vals.shape();
  s.push_back(m);
  int64_t r = s.size();
  Ints vd, sd;
  for (int64_t i = 0; i < vals.rank(); ++i) vd.push_back(i);
  if (seq.rank() == 1) sd = {r - 1};
  else
    for (int64_t i = 0; i < seq.rank() - 1; ++i) sd.push_back(i);
  if (seq.rank() > 1) sd.push_back(r - 1);
  Value ve = b.broadcast_in_dim(vals, s, vd), se = b.broadcast_in_dim(seq, s, sd);
  Value c = b.compare(se, ve, right ? Compare::LE : Compare::LT);
  if (hlo::is_float(t)) {
    // NaN sorts last: it is above every number, and values of NaN are above everything.
    Value nan_v = b.compare(ve, ve, Compare::NE), nan_s = b.compare(se, se, Compare::NE);
    c = b.select(nan_s, b.and_(nan_v, b.full(right ? 1 : 0, E::Bool, s)), b.or_(c, nan_v));
  }
  E out = int32 ? E::I32 : E::I64;
  return b.reduce_sum(b.convert(c, out), {r - 1});
}

// The values searched for: a tensor, or (the .Scalar overloads) a number that
// compares in the type it promotes to with the sequence.
Value search_values(Context& ctx, const Arg& values, const Arg& seq) {
  if (values.kind != Arg::Kind::Number) return values.as_tensor();
  return operand(ctx, values, result_type(ctx, {&seq, &values}));
}

Values lower_bucketize(Context& ctx, const Args& a) {
  Value x = search_values(ctx, a[0], a[1]), bounds = a[1].as_tensor();
  TPU_CHECK(bounds.rank() == 1, ErrorKind::Runtime, "boundaries tensor must be 1 dimension, but got dim(", bounds.rank(), ")");
  return {count_below(ctx.b, bounds, x, a[3].as_bool(), a[2].as_bool())};
}

Values lower_searchsorted(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value seq = a[0].as_tensor(), x = search_values(ctx, a[1], a[0]);
  bool right = a[3].as_bool();
  TPU_CHECK(a[1].kind != Arg::Kind::Number || seq.rank() == 1, ErrorKind::Runtime,
            "torch.searchsorted(): input value can be a scalar only when boundaries tensor dimension is 1, but we got "
            "boundaries tensor dim(", seq.rank(), ") and input value's dim(0) numel(1)");
  if (!a[4].is_none()) {
    TPU_CHECK(!(a[4].s == "left" && right), ErrorKind::Runtime,
              "torch.searchsorted(): side and right can't be set to opposites, got side of left while right was True");
    TPU_CHECK(a[4].s == "left" || a[4].s == "right", ErrorKind::Runtime,
              "torch.searchsorted(): side can only be 'left' or 'right' but got ", a[4].s);
    right = a[4].s == "right";
  }
  if (seq.rank() > 1) {
    TPU_CHECK(seq.rank() == x.rank() && std::equal(seq.shape().begin(), seq.shape().end() - 1, x.shape().begin()),
              ErrorKind::Runtime,
              "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries "
              "tensor and input value tensor must match");
  }
  auto sorter = a[5].opt_tensor();
  // An empty sequence has nothing to reorder (and a gather from it is malformed).
  if (sorter && seq.shape()[seq.rank() - 1] > 0) {
    // Sort the sequence through the sorter (take_along_dim on the last dim).
    int64_t r = seq.rank(), m = seq.shape()[r - 1];
    Value idx = cast(b, *sorter, E::I64);
    Shape is = idx.shape();
    is.push_back(1);
    Value full_idx = b.reshape(idx, is);
    if (r > 1) {
      Values parts;
      for (int64_t d = 0; d < r - 1; ++d) parts.push_back(b.iota({E::I64, is}, d));
      parts.push_back(full_idx);
      full_idx = b.concatenate(parts, r);
    }
    Builder::GatherDims dims;
    dims.collapsed_slice_dims.clear();
    for (int64_t d = 0; d < r; ++d) dims.collapsed_slice_dims.push_back(d);
    dims.start_index_map = r > 1 ? dims.collapsed_slice_dims : Ints{r - 1};
    if (r == 1) dims.collapsed_slice_dims = {0};
    dims.index_vector_dim = r;
    (void)m;
    seq = b.gather(seq, full_idx, dims, Ints(r, 1), idx.shape());
  }
  return {count_below(b, seq, x, right, a[2].as_bool())};
}

// ---- tril_indices / triu_indices (all arguments are ints: constants)

template <bool Upper>
Values lower_tri_indices(Context& ctx, const Args& a) {
  int64_t rows = a[0].as_int(), cols = a[1].as_int(), off = a[2].as_int();
  TPU_CHECK(rows >= 0, ErrorKind::Runtime, "row must be non-negative, got", rows);
  TPU_CHECK(cols >= 0, ErrorKind::Runtime, "col must be non-negative, got", cols);
  E t = a[3].is_none() ? E::I64 : a[3].as_dtype();
  std::vector<double> r, c;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      if (Upper ? j - i >= off : j - i <= off) r.push_back(double(i)), c.push_back(double(j));
  int64_t n = int64_t(r.size());
  if (n == 0) return {ctx.b.zeros(t, {2, 0})};
  Builder& b = ctx.b;
  return {b.concatenate({b.reshape(constant_vector(b, r, t), {1, n}), b.reshape(constant_vector(b, c, t), {1, n})}, 0)};
}

}  // namespace

TPU_LOWERING("aten::_cholesky_solve_helper", lower_cholesky_solve_helper);
TPU_LOWERING("aten::bucketize.Scalar", lower_bucketize);
TPU_LOWERING("aten::bucketize.Tensor", lower_bucketize);
TPU_LOWERING("aten::cholesky_inverse", lower_cholesky_inverse);
TPU_LOWERING("aten::isin.Scalar_Tensor", lower_isin);
TPU_LOWERING("aten::isin.Tensor_Scalar", lower_isin);
TPU_LOWERING("aten::isin.Tensor_Tensor", lower_isin);
TPU_LOWERING("aten::linalg_cholesky_ex", lower_cholesky_ex);
TPU_LOWERING("aten::linalg_cross", lower_linalg_cross);
TPU_LOWERING("aten::linalg_solve_triangular", lower_solve_triangular);
TPU_LOWERING("aten::searchsorted.Scalar", lower_searchsorted);
TPU_LOWERING("aten::searchsorted.Tensor", lower_searchsorted);
TPU_LOWERING("aten::trace", lower_trace);
TPU_LOWERING("aten::triangular_solve", lower_triangular_solve);
TPU_LOWERING("aten::tril_indices", lower_tri_indices<false>);
TPU_LOWERING("aten::triu_indices", lower_tri_indices<true>);
TPU_LOWERING("aten::vdot", lower_vdot);

}  // namespace torch_tpu::lowering
