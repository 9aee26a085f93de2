// Reductions and scans. Every op here is one of a few kinds of combination
// (sum, product, max, min, and, or, xor) applied by one stablehlo.reduce; what
// differs between ATen ops is PyTorch's choice of result dtype, the dims, and
// the checks, which each lowering spells out.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "lowering/common.h"
#include "lowering/sum_kernel.h"
#include "lowering/registry.h"

namespace torch_tpu::lowering {

namespace {

using hlo::Builder;
using hlo::Compare;
using E = ElementType;

bool is_half(E t) { return t == E::F16 || t == E::BF16; }
// PyTorch's kernels accumulate half-precision floats in f32; doing the same
// keeps long sums from drifting away from the CPU result.
E acc_type(E t) { return is_half(t) ? E::F32 : t; }

enum class Kind { Sum, Prod, Max, Min, And, Or, Xor };

Value identity(Builder& b, Kind k, E t) {
  switch (k) {
    case Kind::Sum: return b.constant(0, t);
    case Kind::Prod: return b.constant(1, t);
    case Kind::Max: return b.min_value(t);
    case Kind::Min: return b.max_value(t);
    case Kind::And: return b.constant_bool(true);
    case Kind::Or: return b.constant_bool(false);
    case Kind::Xor: return b.constant(0, t);
  }
  fail(ErrorKind::Runtime, "unknown reduction kind");
}

// Elementwise on equal shapes, so reduce bodies and scans share it. Max and
// min propagate NaN, as torch.max does (see nan_max).
Value combine(Builder& b, Kind k, Value acc, Value x) {
  switch (k) {
    case Kind::Sum: return b.add(acc, x);
    case Kind::Prod: return b.mul(acc, x);
    case Kind::And: return b.and_(acc, x);
    case Kind::Or: return b.or_(acc, x);
    case Kind::Xor: return b.xor_(acc, x);
    case Kind::Max: return nan_max(b, acc, x);
    case Kind::Min: return nan_min(b, acc, x);
  }
  fail(ErrorKind::Runtime, "unknown reduction kind");
}

Value reduce(Builder& b, Kind k, Value x, const std::vector<int64_t>& dims) {
  if (dims.empty()) return x;
  if (k == Kind::Sum) return b.reduce_sum(x, dims);  // in cascades, as PyTorch's CPU sums
  return b.reduce({x}, {identity(b, k, x.dtype())}, dims,
                  [k](Builder& r, const std::vector<Value>& a) {
                    return std::vector<Value>{combine(r, k, a[0], a[1])};
                  })[0];
}

// A reduced value reshaped for keepdim (the reduce drops the dims).
Value keep(Builder& b, Value r, const Shape& in, const std::vector<int64_t>& dims, bool keepdim) {
  return keepdim ? b.reshape(r, reduced_shape(in, dims, true)) : r;
}

// A keepdim-shaped statistic stretched back over the input.
Value spread(Builder& b, Value r, const Shape& in, const std::vector<int64_t>& dims) {
  return broadcast_to(b, b.reshape(r, reduced_shape(in, dims, true)), in);
}

int64_t count(const Shape& s, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= s[d];
  return n;
}

bool is_bool_or_int(E t) { return t == E::Bool || hlo::is_integral(t); }

// sum/prod/cumsum: integers and bools widen to int64 unless a dtype is given.
E widened_type(const Value& x, const Arg& dtype) {
  if (auto d = dtype.opt_dtype()) return *d;
  return is_bool_or_int(x.dtype()) ? E::I64 : x.dtype();
}

bool arg_keepdim(const Arg& a) { return a.kind == Arg::Kind::None ? false : a.as_bool(); }

Value arith(Context& ctx, Kind k, const Arg& self, const Arg& dims_arg, bool keepdim,
            const Arg& dtype) {
  Value x = self.as_tensor();
  E out = widened_type(x, dtype);
  auto dims = reduction_dims(dims_arg, x.rank());
  Value xa = cast(ctx.b, x, acc_type(out));
  std::vector<int64_t> in_order = dims;
  std::sort(in_order.begin(), in_order.end());
  Value r = k == Kind::Sum && !dims.empty() ? sum_by_kernel(ctx, xa, in_order) : reduce(ctx.b, k, xa, dims);
  return cast(ctx.b, keep(ctx.b, r, x.shape(), dims, keepdim), out);
}

Value mean_of(Context& ctx, const Arg& self, const Arg& dims_arg, bool keepdim, const Arg& dtype) {
  Value x = self.as_tensor();
  E out;
  if (auto d = dtype.opt_dtype()) {
    TPU_CHECK(hlo::is_float(*d) || hlo::is_complex(*d), ErrorKind::Runtime,
              "mean(): could not infer output dtype. Optional dtype must be either a floating "
              "point or complex dtype. Got: ",
              scalar_type_name(*d));
    out = *d;
  } else {
    TPU_CHECK(hlo::is_float(x.dtype()) || hlo::is_complex(x.dtype()), ErrorKind::Runtime,
              "mean(): could not infer output dtype. Input dtype must be either a floating "
              "point or complex dtype. Got: ",
              scalar_type_name(x.dtype()));
    out = x.dtype();
  }
  auto dims = reduction_dims(dims_arg, x.rank());
  Builder& b = ctx.b;
  E acc = acc_type(out);
  Value s = reduce(b, Kind::Sum, cast(b, x, acc), dims);
  // An empty reduction divides 0 by 0: NaN, as in PyTorch.
  Value n = b.full(double(count(x.shape(), dims)), acc, s.shape());
  return cast(b, keep(b, b.div(s, n), x.shape(), dims, keepdim), out);
}

// amax/amin/max/min over no elements have no identity in PyTorch. `sep`
// follows the op's name in the message ("amax(): ", but "hash_tensor: ").
void check_nonempty(const char* op, const Value& x, const std::vector<int64_t>& dims, const char* sep = "(): ") {
  for (int64_t d : dims)
    TPU_CHECK(x.shape()[d] != 0, ErrorKind::Index, op, sep, "Expected reduction dim ", d, " to have non-zero size.");
}

// Reducing every dim (no dims given) of an empty tensor: PyTorch asks for a dim.
void check_nonempty_all(const char* op, const Value& x, const char* sep = "(): ") {
  TPU_CHECK(x.type.numel() != 0, ErrorKind::Runtime, op, sep,
            "Expected reduction dim to be specified for input.numel() == 0. Specify the "
            "reduction dim with the 'dim' argument.");
}

bool names_no_dims(const Arg& dims_arg) {
  return dims_arg.kind == Arg::Kind::None || (dims_arg.kind == Arg::Kind::IntList && dims_arg.ints.empty());
}

Value extreme(Context& ctx, Kind k, const char* op, const Arg& self, const Arg& dims_arg,
              bool keepdim) {
  Value x = self.as_tensor();
  if (names_no_dims(dims_arg)) check_nonempty_all(op, x);
  auto dims = reduction_dims(dims_arg, x.rank());
  check_nonempty(op, x, dims);
  return keep(ctx.b, reduce(ctx.b, k, x, dims), x.shape(), dims, keepdim);
}

Value extreme_all(Context& ctx, Kind k, const char* op, const Arg& self) {
  Value x = self.as_tensor();
  check_nonempty_all(op, x);
  return reduce(ctx.b, k, x, reduction_dims(Arg{}, x.rank()));
}

// aminmax: (min, max) in one lowering; its messages differ from amax's.
std::vector<Value> min_and_max(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  bool keepdim = arg_keepdim(a[2]);
  std::vector<int64_t> dims;
  if (a[1].is_none()) {
    TPU_CHECK(x.type.numel() != 0, ErrorKind::Runtime,
              "aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
              "identity.");
    dims = reduction_dims(Arg{}, x.rank());
  } else {
    dims = reduction_dims(a[1], x.rank());
    for (int64_t d : dims)
      TPU_CHECK(x.shape()[d] != 0, ErrorKind::Index, "aminmax: Expected reduction dim ", d,
                " to have non-zero size.");
  }
  return {keep(b, reduce(b, Kind::Min, x, dims), x.shape(), dims, keepdim),
          keep(b, reduce(b, Kind::Max, x, dims), x.shape(), dims, keepdim)};
}

Value count_nonzero_of(Context& ctx, const Value& x, const Arg& dims_arg) {
  Builder& b = ctx.b;
  Value nonzero = b.compare(x, b.zeros(x.dtype(), x.shape()), Compare::NE);
  return reduce(b, Kind::Sum, b.convert(nonzero, E::I64), reduction_dims(dims_arg, x.rank()));
}

// (value, index) pairs reduced together along one dim. Ties go to the lower
// index and NaN beats every number (the first NaN wins), as in PyTorch.
std::pair<Value, Value> arg_reduce(Builder& b, Kind k, Value x, int64_t dim) {
  E t = x.dtype();
  Value idx = b.iota(hlo::TensorType{E::I64, x.shape()}, dim);
  // The init's index is the largest, so that it loses every tie.
  Value init_v = identity(b, k, t);
  Value init_i = b.constant_int(std::numeric_limits<int64_t>::max(), E::I64);
  bool is_float = hlo::is_float(t);
  auto outs = b.reduce(
      {x, idx}, {init_v, init_i}, {dim}, [k, is_float](Builder& r, const std::vector<Value>& a) {
        Value av = a[0], ai = a[1], xv = a[2], xi = a[3];
        Value better = r.compare(xv, av, k == Kind::Max ? Compare::GT : Compare::LT);
        Value earlier = r.compare(xi, ai, Compare::LT);
        Value take = r.or_(better, r.and_(r.compare(xv, av, Compare::EQ), earlier));
        if (is_float) {
          Value a_nan = is_nan(r, av), x_nan = is_nan(r, xv);
          take = r.select(a_nan, r.and_(x_nan, earlier), r.or_(x_nan, take));
        }
        return std::vector<Value>{r.select(take, xv, av), r.select(take, xi, ai)};
      });
  return {outs[0], outs[1]};
}

std::vector<Value> extreme_dim(Context& ctx, Kind k, const char* op, const Args& args) {
  Value x = args[0].as_tensor();
  int64_t dim = wrap_dim(args[1].as_int(), x.rank());
  check_dim_mask_rank(x.rank());
  bool keepdim = arg_keepdim(args[2]);
  Builder& b = ctx.b;
  if (x.rank() == 0) return {x, b.constant_int(0, E::I64)};
  check_nonempty(op, x, {dim});
  auto [v, i] = arg_reduce(b, k, x, dim);
  return {keep(b, v, x.shape(), {dim}, keepdim), keep(b, i, x.shape(), {dim}, keepdim)};
}

Value arg_index(Context& ctx, Kind k, const char* op, const Args& args) {
  Value x = args[0].as_tensor();
  bool keepdim = arg_keepdim(args[2]);
  Builder& b = ctx.b;
  if (args[1].is_none()) {
    TPU_CHECK(x.type.numel() != 0, ErrorKind::Index, op,
              "(): Expected reduction dim to be specified for input.numel() == 0.");
    Value flat = b.reshape(x, {x.type.numel()});
    Value i = arg_reduce(b, k, flat, 0).second;
    return keepdim ? b.reshape(i, Shape(x.rank(), 1)) : i;
  }
  int64_t dim = wrap_dim(args[1].as_int(), x.rank());
  check_dim_mask_rank(x.rank());
  if (x.rank() == 0) return b.constant_int(0, E::I64);
  check_nonempty(op, x, {dim});
  return keep(b, arg_reduce(b, k, x, dim).second, x.shape(), {dim}, keepdim);
}

// any/all: bool results, except that uint8 inputs give uint8 (PyTorch keeps
// that legacy behaviour). An empty dim list reduces nothing (unlike sum's,
// which reduces everything): the result is the elementwise truth value.
Value logical(Context& ctx, Kind k, const Arg& self, const Arg& dims_arg, bool keepdim) {
  Builder& b = ctx.b;
  Value x = self.as_tensor();
  Value p = x.dtype() == E::Bool ? x : b.compare(x, b.zeros(x.dtype(), x.shape()), Compare::NE);
  check_dim_mask_rank(x.rank());
  if (dims_arg.kind == Arg::Kind::IntList && dims_arg.ints.empty())
    return x.dtype() == E::U8 ? b.convert(p, E::U8) : p;
  auto dims = reduction_dims(dims_arg, x.rank());
  Value r = keep(b, reduce(b, k, p, dims), x.shape(), dims, keepdim);
  return x.dtype() == E::U8 ? b.convert(r, E::U8) : r;
}

// var/std and their _mean forms: (statistic, mean) in the input's dtype.
std::pair<Value, Value> moments(Context& ctx, const Args& args, bool take_sqrt) {
  Builder& b = ctx.b;
  Value x = args[0].as_tensor();
  bool cplx = hlo::is_complex(x.dtype());
  TPU_CHECK(hlo::is_float(x.dtype()) || cplx, ErrorKind::Runtime,
            "std and var only support floating point and complex dtypes");
  auto dims = reduction_dims(args[1], x.rank());
  bool keepdim = arg_keepdim(args[3]);
  E acc = acc_type(x.dtype());
  // Complex inputs: the mean is complex, the variance real (sum of |x - mean|^2).
  E racc = cplx ? (acc == E::C128 ? E::F64 : E::F32) : acc;
  Value xa = cast(b, x, acc);
  Value sum = reduce(b, Kind::Sum, xa, dims);
  Value n = b.full(double(count(x.shape(), dims)), racc, sum.shape());
  Value mean = b.div(sum, cplx ? b.complex(n, b.zeros(racc, n.shape())) : n);
  Value d = b.sub(xa, spread(b, mean, x.shape(), dims));
  Value sq = cplx ? b.add(b.mul(b.real(d), b.real(d)), b.mul(b.imag(d), b.imag(d))) : b.mul(d, d);
  Value ss = reduce(b, Kind::Sum, sq, dims);
  Value c = args[2].is_none() ? b.constant(1, racc) : ctx.number(args[2], racc);
  // PyTorch clamps the degrees of freedom at zero (giving inf or NaN).
  Value dof = b.max(b.sub(n, broadcast_to(b, c, n.shape())), b.zeros(racc, n.shape()));
  Value var = b.div(ss, dof);
  if (take_sqrt) var = b.sqrt(var);
  E var_type = cplx ? (x.dtype() == E::C128 ? E::F64 : E::F32) : x.dtype();
  return {cast(b, keep(b, var, x.shape(), dims, keepdim), var_type),
          cast(b, keep(b, mean, x.shape(), dims, keepdim), x.dtype())};
}

Value logsumexp_of(Context& ctx, const Arg& self, const Arg& dims_arg, bool keepdim) {
  Builder& b = ctx.b;
  Value x = self.as_tensor();
  E out = to_float(ctx, x.dtype());
  E acc = acc_type(out);
  Value xa = cast(b, x, acc);
  auto dims = reduction_dims(dims_arg, x.rank());
  if (dims.empty()) return cast(b, xa, out);
  // Complex inputs shift by the largest real part, as PyTorch does.
  bool cplx = hlo::is_complex(acc);
  Value m = reduce(b, Kind::Max, cplx ? b.real(xa) : xa, dims);
  E racc = m.dtype();
  // Infinite maxima would make x - m NaN; PyTorch shifts by 0 there instead.
  Value inf = b.full(std::numeric_limits<double>::infinity(), racc, m.shape());
  Value shift = b.select(b.compare(b.abs(m), inf, Compare::EQ), b.zeros(racc, m.shape()), m);
  if (cplx) shift = b.complex(shift, b.zeros(racc, shift.shape()));
  Value e = b.exp(b.sub(xa, spread(b, shift, x.shape(), dims)));
  Value r = b.add(b.log(reduce(b, Kind::Sum, e, dims)), shift);
  return cast(b, keep(b, r, x.shape(), dims, keepdim), out);
}

// An associative combination of the running values (earlier segment first)
// with the values at the current position, elementwise over whole arrays.
using ScanFn = std::function<std::vector<Value>(Builder&, const std::vector<Value>& earlier,
                                                const std::vector<Value>& later)>;

// Inclusive scan by doubling (Hillis-Steele): log2(n) shifted combines, each
// linear, instead of a reduce_window whose cost grows with n^2. `fill` holds
// each array's rank-0 identity, shifted in at the front.
std::vector<Value> scan(Builder& b, std::vector<Value> xs, int64_t dim,
                        const std::vector<Value>& fill, const ScanFn& fn) {
  const Shape shape = xs[0].shape();  // a copy: xs is reassigned below
  int64_t n = shape[dim], rank = xs[0].rank();
  std::vector<int64_t> start(rank, 0), strides(rank, 1), zeros(rank, 0);
  for (int64_t s = 1; s < n; s *= 2) {
    std::vector<int64_t> limit = shape;
    limit[dim] = n - s;
    std::vector<int64_t> low = zeros;
    low[dim] = s;
    std::vector<Value> shifted;
    for (size_t i = 0; i < xs.size(); ++i)
      shifted.push_back(b.pad(b.slice(xs[i], start, limit, strides), fill[i], low, zeros, zeros));
    xs = fn(b, shifted, xs);
  }
  return xs;
}

Value cumulative(Context& ctx, Kind k, const Args& args) {
  Builder& b = ctx.b;
  Value x = args[0].as_tensor();
  int64_t dim = wrap_dim(args[1].as_int(), x.rank());
  E out = widened_type(x, args[2]);
  Value xa = cast(b, x, acc_type(out));
  if (x.rank() > 0)
    xa = scan(b, {xa}, dim, {identity(b, k, xa.dtype())},
              [k](Builder& r, const std::vector<Value>& e, const std::vector<Value>& l) {
                return std::vector<Value>{combine(r, k, e[0], l[0])};
              })[0];
  return cast(b, xa, out);
}

// cummax/cummin: (values, int64 indices). NaN ranks above every number and
// among equals (NaNs included) the later index wins, as in PyTorch.
std::vector<Value> cumulative_extreme(Context& ctx, Kind k, const Args& args) {
  Builder& b = ctx.b;
  Value x = args[0].as_tensor();
  int64_t dim = wrap_dim(args[1].as_int(), x.rank());
  if (x.rank() == 0) return {x, b.constant_int(0, E::I64)};
  Value idx = b.iota(hlo::TensorType{E::I64, x.shape()}, dim);
  bool is_float = hlo::is_float(x.dtype());
  return scan(b, {x, idx}, dim, {identity(b, k, x.dtype()), b.constant_int(0, E::I64)},
              [k, is_float](Builder& r, const std::vector<Value>& e, const std::vector<Value>& l) {
                Value later = r.compare(l[0], e[0], k == Kind::Max ? Compare::GE : Compare::LE);
                if (is_float)
                  later = r.or_(is_nan(r, l[0]), r.and_(r.not_(is_nan(r, e[0])), later));
                return std::vector<Value>{r.select(later, l[0], e[0]), r.select(later, l[1], e[1])};
              });
}

// log(exp(a) + exp(b)) without overflow; infinite maxima (both -inf, or a
// +inf) pass through instead of producing inf - inf.
Value log_add_exp(Builder& b, Value a, Value c) {
  E t = a.dtype();
  const Shape& s = a.shape();
  Value m = b.max(a, c);
  Value r = b.add(m, b.log1p(b.exp(b.sub(b.min(a, c), m))));
  Value inf = b.full(std::numeric_limits<double>::infinity(), t, s);
  r = b.select(b.compare(b.abs(m), inf, Compare::EQ), m, r);
  return b.select(b.or_(is_nan(b, a), is_nan(b, c)), b.add(a, c), r);
}

Value log_cumsum_exp(Context& ctx, const Args& args) {
  Builder& b = ctx.b;
  Value x = args[0].as_tensor();
  int64_t dim = wrap_dim(args[1].as_int(), x.rank());
  TPU_CHECK(hlo::is_float(x.dtype()), ErrorKind::NotImplemented,
            "\"logcumsumexp_out_cpu\" not implemented for '", scalar_type_name(x.dtype()), "'");
  E acc = acc_type(x.dtype());
  Value xa = cast(b, x, acc);
  if (x.rank() > 0)
    xa = scan(b, {xa}, dim, {b.min_value(acc)},
              [](Builder& r, const std::vector<Value>& e, const std::vector<Value>& l) {
                return std::vector<Value>{log_add_exp(r, e[0], l[0])};
              })[0];
  return cast(b, xa, x.dtype());
}

}  // namespace

Value vector_norm(Context& ctx, Value x, double ord, const Arg& dims_arg, bool keepdim,
                  std::optional<E> dtype) {
  Builder& b = ctx.b;
  E in = dtype ? *dtype : x.dtype();
  TPU_CHECK(hlo::is_float(in) || hlo::is_complex(in), ErrorKind::Runtime,
            "linalg.vector_norm: Expected a floating point or complex tensor as input. Got ",
            scalar_type_name(x.dtype()));
  check_dim_mask_rank(x.rank());
  auto dims = reduction_dims(dims_arg, x.rank());
  if (std::isinf(ord))
    TPU_CHECK(count(x.shape(), dims) != 0, ErrorKind::Runtime,
              "linalg.vector_norm cannot compute the ", ord > 0 ? "inf" : "-inf",
              " norm on an empty tensor because the operation does not have an identity");
  Value a = b.abs(cast(b, x, in));
  E acc = acc_type(a.dtype());
  E out = a.dtype();
  a = cast(b, a, acc);
  Value r;
  if (std::isinf(ord)) {
    r = reduce(b, ord > 0 ? Kind::Max : Kind::Min, a, dims);
  } else if (ord == 0) {
    r = reduce(b, Kind::Sum,
               b.convert(b.compare(a, b.zeros(acc, a.shape()), Compare::NE), acc), dims);
  } else if (ord == 1) {
    r = reduce(b, Kind::Sum, a, dims);
  } else if (ord == 2) {
    r = b.sqrt(reduce(b, Kind::Sum, b.mul(a, a), dims));
  } else {
    Value s = reduce(b, Kind::Sum, b.pow(a, b.full(ord, acc, a.shape())), dims);
    r = b.pow(s, b.full(1.0 / ord, acc, s.shape()));
  }
  return cast(b, keep(b, r, x.shape(), dims, keepdim), out);
}

namespace {

// ---- lowerings, one per ATen overload

std::vector<Value> lower_all(Context& ctx, const Args& a) {
  return {logical(ctx, Kind::And, a[0], Arg{}, false)};
}
std::vector<Value> lower_all_dim(Context& ctx, const Args& a) {
  return {logical(ctx, Kind::And, a[0], a[1], arg_keepdim(a[2]))};
}
std::vector<Value> lower_amax(Context& ctx, const Args& a) {
  return {extreme(ctx, Kind::Max, "amax", a[0], a[1], arg_keepdim(a[2]))};
}
std::vector<Value> lower_amin(Context& ctx, const Args& a) {
  return {extreme(ctx, Kind::Min, "amin", a[0], a[1], arg_keepdim(a[2]))};
}
std::vector<Value> lower_aminmax(Context& ctx, const Args& a) { return min_and_max(ctx, a); }
std::vector<Value> lower_any(Context& ctx, const Args& a) {
  return {logical(ctx, Kind::Or, a[0], Arg{}, false)};
}
std::vector<Value> lower_any_dim(Context& ctx, const Args& a) {
  return {logical(ctx, Kind::Or, a[0], a[1], arg_keepdim(a[2]))};
}
std::vector<Value> lower_argmax(Context& ctx, const Args& a) {
  return {arg_index(ctx, Kind::Max, "argmax", a)};
}
std::vector<Value> lower_argmin(Context& ctx, const Args& a) {
  return {arg_index(ctx, Kind::Min, "argmin", a)};
}
std::vector<Value> lower_count_nonzero(Context& ctx, const Args& a) {
  return {count_nonzero_of(ctx, a[0].as_tensor(), a[1])};
}
std::vector<Value> lower_cummax(Context& ctx, const Args& a) {
  return cumulative_extreme(ctx, Kind::Max, a);
}
std::vector<Value> lower_cummin(Context& ctx, const Args& a) {
  return cumulative_extreme(ctx, Kind::Min, a);
}
std::vector<Value> lower_cumprod(Context& ctx, const Args& a) {
  return {cumulative(ctx, Kind::Prod, a)};
}
std::vector<Value> lower_cumsum(Context& ctx, const Args& a) {
  return {cumulative(ctx, Kind::Sum, a)};
}
std::vector<Value> lower_foreach_norm(Context& ctx, const Args& a) {
  std::vector<Value> out;
  for (const auto& t : a[0].tensors) {
    TPU_CHECK(t.has_value(), ErrorKind::Runtime, "_foreach_norm: the tensor list has a hole");
    out.push_back(vector_norm(ctx, *t, a[1].number.as_double(), Arg{}, false, a[2].opt_dtype()));
  }
  return out;
}
std::vector<Value> lower_linalg_vector_norm(Context& ctx, const Args& a) {
  return {vector_norm(ctx, a[0].as_tensor(), a[1].number.as_double(), a[2], arg_keepdim(a[3]),
                      a[4].opt_dtype())};
}
// norm.ScalarOpt_dim(self, p=None, dim, keepdim[, *, dtype]): the vector
// norm, p = 2 by default, computed in dtype when given.
std::vector<Value> lower_norm_scalaropt_dim(Context& ctx, const Args& a) {
  double ord = a[1].is_none() ? 2.0 : a[1].number.as_double();
  std::optional<E> dtype = a.size() > 4 ? a[4].opt_dtype() : std::nullopt;
  return {vector_norm(ctx, a[0].as_tensor(), ord, a[2], arg_keepdim(a[3]), dtype)};
}
// renorm(self, p, dim, maxnorm): each slice along `dim` whose p-norm exceeds maxnorm
// is scaled to it (by maxnorm / (norm + 1e-7), ATen's factor). Half types take the
// norm in f32 and the factor in their own type, as ATen does.
std::vector<Value> lower_renorm(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  double p = a[1].number.as_double(), maxnorm = a[3].number.as_double();
  TPU_CHECK(x.rank() > 1, ErrorKind::Runtime, "renorm: input needs at least 2 dimensions, got ", x.rank(),
            " dimensions");
  TPU_CHECK(p > 0, ErrorKind::Runtime, "renorm: non-positive-norm not supported");
  TPU_CHECK(maxnorm >= 0, ErrorKind::Runtime, "renorm: expected maxnorm to be >= 0 but got ", maxnorm);
  int64_t dim = wrap_dim(a[2].as_int(), x.rank());
  Arg others;
  others.kind = Arg::Kind::IntList;
  for (int64_t d = 0; d < x.rank(); ++d)
    if (d != dim) others.ints.push_back(d);
  E t = x.dtype();
  std::optional<E> acc;
  if (t == E::F16 || t == E::BF16) acc = E::F32;
  Value norm = vector_norm(ctx, x, p, others, true, acc);
  E nt = norm.dtype();
  Value factor = b.select(b.compare(norm, b.full(maxnorm, nt, norm.shape()), Compare::GT),
                          b.div(b.full(maxnorm, nt, norm.shape()), b.add(norm, b.full(1e-7, nt, norm.shape()))),
                          b.full(1, nt, norm.shape()));
  factor = broadcast_to(b, cast(b, factor, t), x.shape());
  E op = opmath(t);
  return {cast(b, b.mul(cast(b, x, op), cast(b, factor, op)), t)};
}
// hash_tensor(self, dim=[], *, keepdim, mode): mode 0 xors the elements as
// 64-bit words: floats as the bits of their double value, signed integers
// sign-extended, unsigned ones and bools zero-extended (the CPU's xor_sum).
std::vector<Value> lower_hash_tensor(Context& ctx, const Args& a) {
  Builder& b = ctx.b;
  Value x = a[0].as_tensor();
  int64_t mode = a[3].as_int();
  TPU_CHECK(mode == 0, ErrorKind::Runtime, "Unknown hash_tensor mode: ", mode);
  TPU_CHECK(!hlo::is_complex(x.dtype()), ErrorKind::NotImplemented, "\"xor_sum\" not implemented for '",
            scalar_type_name(x.dtype()), "'");
  hlo::TensorType words{E::U64, x.shape()};
  Value w = hlo::is_float(x.dtype())        ? b.bitcast_convert(b.convert(x, E::F64), words)
            : hlo::is_signed_int(x.dtype()) ? b.bitcast_convert(b.convert(x, E::I64), words)
                                            : b.convert(x, E::U64);
  if (names_no_dims(a[1])) check_nonempty_all("hash_tensor", x, ": ");
  check_dim_mask_rank(x.rank());
  auto dims = reduction_dims(a[1], x.rank());
  check_nonempty("hash_tensor", x, dims, ": ");
  return {keep(b, reduce(b, Kind::Xor, w, dims), x.shape(), dims, arg_keepdim(a[2]))};
}
std::vector<Value> lower_logcumsumexp(Context& ctx, const Args& a) {
  return {log_cumsum_exp(ctx, a)};
}
std::vector<Value> lower_logsumexp(Context& ctx, const Args& a) {
  return {logsumexp_of(ctx, a[0], a[1], arg_keepdim(a[2]))};
}
std::vector<Value> lower_max(Context& ctx, const Args& a) {
  return {extreme_all(ctx, Kind::Max, "max", a[0])};
}
std::vector<Value> lower_max_dim(Context& ctx, const Args& a) {
  return extreme_dim(ctx, Kind::Max, "max", a);
}
std::vector<Value> lower_mean(Context& ctx, const Args& a) {
  return {mean_of(ctx, a[0], Arg{}, false, a[1])};
}
std::vector<Value> lower_mean_dim(Context& ctx, const Args& a) {
  return {mean_of(ctx, a[0], a[1], arg_keepdim(a[2]), a[3])};
}
std::vector<Value> lower_min(Context& ctx, const Args& a) {
  return {extreme_all(ctx, Kind::Min, "min", a[0])};
}
std::vector<Value> lower_min_dim(Context& ctx, const Args& a) {
  return extreme_dim(ctx, Kind::Min, "min", a);
}
// NaNs count as zero; integers have none.
std::vector<Value> lower_nansum(Context& ctx, const Args& a) {
  Arg clean = a[0];
  Value x = clean.as_tensor();
  if (hlo::is_float(x.dtype()))
    clean.tensor = ctx.b.select(is_nan(ctx.b, x), ctx.b.zeros(x.dtype(), x.shape()), x);
  return {arith(ctx, Kind::Sum, clean, a[1], arg_keepdim(a[2]), a[3])};
}
std::vector<Value> lower_prod(Context& ctx, const Args& a) {
  return {arith(ctx, Kind::Prod, a[0], Arg{}, false, a[1])};
}
std::vector<Value> lower_prod_dim(Context& ctx, const Args& a) {
  return {arith(ctx, Kind::Prod, a[0], a[1], arg_keepdim(a[2]), a[3])};
}
std::vector<Value> lower_std(Context& ctx, const Args& a) { return {moments(ctx, a, true).first}; }
std::vector<Value> lower_std_mean(Context& ctx, const Args& a) {
  auto [s, m] = moments(ctx, a, true);
  return {s, m};
}
std::vector<Value> lower_sum(Context& ctx, const Args& a) {
  return {arith(ctx, Kind::Sum, a[0], Arg{}, false, a[1])};
}
std::vector<Value> lower_sum_dim(Context& ctx, const Args& a) {
  return {arith(ctx, Kind::Sum, a[0], a[1], arg_keepdim(a[2]), a[3])};
}
std::vector<Value> lower_var(Context& ctx, const Args& a) { return {moments(ctx, a, false).first}; }
std::vector<Value> lower_var_mean(Context& ctx, const Args& a) {
  auto [v, m] = moments(ctx, a, false);
  return {v, m};
}

}  // namespace

TPU_LOWERING("aten::_foreach_norm.Scalar", lower_foreach_norm, /*static_numbers=*/true);
TPU_LOWERING("aten::all", lower_all);
TPU_LOWERING("aten::all.dim", lower_all_dim);
TPU_LOWERING("aten::all.dims", lower_all_dim);
TPU_LOWERING("aten::amax", lower_amax);
TPU_LOWERING("aten::amin", lower_amin);
TPU_LOWERING("aten::aminmax", lower_aminmax);
TPU_LOWERING("aten::any", lower_any);
TPU_LOWERING("aten::any.dim", lower_any_dim);
TPU_LOWERING("aten::any.dims", lower_any_dim);
TPU_LOWERING("aten::argmax", lower_argmax);
TPU_LOWERING("aten::argmin", lower_argmin);
TPU_LOWERING("aten::count_nonzero", lower_count_nonzero);
TPU_LOWERING("aten::count_nonzero.dim_IntList", lower_count_nonzero);
TPU_LOWERING("aten::cummax", lower_cummax);
TPU_LOWERING("aten::cummin", lower_cummin);
TPU_LOWERING("aten::cumprod", lower_cumprod);
TPU_LOWERING("aten::cumsum", lower_cumsum);
TPU_LOWERING("aten::hash_tensor", lower_hash_tensor);
TPU_LOWERING("aten::linalg_vector_norm", lower_linalg_vector_norm, /*static_numbers=*/true);
TPU_LOWERING("aten::logcumsumexp", lower_logcumsumexp);
TPU_LOWERING("aten::logsumexp", lower_logsumexp);
TPU_LOWERING("aten::max", lower_max);
TPU_LOWERING("aten::max.dim", lower_max_dim);
TPU_LOWERING("aten::mean", lower_mean);
TPU_LOWERING("aten::mean.dim", lower_mean_dim);
TPU_LOWERING("aten::min", lower_min);
TPU_LOWERING("aten::min.dim", lower_min_dim);
TPU_LOWERING("aten::nansum", lower_nansum);
TPU_LOWERING("aten::norm.ScalarOpt_dim", lower_norm_scalaropt_dim, /*static_numbers=*/true);
TPU_LOWERING("aten::norm.ScalarOpt_dim_dtype", lower_norm_scalaropt_dim, /*static_numbers=*/true);
TPU_LOWERING("aten::prod", lower_prod);
TPU_LOWERING("aten::prod.dim_int", lower_prod_dim);
TPU_LOWERING("aten::renorm", lower_renorm, /*static_numbers=*/true);
TPU_LOWERING("aten::std.correction", lower_std);
TPU_LOWERING("aten::std_mean.correction", lower_std_mean);
TPU_LOWERING("aten::sum", lower_sum);
TPU_LOWERING("aten::sum.dim_IntList", lower_sum_dim);
TPU_LOWERING("aten::var.correction", lower_var);
TPU_LOWERING("aten::var_mean.correction", lower_var_mean);

}  // namespace torch_tpu::lowering
