#include "runtime/device_buffer.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "common/error.h"
#include "common/fork_guard.h"
#include "hlo/builder.h"
#include "runtime/counters.h"
#include "runtime/device_memory.h"
#include "runtime/dynamic_dims.h"
#include "runtime/executor.h"
#include "runtime/index_flags.h"
#include "runtime/memory_stats.h"
#include "runtime/runtime.h"

namespace torch_tpu::runtime {

namespace {

// The zero bytes of a fresh storage, when something reads it. They come
// from the host: a transfer costs far less than compiling a program (20-100
// ms on the CPU plugin), and most fresh storages are read only once or a few
// times per type (optimizer state, a gradient seed, an index check's first
// state). A type whose transfers add up to about what a compile costs (a
// loop that reads a fresh buffer every step), or one buffer too large to
// stage on the host, gets a program instead, cached per type like any other,
// which makes the zeros on the device.
constexpr int64_t kUploadBudget = 256 << 20;  // bytes per type: ~16 ms on a PCIe link
constexpr int64_t kLargestUpload = 16 << 20;

std::unique_ptr<pjrt::Buffer> run_zeros(const hlo::TensorType& type, int device) {
  Runtime& rt = Runtime::get();
  struct PerType {
    int64_t uploaded = 0;  // bytes
    std::shared_ptr<pjrt::Executable> program;
  };
  static std::mutex mu;
  static auto& seen = *new std::unordered_map<std::string, PerType>;  // never destroyed: used during exit
  check_allocation(device, type.nbytes(),
                   [&] { return "the zeros of a fresh tensor (" + type.str() + ")"; });
  std::shared_ptr<pjrt::Executable> exe;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (seen.size() >= 256) seen.clear();  // bounded: each program holds mapped code
    PerType& t = seen[type.str() + "@" + std::to_string(device)];
    if (!t.program && (t.uploaded + type.nbytes() > kUploadBudget || type.nbytes() > kLargestUpload)) {
      hlo::Builder b;
      hlo::Value z = b.zeros(type.dtype, type.shape);
      t.program = rt.compile(b.module({z}), {type}, device, {"zeros " + type.str(), 1, "", 0});
    }
    if (!t.program) t.uploaded += type.nbytes();
    exe = t.program;
  }
  if (!exe) {
    std::unique_ptr<void, decltype(&std::free)> host(std::calloc(std::max<int64_t>(type.nbytes(), 1), 1),
                                                     &std::free);
    TPU_CHECK(host, ErrorKind::OutOfMemory, "out of host memory staging the zeros of a fresh tensor (",
              type.str(), ")");
    return rt.client().from_host(host.get(), type, device);
  }
  auto out = exe->execute({}, {}, device);
  return std::move(out[0]);
}

}  // namespace

std::shared_ptr<DeviceBuffer> DeviceBuffer::create(const hlo::TensorType& type, int device) {
  struct Made : DeviceBuffer {  // make_shared needs a public constructor
    Made(const hlo::TensorType& type, int device) : DeviceBuffer(type, device) {}
  };
  return std::make_shared<Made>(type, device);  // one allocation with its count
}

std::shared_ptr<DeviceBuffer> DeviceBuffer::deferred_zeros(const hlo::TensorType& type,
                                                           int device) {
  auto b = create(type, device);
  b->producer_ = "empty";
  return b;
}

std::shared_ptr<DeviceBuffer> DeviceBuffer::materialized(std::unique_ptr<pjrt::Buffer> buffer,
                                                         std::string producer, int device,
                                                         bool counted) {
  auto b = create(buffer->type(), device);
  b->producer_ = std::move(producer);
  b->counted_ = counted;
  b->set_buffer(std::move(buffer));
  return b;
}

std::shared_ptr<DeviceBuffer> DeviceBuffer::error(const hlo::TensorType& type,
                                                  std::string message, int device, ErrorKind kind) {
  auto b = create(type, device);
  b->state_ = State::Error;
  b->error_ = std::move(message);
  b->error_kind_ = kind;
  return b;
}

std::shared_ptr<DeviceBuffer> DeviceBuffer::pending(const hlo::TensorType& type, int device,
                                                   std::shared_ptr<Graph> graph, int node,
                                                   int result, const std::string& producer) {
  auto b = create(type, device);
  b->graph_ = std::move(graph);
  b->node_ = node;
  b->result_ = result;
  b->producer_name_ = &producer;
  return b;
}

std::shared_ptr<DeviceBuffer> DeviceBuffer::produced(const hlo::TensorType& type,
                                                    std::unique_ptr<pjrt::Buffer> buffer,
                                                    const std::string& producer, int device) {
  auto b = create(type, device);
  b->producer_name_ = &producer;
  b->set_buffer(std::move(buffer));
  return b;
}

void DeviceBuffer::fulfil(std::unique_ptr<pjrt::Buffer> b) {
  graph_.reset();
  set_buffer(std::move(b));
}

void DeviceBuffer::set_error(std::string message, ErrorKind kind) {
  graph_.reset();
  state_ = State::Error;
  error_ = std::move(message);
  error_kind_ = kind;
}

void DeviceBuffer::take_value(DeviceBuffer& other) {
  if (other.state_ != State::Materialized) return set_error(other.error_, other.error_kind_);
  if (other.counted_) record_free(other.device_, other.type_.nbytes(), &other);
  std::unique_ptr<pjrt::Buffer> b = std::move(other.buffer_);
  other.state_ = State::Error;
  other.error_ = "its value was moved to the tensor it was recomputed for";
  fulfil(std::move(b));
}

DeviceBuffer::~DeviceBuffer() {
  if (buffer_ && counted_) record_free(device_, type_.nbytes(), this);
}

void DeviceBuffer::set_buffer(std::unique_ptr<pjrt::Buffer> b) {
  buffer_ = std::move(b);
  state_ = State::Materialized;
  if (counted_) record_alloc(device_, type_.nbytes(), this);
}

void DeviceBuffer::raise_error() const { fail(error_kind_, error_); }

const pjrt::Buffer& DeviceBuffer::buffer() {
  check_not_forked();  // an inherited tensor's buffer belongs to the parent's client
  if (state_ == State::Deferred && graph_) {
    std::shared_ptr<Graph> g = graph_;  // flushing resets graph_
    flush_graph(g, "value needed");
    // A flushed graph settles every live result; a result it left pending
    // would otherwise be read as the zeros of a deferred fill.
    TPU_CHECK(state_ != State::Deferred, ErrorKind::Runtime, "tpu op '", producer(),
              "': its graph was flushed but the result was never computed");
  }
  if (state_ == State::Error) raise_error();
  if (fresh_zeros()) set_buffer(run_zeros(type_, device_));
  return *buffer_;
}

void DeviceBuffer::wait() {
  const pjrt::Buffer& b = buffer();
  try {
    b.await_ready();
  } catch (const Error& e) {
    state_ = State::Error;
    error_ = "tpu op '" + producer() + "' failed on the device: " + e.what();
    error_kind_ = e.kind();
    if (e.kind() == ErrorKind::OutOfMemory) record_oom(device_);
    if (counted_) record_free(device_, type_.nbytes(), this);
    buffer_.reset();
    raise_error();
  }
}

hlo::TensorType DeviceBuffer::logical_type() const {
  hlo::TensorType t = type_;
  if (padded()) t.shape[padding_.dim] = padding_.size;
  return t;
}

void DeviceBuffer::to_host(void* dst) {
  if (logical_type().nbytes() == 0) return;
  wait();
  check_index_flags();  // a failed device-side index check raises before the value leaves
  if (state_ == State::Error) raise_error();  // poisoned by a check read just now
  if (!padded()) {
    buffer_->to_host(dst);
  } else {
    std::vector<char> whole(static_cast<size_t>(type_.nbytes()));
    buffer_->to_host(whole.data());
    copy_rows(whole.data(), type_.shape[padding_.dim], dst, padding_.size, logical_type(), padding_.dim);
  }
  count("bytes_to_host", logical_type().nbytes());
}

}  // namespace torch_tpu::runtime
