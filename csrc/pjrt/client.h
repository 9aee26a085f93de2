// RAII wrappers over the PJRT C API: every C call is made in client.cpp, and
// every PJRT_Error is turned into a torch_tpu::Error there (check()).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hlo/types.h"
#include "pjrt/plugin.h"

namespace torch_tpu::pjrt {

class Client;

// A completion event. await() blocks and throws the plugin's error if any.
class Event {
 public:
  Event(const Api* api, PJRT_Event* event) : api_(api), event_(event) {}
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void await();
  bool ready() const;
  // Calls fn(failed, arg) once the event is ready, on a plugin thread (or at
  // once when it already is). fn must be quick and must not call PJRT.
  using ReadyFn = void (*)(bool failed, void* arg);
  void on_ready(ReadyFn fn, void* arg) const;

 private:
  const Api* api_;
  PJRT_Event* event_;
};

// An on-device array. Immutable; destroyed with its owner.
class Buffer {
 public:
  Buffer(const Api* api, PJRT_Buffer* buffer, hlo::TensorType type);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  const hlo::TensorType& type() const { return type_; }
  PJRT_Buffer* raw() const { return buffer_; }
  // Copies the whole array, row-major, into `dst` (type().nbytes() bytes).
  // Blocks until done; throws the error of the computation that made it.
  void to_host(void* dst) const;
  // Blocks until the buffer is computed; throws its error if it failed.
  void await_ready() const;
  bool is_deleted() const;

 private:
  const Api* api_;
  PJRT_Buffer* buffer_;
  hlo::TensorType type_;
};

class Executable {
 public:
  Executable(const Api* api, PJRT_LoadedExecutable* exe, std::vector<hlo::TensorType> outputs,
             std::vector<PJRT_Device*> devices, int num_replicas = 1);
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  // Launches on addressable device `device_index`, the one it was compiled
  // for (the arguments must live there). Returns as soon as the launch is enqueued; outputs become ready
  // asynchronously. Arguments listed in `donated` are consumed (their PJRT
  // buffers are deleted by the plugin). With `done`, also returns an event
  // that is ready when the whole execution has finished (outputs that nobody
  // reads are no proof of that: synchronize waits on these).
  std::vector<std::unique_ptr<Buffer>> execute(const std::vector<const Buffer*>& args,
                                               const std::vector<bool>& donated = {},
                                               int device_index = 0,
                                               std::unique_ptr<Event>* done = nullptr) const;
  // Launches a replicated executable (Client::compile_replicated) on all its
  // replicas in one call, which in-process collectives need: every
  // participant must be launched together. `args[r]` are replica r's
  // arguments, living on addressable device r. Returns each replica's
  // outputs. Nothing is donated.
  std::vector<std::vector<std::unique_ptr<Buffer>>> execute_replicated(
      const std::vector<std::vector<const Buffer*>>& args) const;
  int num_replicas() const { return replicas_; }
  // PJRT executable serialization (for the disk cache).
  std::string serialize() const;
  const std::vector<hlo::TensorType>& output_types() const { return outputs_; }

 private:
  const Api* api_;
  PJRT_LoadedExecutable* exe_;
  std::vector<hlo::TensorType> outputs_;
  std::vector<PJRT_Device*> devices_;  // the client's addressable devices
  int replicas_;
};

// PJRT_Device_MemoryStats, where the plugin reports it (the CPU plugin does
// not: `known` is false there).
struct DeviceMemory {
  bool known = false;
  int64_t bytes_in_use = 0;
  int64_t bytes_limit = 0;  // 0: the plugin gave no limit
};

struct DeviceInfo {
  int id = 0;
  std::string kind;  // the plugin's device kind, e.g. "cpu", "TPU v5 lite"
  std::string debug_string;
  // The plugin's device attributes (PJRT_DeviceDescription_Attributes):
  // numbers (int64, bool, float; int64 arrays joined by ',') and strings as
  // text, e.g. the CUDA plugin's "compute_capability" and "core_count".
  std::vector<std::pair<std::string, std::string>> attributes;
};

// Platform-specific options of PJRT_Client_Create, e.g. the CPU plugin's
// {"cpu_device_count", N}. Empty means the plugin's defaults.
struct CreateOptions {
  std::vector<std::pair<std::string, int64_t>> int64s;
};

class Client {
 public:
  explicit Client(std::shared_ptr<Plugin> plugin, const CreateOptions& options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const Plugin& plugin() const { return *plugin_; }
  std::string platform_name() const;
  std::string platform_version() const;
  int device_count() const { return static_cast<int>(devices_.size()); }
  // The threads the plugin started while it created this client (its
  // worker pools), by kernel thread id: those that appeared during
  // PJRT_Client_Create (one another part of the process started meanwhile
  // would count too).
  const std::vector<int>& worker_threads() const { return worker_threads_; }
  // Keeps only the addressable devices at `indices` (each valid, each once),
  // in that order: they become devices 0, 1... of every call below.
  void keep_devices(const std::vector<int>& indices);
  DeviceInfo device_info(int index) const;
  DeviceMemory device_memory(int index) const;

  // Compiles MLIR text (StableHLO) for addressable device `device_index`.
  // `output_types` are recorded on the executable so results carry their
  // shapes without asking the plugin.
  std::unique_ptr<Executable> compile(const std::string& mlir,
                                      std::vector<hlo::TensorType> output_types,
                                      int device_index = 0) const;
  // Compiles MLIR text for `num_replicas` replicas (one partition), replica r
  // placed on addressable device r; collectives in the program then run
  // among those devices. Launch it with Executable::execute_replicated.
  std::unique_ptr<Executable> compile_replicated(const std::string& mlir,
                                                 std::vector<hlo::TensorType> output_types,
                                                 int num_replicas) const;
  std::unique_ptr<Executable> deserialize(const std::string& bytes,
                                          std::vector<hlo::TensorType> output_types) const;
  // Copies `type.nbytes()` bytes of row-major host data into a new device
  // buffer; the host memory may be reused as soon as this returns. With
  // `host_done`, the copy may still be running when this returns: the host
  // memory must stay alive and unchanged until *host_done is ready.
  std::unique_ptr<Buffer> from_host(const void* data, const hlo::TensorType& type,
                                    int device_index = 0,
                                    std::unique_ptr<Event>* host_done = nullptr) const;
  // A copy of `src` on addressable device `device_index`, made by the plugin
  // (device to device, no host round trip). Returns at once; the new buffer
  // becomes ready when the copy is done, and `src` may be dropped meanwhile
  // (PJRT keeps what an enqueued copy reads).
  std::unique_ptr<Buffer> copy_to_device(const Buffer& src, int device_index) const;
  // The addressable index of the device holding `b` (where the plugin put it).
  int device_of(const Buffer& b) const;

 private:
  // Compiles with replica r on addressable device replica_devices[r].
  std::unique_ptr<Executable> compile_with(const std::string& mlir,
                                           std::vector<hlo::TensorType> output_types,
                                           const std::vector<int>& replica_devices) const;

  std::shared_ptr<Plugin> plugin_;
  PJRT_Client* client_ = nullptr;
  std::vector<PJRT_Device*> devices_;       // addressable
  std::vector<PJRT_Memory*> memories_;      // default memory of each device
  std::vector<int> worker_threads_;
};

// The runtime's client: on XLA's CPU plugin with `cpu_devices` devices (its
// create option cpu_device_count; left to itself the plugin makes 4, whatever
// the machine has, and their worker threads crowd a small one), on any other plugin
// with the plugin's defaults, since the GPU and TPU plugins refuse create
// options they do not know. The CPU plugin is the discovered xla-cpu-pjrt, or
// a plugin whose client says platform "cpu" (TORCH_TPU_PJRT_PLUGIN pointing at
// it): that client is created once with its defaults to ask, then again.
std::unique_ptr<Client> create_client(std::shared_ptr<Plugin> plugin, int64_t cpu_devices);

}  // namespace torch_tpu::pjrt
