#include "lowering/common.h"

#include <algorithm>
#include <cmath>

namespace torch_tpu::lowering {

namespace {

int category(ElementType t) {
  if (t == ElementType::Bool) return 0;
  if (hlo::is_integral(t)) return 1;
  if (hlo::is_float(t)) return 2;
  return 3;
}

ElementType number_type(const Context& ctx, const Number& n) {
  switch (n.kind) {
    case Number::Kind::Bool: return ElementType::Bool;
    case Number::Kind::Int: return ElementType::I64;
    case Number::Kind::Float: return ctx.default_float;
    case Number::Kind::Complex:
      return ctx.default_float == ElementType::F64 ? ElementType::C128 : ElementType::C64;
  }
  return ElementType::I64;
}

// A group's running result: undefined until the first member.
struct Group {
  std::optional<ElementType> t;
  void add(ElementType x) { t = t ? promote(*t, x) : x; }
};

std::optional<ElementType> combine(std::optional<ElementType> higher,
                                   std::optional<ElementType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  int ch = category(*higher), cl = category(*lower);
  if (ch >= cl) return higher;
  // The lower-priority group has a higher category: it lifts the category
  // but the width comes from the default of that category where it is a
  // number, or from promotion otherwise.
  if (cl == 3 && ch == 2)
    return *higher == ElementType::F64 ? ElementType::C128 : ElementType::C64;
  return promote(*higher, *lower);
}

}  // namespace

ElementType promote(ElementType a, ElementType b) {
  if (a == b) return a;
  int ca = category(a), cb = category(b);
  if (ca != cb) {
    if (ca > cb) return (ca == 3 && cb == 2 && b == ElementType::F64) ? ElementType::C128 : a;
    return (cb == 3 && ca == 2 && a == ElementType::F64) ? ElementType::C128 : b;
  }
  using E = ElementType;
  if (ca == 1) {
    bool ua = hlo::is_unsigned(a), ub = hlo::is_unsigned(b);
    if (ua == ub) return hlo::byte_size(a) >= hlo::byte_size(b) ? a : b;
    // uint8 with a signed type: the signed type if wider, else int16.
    E u = ua ? a : b, s = ua ? b : a;
    if (hlo::byte_size(s) > hlo::byte_size(u)) return s;
    TPU_CHECK(u == E::U8, ErrorKind::Type, "promotion of ", hlo::short_name(a), " and ",
              hlo::short_name(b), " is not supported");
    return E::I16;
  }
  if (ca == 2) {
    if ((a == E::F16 && b == E::BF16) || (a == E::BF16 && b == E::F16)) return E::F32;
    return hlo::byte_size(a) >= hlo::byte_size(b) ? a : b;
  }
  return (a == E::C128 || b == E::C128) ? E::C128 : E::C64;
}

ElementType result_type(const Context& ctx, const std::vector<const Arg*>& operands) {
  Group dim, zero, wrapped;
  for (const Arg* a : operands) {
    if (a->kind == Arg::Kind::Number) {
      wrapped.add(number_type(ctx, a->number));
    } else if (a->kind == Arg::Kind::Tensor) {
      if (a->wrapped_number) {
        Number n;
        int c = category(a->tensor.dtype());
        n.kind = c == 0 ? Number::Kind::Bool
                 : c == 1 ? Number::Kind::Int
                 : c == 2 ? Number::Kind::Float
                          : Number::Kind::Complex;
        wrapped.add(number_type(ctx, n));
      } else if (a->tensor.rank() == 0) {
        zero.add(a->tensor.dtype());
      } else {
        dim.add(a->tensor.dtype());
      }
    }
  }
  auto r = combine(dim.t, combine(zero.t, wrapped.t));
  TPU_CHECK(r.has_value(), ErrorKind::Type, "result_type needs at least one operand");
  return *r;
}

bool can_cast(ElementType from, ElementType to) {
  int cf = category(from), ct = category(to);
  if (cf == 3 && ct != 3) return false;
  if (cf == 2 && ct < 2) return false;
  if (cf != 0 && ct == 0) return false;
  return true;
}

ElementType to_float(const Context& ctx, ElementType t) {
  return category(t) < 2 ? ctx.default_float : t;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    TPU_CHECK(da == db || da == 1 || db == 1, ErrorKind::Runtime, "The size of tensor a (", da,
              ") must match the size of tensor b (", db, ") at non-singleton dimension ", i);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Value broadcast_to(hlo::Builder& b, Value v, const Shape& shape) {
  if (v.shape() == shape) return v;
  TPU_CHECK(v.rank() <= static_cast<int64_t>(shape.size()), ErrorKind::Runtime,
            "cannot broadcast ", hlo::shape_str(v.shape()), " to ", hlo::shape_str(shape));
  int64_t lead = static_cast<int64_t>(shape.size()) - v.rank();
  // Size-1 dims that are stretched must go through a reshape first, since
  // broadcast_in_dim only stretches dims of size 1 it maps explicitly.
  std::vector<int64_t> dims(v.rank());
  for (int64_t i = 0; i < v.rank(); ++i) {
    dims[i] = lead + i;
    TPU_CHECK(v.shape()[i] == 1 || v.shape()[i] == shape[lead + i], ErrorKind::Runtime,
              "The expanded size of the tensor (", shape[lead + i],
              ") must match the existing size (", v.shape()[i], ") at non-singleton dimension ",
              lead + i, ".  Target sizes: ", hlo::shape_str(shape),
              ".  Tensor sizes: ", hlo::shape_str(v.shape()));
  }
  return b.broadcast_in_dim(v, shape, dims);
}

int64_t wrap_dim(int64_t dim, int64_t rank) {
  int64_t r = std::max<int64_t>(rank, 1);
  TPU_CHECK(dim >= -r && dim < r, ErrorKind::Index, "Dimension out of range (expected to be in range of [",
            -r, ", ", r - 1, "], but got ", dim, ")");
  return dim < 0 ? dim + r : dim;
}

std::vector<int64_t> wrap_dims(const std::vector<int64_t>& dims, int64_t rank) {
  std::vector<int64_t> out;
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, rank);
    TPU_CHECK(std::find(out.begin(), out.end(), w) == out.end(), ErrorKind::Runtime, "dim ", w,
              " appears multiple times in the list of dims");
    if (rank > 0) out.push_back(w);
  }
  return out;
}

// Float -> integer conversion as the CPU (x86-64) does it. XLA's convert
// saturates; the CPU truncates toward zero through a 32- or 64-bit cvtt
// instruction whose out-of-range and NaN result is the "integer indefinite"
// INT_MIN, then keeps the low bits of that integer (so it wraps):
//   int64, uint8           <- via int64 (out of range / NaN / inf -> INT64_MIN)
//   int8, int16, int32,
//   uint16                 <- via int32 (out of range / NaN / inf -> INT32_MIN)
// uint32/uint64 keep XLA's conversion (the CPU's sequence for them is
// compiler-specific and those dtypes have few ops).
static Value float_to_int(hlo::Builder& b, Value v, ElementType t) {
  using E = ElementType;
  if (t == E::U32 || t == E::U64) return b.convert(v, t);
  bool wide = t == E::I64 || t == E::U8;
  E mid = wide ? E::I64 : E::I32;
  // Range checks in f32 or f64 (exact for every half value; f16 cannot hold 2^31).
  E ct = v.dtype() == E::F64 ? E::F64 : E::F32;
  Value x = v.dtype() == ct ? v : b.convert(v, ct);
  double lim = wide ? 9223372036854775808.0 : 2147483648.0;
  Value ok = b.and_(b.compare(x, b.full(-lim, ct, x.shape()), hlo::Compare::GE),
                    b.compare(x, b.full(lim, ct, x.shape()), hlo::Compare::LT));
  Value in = b.convert(b.select(ok, x, b.zeros(ct, x.shape())), mid);
  Value indefinite = b.min_value(mid);
  if (x.rank() > 0) indefinite = b.broadcast_in_dim(indefinite, x.shape(), {});
  Value r = b.select(ok, in, indefinite);
  return r.dtype() == t ? r : b.convert(r, t);
}

Value cast(hlo::Builder& b, Value v, ElementType t) {
  if (v.dtype() == t) return v;
  // PyTorch discards the imaginary part (with a warning on the host side).
  if (hlo::is_complex(v.dtype()) && !hlo::is_complex(t)) v = b.real(v);
  if (v.dtype() == t) return v;
  if (hlo::is_float(v.dtype()) && hlo::is_integral(t) && t != ElementType::Bool)
    return float_to_int(b, v, t);
  return b.convert(v, t);
}

Value is_nan(hlo::Builder& b, Value x) { return b.compare(x, x, hlo::Compare::NE); }
Value is_inf(hlo::Builder& b, Value x) { return b.compare(b.abs(x), splat(b, INFINITY, x), hlo::Compare::EQ); }

Value keep_rows(hlo::Builder& b, Value keep, Value x) {
  return b.select(b.broadcast_in_dim(keep, x.shape(), {0}), x, b.zeros(x.dtype(), x.shape()));
}

namespace {
Value nan_propagating(hlo::Builder& b, Value x, Value y, Value m) {
  if (!hlo::is_float(x.dtype())) return m;
  return b.select(is_nan(b, x), x, b.select(is_nan(b, y), y, m));
}
}  // namespace

Value nan_max(hlo::Builder& b, Value x, Value y) { return nan_propagating(b, x, y, b.max(x, y)); }
Value nan_min(hlo::Builder& b, Value x, Value y) { return nan_propagating(b, x, y, b.min(x, y)); }

Value number_constant(hlo::Builder& b, const Number& n, ElementType t) {
  bool integral = n.kind == Number::Kind::Int || n.kind == Number::Kind::Bool;
  if (hlo::is_float(t)) return b.constant(integral ? static_cast<double>(n.i) : n.f, t);
  return b.constant_int(integral ? n.i : static_cast<int64_t>(n.f), t);
}

Value operand(Context& ctx, const Arg& a, ElementType t) {
  if (a.kind == Arg::Kind::Tensor) return cast(ctx.b, a.tensor, t);
  TPU_CHECK(a.kind == Arg::Kind::Number, ErrorKind::Type, "argument ", a.index,
            " must be a tensor or a number");
  return ctx.number(a, t);
}

Value binary_op(Context& ctx, const Arg& a, const Arg& c, BinaryFn fn,
                std::optional<ElementType> compute) {
  ElementType t = compute ? *compute : result_type(ctx, {&a, &c});
  Value x = operand(ctx, a, t), y = operand(ctx, c, t);
  Shape shape = broadcast_shapes(x.shape(), y.shape());
  return fn(ctx.b, broadcast_to(ctx.b, x, shape), broadcast_to(ctx.b, y, shape));
}

Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& dims, bool keepdim) {
  Shape out;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    bool reduced = std::find(dims.begin(), dims.end(), i) != dims.end();
    if (!reduced) out.push_back(shape[i]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

void check_dim_mask_rank(int64_t rank) {
  TPU_CHECK(rank <= 64, ErrorKind::Runtime, "only tensors with up to 64 dims are supported");
}

std::vector<int64_t> reduction_dims(const Arg& dims_arg, int64_t rank) {
  if (dims_arg.kind == Arg::Kind::None || (dims_arg.kind == Arg::Kind::IntList && dims_arg.ints.empty())) {
    std::vector<int64_t> all(rank);
    for (int64_t i = 0; i < rank; ++i) all[i] = i;
    return all;
  }
  check_dim_mask_rank(rank);
  if (dims_arg.kind == Arg::Kind::Int) return wrap_dims({dims_arg.i}, rank);
  return wrap_dims(dims_arg.as_ints(), rank);
}

}  // namespace torch_tpu::lowering

// ---- names of element types in PyTorch's messages
namespace torch_tpu::lowering {
const char* scalar_type_name(ElementType t) {
  switch (t) {
    case ElementType::Bool: return "Bool";
    case ElementType::U8: return "Byte";
    case ElementType::I8: return "Char";
    case ElementType::I16: return "Short";
    case ElementType::I32: return "Int";
    case ElementType::I64: return "Long";
    case ElementType::F16: return "Half";
    case ElementType::BF16: return "BFloat16";
    case ElementType::F32: return "Float";
    case ElementType::F64: return "Double";
    case ElementType::C64: return "ComplexFloat";
    case ElementType::C128: return "ComplexDouble";
    case ElementType::U16: return "UInt16";
    case ElementType::U32: return "UInt32";
    case ElementType::U64: return "UInt64";
    case ElementType::F8E4M3FN: return "Float8_e4m3fn";
    case ElementType::F8E5M2: return "Float8_e5m2";
  }
  return "Undefined";
}

const char* cpp_type_name(ElementType t) {
  using E = ElementType;
  switch (t) {
    case E::Bool: return "bool";
    case E::U8: return "unsigned char";
    case E::I8: return "signed char";
    case E::I16: return "short int";
    case E::I32: return "int";
    case E::I64: return "long int";
    case E::F16: return "c10::Half";
    case E::BF16: return "c10::BFloat16";
    case E::F32: return "float";
    case E::F64: return "double";
    case E::C64: return "c10::complex<float>";
    case E::C128: return "c10::complex<double>";
    default: return scalar_type_name(t);
  }
}
}  // namespace torch_tpu::lowering
