#include "hlo/float8.h"

#include <algorithm>
#include <cmath>

namespace torch_tpu::hlo {

bool is_float8(ElementType t) { return t == ElementType::F8E4M3FN || t == ElementType::F8E5M2; }

uint8_t float8_bits(double v, ElementType t) {
  const bool e4m3 = t == ElementType::F8E4M3FN;
  const int mbits = e4m3 ? 3 : 2, bias = e4m3 ? 7 : 15, max_field = e4m3 ? 15 : 31;
  // What lies past the range: e4m3fn saturates to 448, e5m2 is infinite.
  const uint8_t nan = 0x7F, inf = e4m3 ? 0x7E : 0x7C;
  const uint8_t sign = std::signbit(v) ? 0x80 : 0;
  if (std::isnan(v)) return sign | nan;
  if (std::isinf(v)) return sign | inf;
  const double a = std::fabs(v);
  if (a == 0) return sign;
  int e;
  std::frexp(a, &e);
  int exponent = std::max(e - 1, 1 - bias);  // below the normal range: subnormal steps
  // In steps of the target's spacing at this exponent; nearbyint rounds half to even.
  double steps = std::nearbyint(std::ldexp(a, mbits - exponent));
  if (steps >= std::ldexp(1.0, mbits + 1)) steps /= 2, ++exponent;  // rounded up into the next binade
  const int s = static_cast<int>(steps);
  const int field = s < (1 << mbits) ? 0 : exponent + bias;
  if (field > max_field) return sign | inf;
  const uint8_t code = static_cast<uint8_t>((field << mbits) | (s & ((1 << mbits) - 1)));
  // e4m3fn's all-ones code is NaN (its top binade has no 1.875): rounding
  // there is past the range. e5m2's top field is infinity.
  if (e4m3 && code == 0x7F) return sign | inf;
  if (!e4m3 && field == max_field) return sign | inf;
  return sign | code;
}

}  // namespace torch_tpu::hlo
