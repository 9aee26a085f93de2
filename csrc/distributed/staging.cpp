#include "distributed/staging.h"

#include "distributed/host_pool.h"

namespace torch_tpu::distributed {

bool on_tpu(const at::Tensor& t) { return t.device().type() == c10::DeviceType::PrivateUse1; }

at::Tensor staging_bytes(int64_t nbytes) {
  static auto& pool = *new HostPool;  // never destroyed: used during exit
  return pool.take(nbytes);
}

at::Tensor host_copy(const at::Tensor& t) {
  if (!on_tpu(t)) return t.contiguous();
  if (t.numel() == 0) return t.cpu().contiguous();
  // Copying a `tpu` tensor to the host materializes it (cutting any deferred
  // graph) and waits for the device, so the bytes are final; the device
  // writes straight into the staging memory.
  at::Tensor h = staging_bytes(t.numel() * static_cast<int64_t>(t.element_size()))
                     .view(t.scalar_type())
                     .view(t.sizes());
  h.copy_(t);
  return h;
}

at::Tensor host_bytes(const at::Tensor& t) {
  at::Tensor h = host_copy(t).reshape({-1});
  if (h.scalar_type() == c10::kByte) return h;
  // Bool shares uint8's width; view() refuses bool <-> uint8 reinterpretation
  // only for element-size changes, which this is not.
  return h.view(c10::kByte);
}

at::Tensor from_bytes(const at::Tensor& bytes, const at::Tensor& like) {
  return bytes.view(like.scalar_type()).reshape(like.sizes());
}

void write_back(const at::Tensor& dst, const at::Tensor& host) {
  if (!on_tpu(dst) && dst.data_ptr() == host.data_ptr() && dst.strides() == host.strides()) return;
  at::Tensor d = dst;
  d.copy_(host);
}

bool gloo_reduces(c10::ScalarType dtype, c10d::ReduceOp::RedOpType op) {
  using R = c10d::ReduceOp::RedOpType;
  switch (dtype) {
    case c10::kFloat: case c10::kDouble: case c10::kHalf: case c10::kBFloat16:
      return op == R::SUM || op == R::AVG || op == R::PRODUCT || op == R::MIN || op == R::MAX;
    case c10::kBool: case c10::kByte: case c10::kChar: case c10::kInt: case c10::kLong:
      return op == R::SUM || op == R::PRODUCT || op == R::MIN || op == R::MAX || op == R::BAND ||
             op == R::BOR || op == R::BXOR;
    case c10::kComplexFloat: case c10::kComplexDouble:
      return op == R::SUM || op == R::AVG;
    default:
      return false;
  }
}

std::string describe(const at::Tensor& t) {
  return c10::str(c10::toString(t.scalar_type()), t.sizes(), "@", t.device());
}

const char* op_name(c10d::ReduceOp::RedOpType op) {
  using R = c10d::ReduceOp::RedOpType;
  switch (op) {
    case R::SUM: return "SUM";
    case R::AVG: return "AVG";
    case R::PRODUCT: return "PRODUCT";
    case R::MIN: return "MIN";
    case R::MAX: return "MAX";
    case R::BAND: return "BAND";
    case R::BOR: return "BOR";
    case R::BXOR: return "BXOR";
    case R::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

}  // namespace torch_tpu::distributed
