#include "runtime/number_bytes.h"

#include <cmath>
#include <cstring>

#include "hlo/float8.h"

namespace torch_tpu::runtime {

namespace {
template <typename T>
void put(T v, uint8_t* out) {
  std::memcpy(out, &v, sizeof(T));
}
}  // namespace

uint16_t float_to_bfloat16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::isnan(f)) return 0x7FC0;
  uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t exp = (x >> 23) & 0xFF;
  uint32_t mant = x & 0x7FFFFF;
  if (exp == 0xFF) return static_cast<uint16_t>(sign | 0x7C00 | (mant ? 0x200 : 0));
  int32_t e = static_cast<int32_t>(exp) - 127 + 15;
  if (e >= 0x1F) return static_cast<uint16_t>(sign | 0x7C00);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000;
    uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;
  return static_cast<uint16_t>(half);
}

void encode_number(const lowering::Number& n, hlo::ElementType t, uint8_t* out) {
  using E = hlo::ElementType;
  bool integral = n.kind == lowering::Number::Kind::Int || n.kind == lowering::Number::Kind::Bool;
  double d = n.as_double();
  int64_t i = integral ? n.i : static_cast<int64_t>(d);
  switch (t) {
    case E::Bool: put<uint8_t>(integral ? n.i != 0 : d != 0, out); return;
    case E::U8: put<uint8_t>(static_cast<uint8_t>(i), out); return;
    case E::U16: put<uint16_t>(static_cast<uint16_t>(i), out); return;
    case E::U32: put<uint32_t>(static_cast<uint32_t>(i), out); return;
    case E::U64: put<uint64_t>(static_cast<uint64_t>(i), out); return;
    case E::I8: put<int8_t>(static_cast<int8_t>(i), out); return;
    case E::I16: put<int16_t>(static_cast<int16_t>(i), out); return;
    case E::I32: put<int32_t>(static_cast<int32_t>(i), out); return;
    case E::I64: put<int64_t>(i, out); return;
    case E::F16: put<uint16_t>(float_to_half(static_cast<float>(d)), out); return;
    case E::BF16: put<uint16_t>(float_to_bfloat16(static_cast<float>(d)), out); return;
    case E::F32: put<float>(static_cast<float>(d), out); return;
    case E::F64: put<double>(d, out); return;
    case E::C64:
      put<float>(static_cast<float>(d), out);
      put<float>(static_cast<float>(n.im), out + 4);
      return;
    case E::C128:
      put<double>(d, out);
      put<double>(n.im, out + 8);
      return;
    case E::F8E4M3FN:
    case E::F8E5M2: put<uint8_t>(hlo::float8_bits(d, t), out); return;
  }
}

}  // namespace torch_tpu::runtime
