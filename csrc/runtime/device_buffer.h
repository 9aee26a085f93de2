// A device buffer reference: what a storage points at instead of device
// memory. It is in one of three states:
//  - Deferred: produced by an op that has not run yet: a node of a graph
//    (runtime/graph.h) not yet flushed, or, for a fresh storage, zero bytes,
//    so `empty(...)` followed by a full overwrite (copy_ from the host, an
//    op's output) never touches the device.
//  - Materialized: a PJRT buffer, possibly still being computed (PJRT is
//    asynchronous; reading waits).
//  - Error: the op that was to produce it failed. The error travels to every
//    op that consumes it and is raised, naming the failing op, when a value
//    leaves the device.
// Buffers are immutable: a write makes a new buffer and swaps it into the
// storage (runtime/storage.h), so sharing one between storages is safe.
//
// A buffer may be padded along one dimension (runtime/dynamic_dims.h): its
// type() is then the padded (physical) type, and the tensor holds only the
// first padding().size entries of padding().dim; logical_type() is the
// tensor's type. Only the dynamic-dimension path reads a padded buffer as a
// program input; everything else gets the exact buffer first.
#pragma once

#include <memory>
#include <string>

#include "common/error.h"
#include "hlo/types.h"
#include "pjrt/client.h"

namespace torch_tpu::runtime {

class Graph;

class DeviceBuffer {
 public:
  enum class State { Deferred, Materialized, Error };

  static std::shared_ptr<DeviceBuffer> deferred_zeros(const hlo::TensorType& type, int device);
  // `counted`: whether memory statistics include it (tensors' buffers are
  // counted; the runtime's cached constants are not).
  static std::shared_ptr<DeviceBuffer> materialized(std::unique_ptr<pjrt::Buffer> buffer,
                                                    std::string producer, int device,
                                                    bool counted = true);
  static std::shared_ptr<DeviceBuffer> error(const hlo::TensorType& type, std::string message,
                                             int device, ErrorKind kind = ErrorKind::Runtime);
  // Result `result` of node `node` of an unflushed graph. `producer` (a
  // lowering's name) outlives every buffer: it is not copied.
  static std::shared_ptr<DeviceBuffer> pending(const hlo::TensorType& type, int device,
                                               std::shared_ptr<Graph> graph, int node, int result,
                                               const std::string& producer);
  // pending() and its fulfil() in one step: the result of an op that ran.
  static std::shared_ptr<DeviceBuffer> produced(const hlo::TensorType& type,
                                                std::unique_ptr<pjrt::Buffer> buffer,
                                                const std::string& producer, int device);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  State state() const { return state_; }
  const hlo::TensorType& type() const { return type_; }
  struct Padding {
    int dim = -1;  // -1: not padded
    int64_t size = 0;
  };
  const Padding& padding() const { return padding_; }
  bool padded() const { return padding_.dim >= 0; }
  void set_padding(int dim, int64_t size) { padding_ = {dim, size}; }
  hlo::TensorType logical_type() const;
  int device() const { return device_; }
  const std::string& producer() const { return producer_name_ ? *producer_name_ : producer_; }
  const std::string& error_message() const { return error_; }
  ErrorKind error_kind() const { return error_kind_; }
  // The unflushed graph that will produce this buffer, if any.
  const std::shared_ptr<Graph>& graph() const { return graph_; }
  // A fresh storage's buffer, never written: zero bytes, made on the device
  // only when something reads it.
  bool fresh_zeros() const { return state_ == State::Deferred && !graph_; }
  int graph_node() const { return node_; }
  int graph_result() const { return result_; }

  // How many jobs in flight on the worker hold this buffer as a parameter
  // (runtime/launch.cpp): they read it before any later launch, so a later
  // launch may donate it as if they had already run. Recording thread only.
  int job_holds() const { return job_holds_; }
  void add_job_hold(int delta) { job_holds_ += delta; }

  // Called by the graph's flush.
  void fulfil(std::unique_ptr<pjrt::Buffer> b);
  void set_error(std::string message, ErrorKind kind = ErrorKind::Runtime);
  // Takes the value (or the error) of `other`, which was computed for it
  // again (runtime/failure_scope.h); `other` is left in the Error state.
  void take_value(DeviceBuffer& other);

  // The PJRT buffer, running the pending op first if deferred. Throws the
  // recorded error in the Error state.
  const pjrt::Buffer& buffer();
  // Copies the contents (row-major) to host memory of logical_type().nbytes()
  // bytes (a padded buffer's padding stays behind).
  // A failure of the producing computation is raised naming the op.
  void to_host(void* dst);
  // Waits for the computation; on failure the buffer turns into the Error
  // state and the error is raised.
  void wait();

 private:
  DeviceBuffer(hlo::TensorType type, int device) : type_(std::move(type)), device_(device) {}
  static std::shared_ptr<DeviceBuffer> create(const hlo::TensorType& type, int device);
  void set_buffer(std::unique_ptr<pjrt::Buffer> b);
  [[noreturn]] void raise_error() const;

  State state_ = State::Deferred;
  hlo::TensorType type_;
  Padding padding_;
  int device_ = 0;
  std::unique_ptr<pjrt::Buffer> buffer_;
  std::string producer_;
  const std::string* producer_name_ = nullptr;  // instead of producer_, not owned
  std::string error_;
  ErrorKind error_kind_ = ErrorKind::Runtime;  // what raising the error throws
  std::shared_ptr<Graph> graph_;
  int node_ = -1, result_ = -1;
  int job_holds_ = 0;
  bool counted_ = true;
};

}  // namespace torch_tpu::runtime
