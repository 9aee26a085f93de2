#include "distributed/host_reduce.h"

#include <limits>

#include "distributed/staging.h"

namespace torch_tpu::distributed {

namespace {

using R = c10d::ReduceOp::RedOpType;

// Wrapping integer arithmetic in a wider type and truncating back gives the
// same bits as wrapping arithmetic in the narrow type (two's complement).
at::Tensor wrap_to(const at::Tensor& wide, c10::ScalarType dtype) {
  if (dtype == c10::kUInt64) return wide.to(c10::kLong).view(c10::kUInt64);
  return wide.to(dtype);
}

// uint64 compared as int64 after flipping the sign bit keeps its order.
at::Tensor flip_sign(const at::Tensor& t) {
  return t.bitwise_xor(std::numeric_limits<int64_t>::min());
}

// floor(sum / world) of uint64 values (held as int64 bits) without the sum
// overflowing: sum the high and low 32-bit halves separately and carry the
// high half's remainder into the low half.
at::Tensor unsigned64_mean(const at::Tensor& s) {
  const int64_t world = s.size(0);
  at::Tensor hi = s.bitwise_right_shift(32).bitwise_and(0xffffffffLL).sum(0);
  at::Tensor lo = s.bitwise_and(0xffffffffLL).sum(0);
  at::Tensor q_hi = hi.div(world, "floor");
  at::Tensor rest = (hi - q_hi * world) * (int64_t{1} << 32) + lo;
  return (q_hi.bitwise_left_shift(32) + rest.div(world, "floor")).view(c10::kUInt64);
}

}  // namespace

at::Tensor reduce_stacked(const at::Tensor& stacked, R op, const char* collective) {
  const c10::ScalarType dtype = stacked.scalar_type();
  const int64_t world = stacked.size(0);
  const bool complex = at::isComplexType(dtype);
  const bool floating = at::isFloatingType(dtype);
  const bool integral = !complex && !floating;
  TORCH_CHECK(!(complex && (op == R::MIN || op == R::MAX)), "tpu_dist: ", collective,
              ": reduce op ", op_name(op), " is not defined for complex dtype ", dtype);
  TORCH_CHECK(integral || !(op == R::BAND || op == R::BOR || op == R::BXOR), "tpu_dist: ",
              collective, ": bitwise reduce op ", op_name(op), " needs an integer dtype, got ",
              dtype);
  TORCH_CHECK(op != R::PREMUL_SUM && op != R::UNUSED, "tpu_dist: ", collective,
              ": reduce op ", op_name(op), " is not supported");

  if (dtype == c10::kBool) {
    // Bool follows Gloo: SUM/MAX/BOR/BXOR-as-any are logical or, PRODUCT/MIN/BAND logical and.
    if (op == R::PRODUCT || op == R::MIN || op == R::BAND) return stacked.all(0);
    if (op == R::BXOR) return stacked.sum(0).remainder(2).to(c10::kBool);
    return stacked.any(0);
  }

  // Unsigned types CPU kernels lack: widen exactly (uint16 -> int32,
  // uint32 -> int64); uint64 is reinterpreted as int64.
  at::Tensor s = stacked;
  if (dtype == c10::kUInt16) s = stacked.to(c10::kInt);
  if (dtype == c10::kUInt32) s = stacked.to(c10::kLong);
  if (dtype == c10::kUInt64) s = stacked.view(c10::kLong);

  switch (op) {
    case R::SUM:
      return integral ? wrap_to(s.sum(0, false, c10::kLong), dtype) : s.sum(0).to(dtype);
    case R::AVG:
      if (dtype == c10::kUInt64) return unsigned64_mean(s);
      if (integral) {
        return wrap_to(s.sum(0, false, c10::kLong).div(world, "trunc"), dtype);
      }
      return s.sum(0).div(world).to(dtype);
    case R::PRODUCT:
      return integral ? wrap_to(s.prod(0, false, c10::kLong), dtype) : s.prod(0).to(dtype);
    case R::MIN:
    case R::MAX: {
      if (dtype == c10::kUInt64) {
        at::Tensor f = flip_sign(s);
        return flip_sign(op == R::MIN ? f.amin(0) : f.amax(0)).view(c10::kUInt64);
      }
      at::Tensor r = op == R::MIN ? s.amin(0) : s.amax(0);
      return r.to(dtype);
    }
    case R::BAND:
    case R::BOR:
    case R::BXOR: {
      at::Tensor r = s.select(0, 0).clone();
      for (int64_t i = 1; i < world; ++i) {
        at::Tensor x = s.select(0, i);
        r = op == R::BAND ? r.bitwise_and(x) : op == R::BOR ? r.bitwise_or(x) : r.bitwise_xor(x);
      }
      return dtype == c10::kUInt64 ? r.view(c10::kUInt64) : r.to(dtype);
    }
    default:
      TORCH_CHECK(false, "tpu_dist: ", collective, ": unsupported reduce op ", op_name(op));
  }
}

}  // namespace torch_tpu::distributed
