// Helpers every op family shares: PyTorch's type promotion and broadcasting,
// dimension wrapping, and turning arguments into values of a chosen type.
#pragma once

#include <optional>
#include <vector>

#include "lowering/context.h"

namespace torch_tpu::lowering {

using hlo::ElementType;
using hlo::Shape;
using hlo::Value;

// torch.result_type over tensors and numbers (c10's ResultTypeState rules:
// dimensioned tensors outrank 0-dim tensors, which outrank wrapped numbers,
// unless a lower group has a higher category: bool < int < float < complex).
ElementType result_type(const Context& ctx, const std::vector<const Arg*>& operands);
// Category order used by promotion and by can_cast.
bool can_cast(ElementType from, ElementType to);
ElementType promote(ElementType a, ElementType b);
// Integer and bool inputs of float-only ops (exp, sqrt, div...) compute in
// the default float type.
ElementType to_float(const Context& ctx, ElementType t);

// Broadcast shapes with PyTorch's error message.
Shape broadcast_shapes(const Shape& a, const Shape& b);
Value broadcast_to(hlo::Builder& b, Value v, const Shape& shape);

// Wraps a possibly negative dim; IndexError like PyTorch's when out of range.
int64_t wrap_dim(int64_t dim, int64_t rank);
std::vector<int64_t> wrap_dims(const std::vector<int64_t>& dims, int64_t rank);

// A Tensor or Number argument as a value of type t (converted; numbers become
// parameters unless the lowering is static).
Value operand(Context& ctx, const Arg& a, ElementType t);
// A Number as a rank-0 literal of type t (a value baked into the program
// instead of fed as a parameter).
Value number_constant(hlo::Builder& b, const Number& n, ElementType t);

// Converts if needed.
Value cast(hlo::Builder& b, Value v, ElementType t);

// Elementwise binary over two Tensor/Number args: promote, broadcast, apply.
// `compute` is the type the op computes in (defaults to the promoted type).
using BinaryFn = Value (*)(hlo::Builder& b, Value x, Value y);
Value binary_op(Context& ctx, const Arg& a, const Arg& c, BinaryFn fn,
                std::optional<ElementType> compute = std::nullopt);

// The shape of `shape` with `dims` removed (keepdim=false) or set to 1.
Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& dims, bool keepdim);
// dims of a reduction: empty/None means all dims. Given dims are refused, as
// check_dim_mask_rank, on a tensor of more than 64 dims.
std::vector<int64_t> reduction_dims(const Arg& dims_arg, int64_t rank);
// PyTorch's reductions hold the reduced dims in a 64-bit mask and refuse
// higher ranks (those given dims, and all/any/vector_norm even without); the
// same inputs fail here as on the CPU.
void check_dim_mask_rank(int64_t rank);

// The values of linspace(lo, hi, steps) in the type of the rank-0 lo and hi,
// with PyTorch's operation order (step = (hi - lo) / (steps - 1), each
// operation rounded to that type): forward from lo over the first half,
// backward from hi over the second, so that both ends are exact. Defined in
// factory.cpp.
Value linspace_values(hlo::Builder& b, Value lo, Value hi, int64_t steps);

// torch.linalg.vector_norm of x over dims_arg (reduction_dims' convention), the
// sum in f32 for half types; ord is a static number (the program depends on
// it). Defined in reduction.cpp.
Value vector_norm(Context& ctx, Value x, double ord, const Arg& dims_arg, bool keepdim,
                  std::optional<ElementType> dtype);

// NaN-propagating maximum and minimum of two values of one type and shape,
// as torch.maximum, clamp and max/min reductions compute: plugins differ on
// whether stablehlo.maximum/minimum return a NaN of either operand (the CPU
// plugin keeps only the first operand's). Integers go straight through.
Value is_nan(hlo::Builder& b, Value x);
Value is_inf(hlo::Builder& b, Value x);  // either infinity
Value nan_max(hlo::Builder& b, Value x, Value y);
Value nan_min(hlo::Builder& b, Value x, Value y);

// x where keep holds, else zero; keep ([n], bool) runs along x's first
// dimension. How a lowering skips the positions PyTorch skips (padding_idx,
// positions outside every bag): a product with a 0/1 mask would let a NaN or
// inf there through (0 * inf = NaN), where PyTorch never reads the value.
Value keep_rows(hlo::Builder& b, Value keep, Value x);

// ---- Math shared by the elementwise files and activation.cpp (defined in
// elementwise.cpp; candidates to move into common.cpp).

// The type PyTorch computes a half-precision op in (f32), else t itself.
ElementType opmath(ElementType t);
// The constant v with the type and shape of `like`.
Value splat(hlo::Builder& b, double v, const Value& like);
// NotImplementedError `"<kernel>" not implemented for '<Type>'` (PyTorch's
// wording and type names) unless `ok`.
void check_dtype(bool ok, const char* kernel, ElementType t);

// Float functions of one tensor: integer and bool inputs compute in the
// default float type; half types compute in f32 and round once, as PyTorch's
// CPU kernels do.
template <Value (*F)(hlo::Builder&, Value)>
std::vector<Value> float_unary(Context& ctx, const Args& args) {
  Value x = args.at(0).as_tensor();
  ElementType t = to_float(ctx, x.dtype());
  return {cast(ctx.b, F(ctx.b, cast(ctx.b, x, opmath(t))), t)};
}
// stablehlo.while over `init`: `cond` returns one rank-0 i1.
inline std::vector<Value> while_loop(hlo::Builder& b, const std::vector<Value>& init,
                                     const hlo::RegionFn& cond, const hlo::RegionFn& body) {
  std::vector<hlo::TensorType> types;
  for (const Value& v : init) types.push_back(v.type);
  return b.op_multi("stablehlo.while", init, types, "", {{types, cond}, {types, body}});
}

// Whether any element of v is nonzero (a rank-0 i1).
inline Value any_nonzero(hlo::Builder& r, Value v) {
  Value nz = r.compare(v, r.full(0, v.dtype(), v.shape()), hlo::Compare::NE);
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < nz.rank(); ++d) dims.push_back(d);
  return dims.empty() ? nz : r.reduce_or(nz, dims);
}

// erf and erfc of a float value, accurate to its type (StableHLO has no erf;
// half types compute in f32).
Value erf(hlo::Builder& b, Value x);
Value erfc(hlo::Builder& b, Value x);

// erf of an f32 value as num / den before the division (den >= 1; num is
// +-den where erf is +-1), for a caller that adds more terms over den: erf's
// own value rounds c P / Q as c (P / Q), so the two differ by an ulp or two.
struct ErfFraction {
  Value num, den;
};
ErfFraction erf_fraction(hlo::Builder& b, Value x);

}  // namespace torch_tpu::lowering

// ---- added by the reduction/matmul/normalization/loss/indexing/shape lowerings
namespace torch_tpu::lowering {
// c10::ScalarType's name ("Float", "Long", "BFloat16"), as PyTorch's error
// messages spell dtypes.
const char* scalar_type_name(ElementType t);  // "Float", "Long" (ScalarType names)
const char* cpp_type_name(ElementType t);     // "float", "long int" (c10's C++ type names)
}  // namespace torch_tpu::lowering

// ---- added by the convolution/pooling/upsample/padding lowerings (defined in
// padding.cpp). Their index maps are known when the program is built, so
// they become constants and gathers instead of index arithmetic on device.
namespace torch_tpu::lowering {
// A rank-1 constant of type t holding `values` (exact for integers up to 2^53).
Value constant_vector(hlo::Builder& b, const std::vector<double>& values, ElementType t);
// x with dimension `dim` replaced by x[..., positions[j], ...] for each j.
Value take(hlo::Builder& b, Value x, int64_t dim, const std::vector<int64_t>& positions);
// x[idx] for a rank-1 x and i64 indices of any shape, known only on the
// device (out-of-range indices are clamped, as gather does).
Value take_1d(hlo::Builder& b, Value x, Value idx);
// The gradient of take: g's slices along `dim` summed into a dimension of
// `size` at their positions (g's type, accumulated in f32 for half types).
Value take_grad(hlo::Builder& b, Value g, int64_t dim, const std::vector<int64_t>& positions,
                int64_t size);
}  // namespace torch_tpu::lowering
