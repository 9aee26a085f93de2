#include "distributed/program_collectives.h"

#include <cstring>
#include <deque>
#include <mutex>
#include <optional>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>

#ifdef TORCH_TPU_XLA_FFI
#include "xla/ffi/api/ffi.h"
#endif

namespace torch_tpu::distributed {

namespace {

struct Groups {
  std::mutex mutex;
  std::deque<c10::intrusive_ptr<c10d::Backend>> groups;
};

// Never destroyed (docs/layout.md): a program may still run at exit.
Groups& groups() {
  static auto& g = *new Groups;
  return g;
}

c10::intrusive_ptr<c10d::Backend> group_of(int64_t id) {
  auto& g = groups();
  std::lock_guard<std::mutex> lock(g.mutex);
  if (id < 0 || id >= static_cast<int64_t>(g.groups.size())) return {};
  return g.groups[id];
}

}  // namespace

int64_t register_program_group(c10::intrusive_ptr<c10d::Backend> group) {
  auto& g = groups();
  std::lock_guard<std::mutex> lock(g.mutex);
  g.groups.push_back(std::move(group));
  return static_cast<int64_t>(g.groups.size()) - 1;
}

#ifdef TORCH_TPU_XLA_FFI
namespace ffi = xla::ffi;

namespace {

std::optional<at::ScalarType> scalar_type(ffi::DataType t) {
  switch (t) {
    case ffi::DataType::BF16: return at::kBFloat16;
    case ffi::DataType::F16: return at::kHalf;
    case ffi::DataType::F32: return at::kFloat;
    case ffi::DataType::F64: return at::kDouble;
    case ffi::DataType::S32: return at::kInt;
    case ffi::DataType::S64: return at::kLong;
    default: return std::nullopt;
  }
}

// The buffer as a flat CPU tensor (no copy): on the "Host" platform program
// buffers are host memory.
std::optional<at::Tensor> host_view(void* data, ffi::DataType type, int64_t count) {
  auto dtype = scalar_type(type);
  if (!dtype) return std::nullopt;
  return at::from_blob(data, {count}, at::TensorOptions().dtype(*dtype));
}

template <typename Run>
ffi::Error run_collective(const char* what, int64_t group_id, Run run) {
  auto group = group_of(group_id);
  if (!group) return ffi::Error::InvalidArgument(std::string(what) + ": no program group " + std::to_string(group_id));
  try {
    run(*group)->wait();
  } catch (const std::exception& e) {
    return ffi::Error::Internal(std::string(what) + " failed: " + e.what());
  }
  return ffi::Error::Success();
}

ffi::Error AllReduceSum(ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> out, int64_t group_id) {
  if (out->untyped_data() != x.untyped_data()) std::memcpy(out->untyped_data(), x.untyped_data(), x.size_bytes());
  auto t = host_view(out->untyped_data(), x.element_type(), static_cast<int64_t>(x.element_count()));
  if (!t) return ffi::Error::InvalidArgument("torch_tpu all_reduce: unsupported element type");
  return run_collective("torch_tpu all_reduce", group_id, [&](c10d::Backend& g) {
    std::vector<at::Tensor> tensors{*t};
    return g.allreduce(tensors);
  });
}

// `out` is the ranks' `x` one after the other (concatenated along dim 0).
ffi::Error AllGather(ffi::AnyBuffer x, ffi::Result<ffi::AnyBuffer> out, int64_t group_id) {
  auto in = host_view(x.untyped_data(), x.element_type(), static_cast<int64_t>(x.element_count()));
  auto all = host_view(out->untyped_data(), out->element_type(), static_cast<int64_t>(out->element_count()));
  if (!in || !all) return ffi::Error::InvalidArgument("torch_tpu all_gather: unsupported element type");
  return run_collective("torch_tpu all_gather", group_id, [&](c10d::Backend& g) {
    return g._allgather_base(*all, *in);
  });
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(torch_tpu_program_all_reduce, AllReduceSum,
                              ffi::Ffi::Bind().Arg<ffi::AnyBuffer>().Ret<ffi::AnyBuffer>().Attr<int64_t>("group"));
XLA_FFI_DEFINE_HANDLER_SYMBOL(torch_tpu_program_all_gather, AllGather,
                              ffi::Ffi::Bind().Arg<ffi::AnyBuffer>().Ret<ffi::AnyBuffer>().Attr<int64_t>("group"));

std::vector<std::pair<std::string, void*>> program_collective_handlers() {
  return {{"torch_tpu_all_gather", reinterpret_cast<void*>(&torch_tpu_program_all_gather)},
          {"torch_tpu_all_reduce", reinterpret_cast<void*>(&torch_tpu_program_all_reduce)}};
}
#else
std::vector<std::pair<std::string, void*>> program_collective_handlers() { return {}; }
#endif

}  // namespace torch_tpu::distributed
