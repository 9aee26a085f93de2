// Building blocks of the special functions (special.cpp, special_bessel.cpp,
// special_iterative.cpp): comparisons with a constant, Cephes' polynomial
// and Chebyshev evaluation unrolled into straight-line code, zeta's Euler-Maclaurin divisors, the driver of
// float-and-double-only kernels, and the exponentially scaled Bessel I0/I1
// and log-gamma that other functions are built from.
#pragma once

#include <cmath>
#include <vector>

#include "lowering/common.h"

namespace torch_tpu::lowering {

// x <op> v for a constant v (an i1 mask of x's shape).
inline Value lt(hlo::Builder& b, Value x, double v) { return b.compare(x, splat(b, v, x), hlo::Compare::LT); }
inline Value le(hlo::Builder& b, Value x, double v) { return b.compare(x, splat(b, v, x), hlo::Compare::LE); }
inline Value gt(hlo::Builder& b, Value x, double v) { return b.compare(x, splat(b, v, x), hlo::Compare::GT); }
inline Value ge(hlo::Builder& b, Value x, double v) { return b.compare(x, splat(b, v, x), hlo::Compare::GE); }
inline Value eq(hlo::Builder& b, Value x, double v) { return b.compare(x, splat(b, v, x), hlo::Compare::EQ); }
inline Value ne(hlo::Builder& b, Value x, double v) { return b.compare(x, splat(b, v, x), hlo::Compare::NE); }
inline Value recip(hlo::Builder& b, Value x) { return b.div(splat(b, 1, x), x); }

inline constexpr double kPi = 3.14159265358979323846;

// Cephes polevl: c[0] x^n + ... + c[n] (n + 1 coefficients), by Horner.
inline Value polevl(hlo::Builder& b, Value x, const double* c, int n) {
  Value p = splat(b, c[0], x);
  for (int i = 1; i <= n; ++i) p = b.add(b.mul(p, x), splat(b, c[i], x));
  return p;
}

// Cephes chbevl: the Chebyshev series of n coefficients at x, by the Clenshaw
// recurrence.
inline Value chbevl(hlo::Builder& b, Value x, const double* c, int n) {
  Value b0 = splat(b, c[0], x), b1 = splat(b, 0, x), b2 = b1;
  for (int i = 1; i < n; ++i) {
    b2 = b1;
    b1 = b0;
    b0 = b.add(b.sub(b.mul(x, b1), b2), splat(b, c[i], x));
  }
  return b.mul(splat(b, 0.5, x), b.sub(b0, b2));
}

// The divisors of the Euler-Maclaurin terms of Cephes' Hurwitz zeta: (2k)! / B_2k.
inline constexpr double kZetaEulerMaclaurin[12] = {
    12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
    -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15,
    1.8152105401943546773e17, -7.1661652561756670113e18};

// Float functions PyTorch's CPU has kernels for float and double only
// (NotImplementedError naming `Kernel` otherwise); integer and bool inputs
// compute in the default float type; each type computes in itself.
template <Value (*F)(hlo::Builder&, Value), const char* Kernel>
std::vector<Value> float_double_unary(Context& ctx, const Args& args) {
  Value x = args.at(0).as_tensor();
  ElementType t = to_float(ctx, x.dtype());
  check_dtype(t == ElementType::F32 || t == ElementType::F64, Kernel, t);
  return {F(ctx.b, cast(ctx.b, x, t))};
}

// The same for functions of two values (zeta(x, q), the polynomials' (x, n)):
// the operands promote together and broadcast to one shape; a Scalar operand
// is fed as a parameter.
template <Value (*F)(hlo::Builder&, Value, Value), const char* Kernel>
std::vector<Value> float_double_binary(Context& ctx, const Args& args) {
  ElementType t = to_float(ctx, result_type(ctx, {&args.at(0), &args.at(1)}));
  check_dtype(t == ElementType::F32 || t == ElementType::F64, Kernel, t);
  Value x = operand(ctx, args.at(0), t), y = operand(ctx, args.at(1), t);
  Shape shape = broadcast_shapes(x.shape(), y.shape());
  return {F(ctx.b, broadcast_to(ctx.b, x, shape), broadcast_to(ctx.b, y, shape))};
}

// exp(-|x|) I0(x) and exp(-|x|) I1(x) of a float value, by PyTorch's
// Chebyshev expansions, and ln|Gamma(x)| of an f32 or f64 value (all three
// defined in special.cpp).
Value bessel_i0e(hlo::Builder& b, Value x);
Value bessel_i1e(hlo::Builder& b, Value x);
Value log_gamma(hlo::Builder& b, Value x);

}  // namespace torch_tpu::lowering
