// Copies into and between device buffers. Host data arrives by upload (one
// new buffer) or, for Python numbers passed as 0-dim tensors, as a shared
// constant uploaded once per distinct value. A copy on the device is an op
// like any other, recorded and fused: reading a view as a contiguous buffer
// is an identity lowering over the view, and copy_ writes through the
// destination's view (resolving PyTorch's lazy conjugate and negative bits
// on the way). A copy that replaces a whole storage with an equal-typed
// buffer shares the buffer instead: buffers are immutable.
#include <unordered_map>

#include "common/key_text.h"
#include "lowering/common.h"
#include "runtime/device_memory.h"
#include "runtime/executor_internal.h"

namespace torch_tpu::runtime {

using hlo::TensorType;
using hlo::Value;
using lowering::Arg;

namespace {

std::vector<hlo::Value> identity(lowering::Context&, const lowering::Args& args) {
  return {args[0].as_tensor()};
}
const lowering::Lowering kContiguous{"tpu::contiguous", &identity, false};

// Copies that resolve PyTorch's lazy conjugate / negative bits.
std::vector<hlo::Value> conj_neg(lowering::Context& ctx, const lowering::Args& args) {
  hlo::Builder& b = ctx.b;
  Value x = args[0].as_tensor();
  if ((args[1].i & kCopyConjugate) && hlo::is_complex(x.dtype()))
    x = b.complex(b.real(x), b.neg(b.imag(x)));
  if (args[1].i & kCopyNegate) x = b.neg(x);
  return {x};
}
const lowering::Lowering kConjNeg{"tpu::conj_neg", &conj_neg, false};

// A whole-storage copy that changes the dtype, as an op of its own: a padded
// source then stays padded (lowering/padded.cpp), where a write through the
// destination would read it exact.
std::vector<hlo::Value> convert(lowering::Context& ctx, const lowering::Args& args) {
  return {lowering::cast(ctx.b, args[0].as_tensor(), args[1].dtype)};
}

const lowering::Lowering kConvert{"tpu::convert", &convert, false};

}  // namespace

std::shared_ptr<DeviceBuffer> upload(const void* data, const TensorType& type, int device) {
  Runtime& rt = Runtime::get();
  rt.check_device(device);
  count("bytes_to_device", type.nbytes());
  check_allocation(device, type.nbytes(), [] { return std::string("copy from host"); });
  return DeviceBuffer::materialized(rt.client().from_host(data, type, device), "copy from host",
                                    device);
}

std::shared_ptr<DeviceBuffer> constant(const void* data, const TensorType& type, int device) {
  // Every Python number an op takes comes here: the key is built in a
  // buffer kept from call to call, so a cached constant allocates nothing.
  thread_local std::string key;
  key.assign(static_cast<const char*>(data), type.nbytes());
  type.append_key(key);
  append_int(key, device, '@');
  static std::mutex cache_mu;
  // never destroyed: used during exit
  static auto& cache = *new std::unordered_map<std::string, std::shared_ptr<DeviceBuffer>>;
  std::lock_guard<std::mutex> lock(cache_mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  if (cache.size() >= 4096) cache.clear();
  Runtime& rt = Runtime::get();
  rt.check_device(device);
  auto buf = DeviceBuffer::materialized(rt.client().from_host(data, type, device), "constant",
                                        device, /*counted=*/false);
  cache.emplace(key, buf);
  return buf;
}

std::shared_ptr<DeviceBuffer> read_contiguous(const TensorInput& input) {
  // A padded base is returned as it is: copies to the host drop its padding.
  if (is_identity(input.view, input.storage->base->logical_type())) return input.storage->base;
  OpCall call;
  call.lowering = &kContiguous;
  Arg a;
  a.kind = Arg::Kind::Tensor;
  call.args.push_back(a);
  call.inputs.push_back({input});
  call.device = input.storage->device;
  return run_op(call)[0];
}

void copy_into(const TensorInput& dst, const TensorInput& src, int transform) {
  check_writable(dst.view, "copy_");
  const bool whole = transform == 0 && covers_storage(dst.view, dst.storage->nbytes) &&
                     src.view.sizes == dst.view.sizes;
  if (whole && src.view.dtype == dst.view.dtype) {
    dst.storage->base = read_contiguous(src);
    return;
  }
  if (whole && src.storage->base->padded()) {
    OpCall call;
    call.lowering = &kConvert;
    call.args.resize(2);
    call.args[0].kind = Arg::Kind::Tensor;
    call.args[1].kind = Arg::Kind::DType;
    call.args[1].index = 1;
    call.args[1].dtype = dst.view.dtype;
    call.inputs = {{src}, {}};
    call.device = dst.storage->device;
    dst.storage->base = run_op(call)[0];
    return;
  }
  OpCall call;
  call.lowering = transform ? &kConjNeg : &kContiguous;
  Arg a;
  a.kind = Arg::Kind::Tensor;
  call.args.push_back(a);
  if (transform) {
    Arg flags;
    flags.kind = Arg::Kind::Int;
    flags.index = 1;
    flags.i = transform;
    call.args.push_back(flags);
  }
  call.inputs.push_back({src});
  if (transform) call.inputs.emplace_back();
  call.destinations.push_back(Destination{dst, false});
  call.device = dst.storage->device;
  run_op(call);
}

}  // namespace torch_tpu::runtime
