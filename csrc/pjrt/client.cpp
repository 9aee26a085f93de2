#include "pjrt/client.h"

#include <algorithm>
#include <cstddef>
#include <exception>

#include "common/error.h"
#include "common/fork_guard.h"
#include "common/interrupt.h"
#include "common/release_queue.h"
#include "common/thread_priority.h"

namespace torch_tpu::pjrt {

namespace {

PJRT_Buffer_Type to_pjrt(hlo::ElementType t) {
  using E = hlo::ElementType;
  switch (t) {
    case E::Bool: return PJRT_Buffer_Type_PRED;
    case E::U8: return PJRT_Buffer_Type_U8;
    case E::U16: return PJRT_Buffer_Type_U16;
    case E::U32: return PJRT_Buffer_Type_U32;
    case E::U64: return PJRT_Buffer_Type_U64;
    case E::I8: return PJRT_Buffer_Type_S8;
    case E::I16: return PJRT_Buffer_Type_S16;
    case E::I32: return PJRT_Buffer_Type_S32;
    case E::I64: return PJRT_Buffer_Type_S64;
    case E::F16: return PJRT_Buffer_Type_F16;
    case E::BF16: return PJRT_Buffer_Type_BF16;
    case E::F32: return PJRT_Buffer_Type_F32;
    case E::F64: return PJRT_Buffer_Type_F64;
    case E::C64: return PJRT_Buffer_Type_C64;
    case E::C128: return PJRT_Buffer_Type_C128;
    case E::F8E4M3FN: return PJRT_Buffer_Type_F8E4M3FN;
    case E::F8E5M2: return PJRT_Buffer_Type_F8E5M2;
  }
  fail(ErrorKind::Type, "unknown element type");
}

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

void put_message(std::string& out, int field, const std::string& body) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | 2);
  put_varint(out, body.size());
  out += body;
}

void put_int(std::string& out, int field, uint64_t v) {
  put_varint(out, static_cast<uint64_t>(field) << 3);
  put_varint(out, v);
}

// CompileOptionsProto { executable_build_options (3) { num_replicas (4) = R,
// num_partitions (5) = 1, device_assignment (9) { replica_count (1) = R,
// computation_count (2) = 1, computation_devices (3) { replica_device_ids
// (1) = [one device id per replica] } } } }, encoded by hand so that we need
// no protobuf. Empty options make the CPU plugin abort; without the
// assignment every program would be placed on the first device.
std::string compile_options(const std::vector<int64_t>& replica_device_ids) {
  const uint64_t replicas = replica_device_ids.size();
  std::string computation_device, assignment, build, options;
  for (int64_t id : replica_device_ids)
    put_int(computation_device, 1, static_cast<uint64_t>(id));  // repeated, unpacked
  put_int(assignment, 1, replicas);
  put_int(assignment, 2, 1);
  put_message(assignment, 3, computation_device);
  put_int(build, 4, replicas);
  put_int(build, 5, 1);
  put_message(build, 9, assignment);
  put_message(options, 3, build);
  return options;
}

void destroy_event(const Api* api, PJRT_Event* event) {
  if (event == nullptr) return;
  PJRT_Event_Destroy_Args args{};
  args.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE;
  args.event = event;
  api->PJRT_Event_Destroy(&args);
}

bool event_ready(const Api* api, PJRT_Event* event) {
  PJRT_Event_IsReady_Args args{};
  args.struct_size = PJRT_Event_IsReady_Args_STRUCT_SIZE;
  args.event = event;
  check(api, api->PJRT_Event_IsReady(&args), "Event_IsReady");
  return args.is_ready;
}

// `writes_host`: the event ends a write into host memory the caller owns.
// An interrupt then waits for the write to end before it unwinds, so that
// the caller never frees memory the plugin is still writing.
void await_event(const Api* api, PJRT_Event* event, const char* what, bool writes_host = false) {
  std::exception_ptr interrupted;
  try {
    wait_interruptibly([&] { return event_ready(api, event); });
  } catch (...) {
    if (!writes_host) {
      destroy_event(api, event);
      throw;
    }
    interrupted = std::current_exception();
  }
  PJRT_Event_Await_Args args{};
  args.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE;
  args.event = event;
  PJRT_Error* err = api->PJRT_Event_Await(&args);
  destroy_event(api, event);
  if (interrupted) {
    try {
      check(api, err, what);  // frees the error; the interrupt is what is raised
    } catch (const Error&) {
    }
    std::rethrow_exception(interrupted);
  }
  check(api, err, what);
}

}  // namespace

// ---------------------------------------------------------------- Event

Event::~Event() {
  if (!in_bad_fork()) destroy_event(api_, event_);  // the plugin's threads are the parent's
}

void Event::await() {
  wait_interruptibly([&] { return ready(); });
  PJRT_Event_Await_Args args{};
  args.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE;
  args.event = event_;
  check(api_, api_->PJRT_Event_Await(&args), "Event_Await");
}

bool Event::ready() const {
  PJRT_Event_IsReady_Args args{};
  args.struct_size = PJRT_Event_IsReady_Args_STRUCT_SIZE;
  args.event = event_;
  check(api_, api_->PJRT_Event_IsReady(&args), "Event_IsReady");
  return args.is_ready;
}

namespace {
struct ReadyCall {
  const Api* api;
  Event::ReadyFn fn;
  void* arg;
};
void ready_trampoline(PJRT_Error* error, void* user_arg) {
  auto* call = static_cast<ReadyCall*>(user_arg);
  bool failed = error != nullptr;
  if (failed) {
    PJRT_Error_Destroy_Args destroy{};
    destroy.struct_size = PJRT_Error_Destroy_Args_STRUCT_SIZE;
    destroy.error = error;
    call->api->PJRT_Error_Destroy(&destroy);
  }
  call->fn(failed, call->arg);
  delete call;
}
}  // namespace

void Event::on_ready(ReadyFn fn, void* arg) const {
  PJRT_Event_OnReady_Args args{};
  args.struct_size = PJRT_Event_OnReady_Args_STRUCT_SIZE;
  args.event = event_;
  args.callback = &ready_trampoline;
  auto* call = new ReadyCall{api_, fn, arg};
  args.user_arg = call;
  PJRT_Error* err = api_->PJRT_Event_OnReady(&args);
  if (err) delete call;  // not registered: the callback never runs
  check(api_, err, "Event_OnReady");
}

// ---------------------------------------------------------------- Buffer

Buffer::Buffer(const Api* api, PJRT_Buffer* buffer, hlo::TensorType type)
    : api_(api), buffer_(buffer), type_(std::move(type)) {}

// PJRT_Buffer_Destroy waits for the computations still using the buffer (the
// XLA CPU plugin blocks until an execution that reads it has finished). Eager
// code drops tensors right after their last use -- an op's dead input, the
// parameters of a graph just launched -- so destroying them in place would
// make the host wait for the device at almost every op. The destroy runs on
// the release thread instead; nothing else about the buffer changes, since
// its owner has let go of it.
Buffer::~Buffer() {
  const Api* api = api_;
  PJRT_Buffer* buffer = buffer_;
  release_later(
      [api, buffer] {
        PJRT_Buffer_Destroy_Args args{};
        args.struct_size = PJRT_Buffer_Destroy_Args_STRUCT_SIZE;
        args.buffer = buffer;
        api->PJRT_Buffer_Destroy(&args);  // an error here has nobody left to tell
      },
      static_cast<size_t>(type_.nbytes()));
}

void Buffer::to_host(void* dst) const {
  PJRT_Buffer_ToHostBuffer_Args args{};
  args.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE;
  args.src = buffer_;
  args.dst = dst;
  args.dst_size = static_cast<size_t>(type_.nbytes());
  check(api_, api_->PJRT_Buffer_ToHostBuffer(&args), "Buffer_ToHostBuffer");
  await_event(api_, args.event, "Buffer_ToHostBuffer", /*writes_host=*/true);
}

void Buffer::await_ready() const {
  PJRT_Buffer_ReadyEvent_Args args{};
  args.struct_size = PJRT_Buffer_ReadyEvent_Args_STRUCT_SIZE;
  args.buffer = buffer_;
  check(api_, api_->PJRT_Buffer_ReadyEvent(&args), "Buffer_ReadyEvent");
  await_event(api_, args.event, "Buffer_ReadyEvent");
}

bool Buffer::is_deleted() const {
  PJRT_Buffer_IsDeleted_Args args{};
  args.struct_size = PJRT_Buffer_IsDeleted_Args_STRUCT_SIZE;
  args.buffer = buffer_;
  check(api_, api_->PJRT_Buffer_IsDeleted(&args), "Buffer_IsDeleted");
  return args.is_deleted;
}

// ---------------------------------------------------------------- Executable

Executable::Executable(const Api* api, PJRT_LoadedExecutable* exe,
                       std::vector<hlo::TensorType> outputs, std::vector<PJRT_Device*> devices,
                       int num_replicas)
    : api_(api),
      exe_(exe),
      outputs_(std::move(outputs)),
      devices_(std::move(devices)),
      replicas_(num_replicas) {}

Executable::~Executable() {
  PJRT_LoadedExecutable_Destroy_Args args{};
  args.struct_size = PJRT_LoadedExecutable_Destroy_Args_STRUCT_SIZE;
  args.executable = exe_;
  api_->PJRT_LoadedExecutable_Destroy(&args);
}

std::vector<std::unique_ptr<Buffer>> Executable::execute(const std::vector<const Buffer*>& args,
                                                         const std::vector<bool>& donated,
                                                         int device_index,
                                                         std::unique_ptr<Event>* done) const {
  TPU_CHECK(device_index >= 0 && device_index < static_cast<int>(devices_.size()),
            ErrorKind::Runtime, "invalid device index ", device_index);
  TPU_CHECK(replicas_ == 1, ErrorKind::Runtime, "an executable compiled for ", replicas_,
            " replicas is launched with execute_replicated");
  // Scratch reused by every launch of this thread (strict mode launches per op).
  thread_local std::vector<PJRT_Buffer*> raw_args, raw_out;
  thread_local std::vector<int64_t> keep;  // PJRT donates every aliased input not listed here
  raw_args.resize(args.size());
  keep.clear();
  for (size_t i = 0; i < args.size(); ++i) {
    raw_args[i] = args[i]->raw();
    if (i >= donated.size() || !donated[i]) keep.push_back(static_cast<int64_t>(i));
  }
  PJRT_ExecuteOptions options{};
  options.struct_size = PJRT_ExecuteOptions_STRUCT_SIZE;
  options.non_donatable_input_indices = keep.data();
  options.num_non_donatable_input_indices = keep.size();

  raw_out.assign(outputs_.size(), nullptr);
  PJRT_Buffer* const* arg_list = raw_args.data();
  PJRT_Buffer** out_list = raw_out.data();

  PJRT_LoadedExecutable_Execute_Args ex{};
  ex.struct_size = PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE;
  ex.executable = exe_;
  ex.options = &options;
  ex.argument_lists = &arg_list;
  ex.num_devices = 1;
  ex.num_args = raw_args.size();
  ex.output_lists = &out_list;
  ex.execute_device = devices_[device_index];
  PJRT_Event* complete = nullptr;
  if (done) ex.device_complete_events = &complete;
  check(api_, api_->PJRT_LoadedExecutable_Execute(&ex), "LoadedExecutable_Execute");
  if (done && complete) *done = std::make_unique<Event>(api_, complete);

  std::vector<std::unique_ptr<Buffer>> result;
  result.reserve(outputs_.size());
  for (size_t i = 0; i < outputs_.size(); ++i)
    result.push_back(std::make_unique<Buffer>(api_, raw_out[i], outputs_[i]));
  return result;
}

std::vector<std::vector<std::unique_ptr<Buffer>>> Executable::execute_replicated(
    const std::vector<std::vector<const Buffer*>>& args) const {
  TPU_CHECK(static_cast<int>(args.size()) == replicas_, ErrorKind::Runtime, "expected ",
            replicas_, " argument lists (one per replica), got ", args.size());
  const size_t num_args = args.empty() ? 0 : args[0].size();
  std::vector<std::vector<PJRT_Buffer*>> raw_args(args.size());
  std::vector<PJRT_Buffer* const*> arg_lists(args.size());
  for (size_t r = 0; r < args.size(); ++r) {
    TPU_CHECK(args[r].size() == num_args, ErrorKind::Runtime, "replica ", r, " has ",
              args[r].size(), " arguments, replica 0 has ", num_args);
    for (const Buffer* b : args[r]) raw_args[r].push_back(b->raw());
    arg_lists[r] = raw_args[r].data();
  }
  std::vector<int64_t> keep(num_args);
  for (size_t i = 0; i < num_args; ++i) keep[i] = static_cast<int64_t>(i);
  PJRT_ExecuteOptions options{};
  options.struct_size = PJRT_ExecuteOptions_STRUCT_SIZE;
  options.non_donatable_input_indices = keep.data();
  options.num_non_donatable_input_indices = keep.size();

  std::vector<std::vector<PJRT_Buffer*>> raw_out(args.size(),
                                                 std::vector<PJRT_Buffer*>(outputs_.size()));
  std::vector<PJRT_Buffer**> out_lists(args.size());
  for (size_t r = 0; r < args.size(); ++r) out_lists[r] = raw_out[r].data();

  // No execute_device: the plugin launches replica r on the device the
  // compile-time device assignment gave it.
  PJRT_LoadedExecutable_Execute_Args ex{};
  ex.struct_size = PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE;
  ex.executable = exe_;
  ex.options = &options;
  ex.argument_lists = arg_lists.data();
  ex.num_devices = args.size();
  ex.num_args = num_args;
  ex.output_lists = out_lists.data();
  check(api_, api_->PJRT_LoadedExecutable_Execute(&ex), "LoadedExecutable_Execute");

  std::vector<std::vector<std::unique_ptr<Buffer>>> result(args.size());
  for (size_t r = 0; r < args.size(); ++r)
    for (size_t i = 0; i < outputs_.size(); ++i)
      result[r].push_back(std::make_unique<Buffer>(api_, raw_out[r][i], outputs_[i]));
  return result;
}

std::string Executable::serialize() const {
  PJRT_LoadedExecutable_GetExecutable_Args get{};
  get.struct_size = PJRT_LoadedExecutable_GetExecutable_Args_STRUCT_SIZE;
  get.loaded_executable = exe_;
  check(api_, api_->PJRT_LoadedExecutable_GetExecutable(&get), "LoadedExecutable_GetExecutable");

  PJRT_Executable_Serialize_Args ser{};
  ser.struct_size = PJRT_Executable_Serialize_Args_STRUCT_SIZE;
  ser.executable = get.executable;
  PJRT_Error* err = api_->PJRT_Executable_Serialize(&ser);
  std::string bytes;
  if (err == nullptr) {
    bytes.assign(ser.serialized_bytes, ser.serialized_bytes_size);
    ser.serialized_executable_deleter(ser.serialized_executable);
  }
  PJRT_Executable_Destroy_Args destroy{};
  destroy.struct_size = PJRT_Executable_Destroy_Args_STRUCT_SIZE;
  destroy.executable = get.executable;
  api_->PJRT_Executable_Destroy(&destroy);
  check(api_, err, "Executable_Serialize");
  return bytes;
}

// ---------------------------------------------------------------- Client

Client::Client(std::shared_ptr<Plugin> plugin, const CreateOptions& options)
    : plugin_(std::move(plugin)) {
  const Api* api = plugin_->api();
  std::vector<PJRT_NamedValue> named(options.int64s.size());
  for (size_t i = 0; i < named.size(); ++i) {
    PJRT_NamedValue& v = named[i];
    v.struct_size = PJRT_NamedValue_STRUCT_SIZE;
    v.name = options.int64s[i].first.data();
    v.name_size = options.int64s[i].first.size();
    v.type = PJRT_NamedValue_kInt64;
    v.int64_value = options.int64s[i].second;
    v.value_size = 1;
  }
  PJRT_Client_Create_Args create{};
  create.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE;
  create.create_options = named.empty() ? nullptr : named.data();
  create.num_options = named.size();
  const std::vector<int> threads_before = thread_ids();
  check(api, api->PJRT_Client_Create(&create), "Client_Create");
  client_ = create.client;
  worker_threads_ = started_between(threads_before, thread_ids());

  PJRT_Client_AddressableDevices_Args devs{};
  devs.struct_size = PJRT_Client_AddressableDevices_Args_STRUCT_SIZE;
  devs.client = client_;
  check(api, api->PJRT_Client_AddressableDevices(&devs), "Client_AddressableDevices");
  devices_.assign(devs.addressable_devices, devs.addressable_devices + devs.num_addressable_devices);
  TPU_CHECK(!devices_.empty(), ErrorKind::Runtime, "PJRT plugin '", plugin_->choice().path,
            "' reports no addressable devices");
}

std::unique_ptr<Client> create_client(std::shared_ptr<Plugin> plugin, int64_t cpu_devices) {
  const CreateOptions cpu{{{"cpu_device_count", cpu_devices}}};
  if (plugin->choice().reason == "xla-cpu-pjrt") return std::make_unique<Client>(plugin, cpu);
  auto client = std::make_unique<Client>(plugin);
  if (client->platform_name() != "cpu" || client->device_count() == cpu_devices) return client;
  client.reset();  // its worker threads go before the next client starts its own
  return std::make_unique<Client>(plugin, cpu);
}

void Client::keep_devices(const std::vector<int>& indices) {
  std::vector<PJRT_Device*> kept;
  for (int i : indices) {
    TPU_CHECK(i >= 0 && i < device_count(), ErrorKind::Runtime, "invalid device index ", i, ": ",
              device_count(), " device(s) available");
    TPU_CHECK(std::find(kept.begin(), kept.end(), devices_[i]) == kept.end(), ErrorKind::Runtime,
              "device index ", i, " kept twice");
    kept.push_back(devices_[i]);
  }
  TPU_CHECK(!kept.empty(), ErrorKind::Runtime, "a client must keep at least one device");
  devices_ = std::move(kept);
}

Client::~Client() {
  PJRT_Client_Destroy_Args args{};
  args.struct_size = PJRT_Client_Destroy_Args_STRUCT_SIZE;
  args.client = client_;
  plugin_->api()->PJRT_Client_Destroy(&args);
}

std::string Client::platform_name() const {
  PJRT_Client_PlatformName_Args args{};
  args.struct_size = PJRT_Client_PlatformName_Args_STRUCT_SIZE;
  args.client = client_;
  check(plugin_->api(), plugin_->api()->PJRT_Client_PlatformName(&args), "Client_PlatformName");
  return std::string(args.platform_name, args.platform_name_size);
}

std::string Client::platform_version() const {
  PJRT_Client_PlatformVersion_Args args{};
  args.struct_size = PJRT_Client_PlatformVersion_Args_STRUCT_SIZE;
  args.client = client_;
  check(plugin_->api(), plugin_->api()->PJRT_Client_PlatformVersion(&args),
        "Client_PlatformVersion");
  return std::string(args.platform_version, args.platform_version_size);
}

DeviceInfo Client::device_info(int index) const {
  TPU_CHECK(index >= 0 && index < device_count(), ErrorKind::Runtime, "invalid device index ",
            index, ": ", device_count(), " device(s) available");
  const Api* api = plugin_->api();
  PJRT_Device_GetDescription_Args get{};
  get.struct_size = PJRT_Device_GetDescription_Args_STRUCT_SIZE;
  get.device = devices_[index];
  check(api, api->PJRT_Device_GetDescription(&get), "Device_GetDescription");

  DeviceInfo info;
  PJRT_DeviceDescription_Id_Args id{};
  id.struct_size = PJRT_DeviceDescription_Id_Args_STRUCT_SIZE;
  id.device_description = get.device_description;
  check(api, api->PJRT_DeviceDescription_Id(&id), "DeviceDescription_Id");
  info.id = id.id;
  PJRT_DeviceDescription_Kind_Args kind{};
  kind.struct_size = PJRT_DeviceDescription_Kind_Args_STRUCT_SIZE;
  kind.device_description = get.device_description;
  check(api, api->PJRT_DeviceDescription_Kind(&kind), "DeviceDescription_Kind");
  info.kind.assign(kind.device_kind, kind.device_kind_size);
  PJRT_DeviceDescription_DebugString_Args dbg{};
  dbg.struct_size = PJRT_DeviceDescription_DebugString_Args_STRUCT_SIZE;
  dbg.device_description = get.device_description;
  check(api, api->PJRT_DeviceDescription_DebugString(&dbg), "DeviceDescription_DebugString");
  info.debug_string.assign(dbg.debug_string, dbg.debug_string_size);
  PJRT_DeviceDescription_Attributes_Args attrs{};
  attrs.struct_size = PJRT_DeviceDescription_Attributes_Args_STRUCT_SIZE;
  attrs.device_description = get.device_description;
  check(api, api->PJRT_DeviceDescription_Attributes(&attrs), "DeviceDescription_Attributes");
  for (size_t i = 0; i < attrs.num_attributes; ++i) {
    const PJRT_NamedValue& v = attrs.attributes[i];
    info.attributes.emplace_back(std::string(v.name, v.name_size), named_value_text(v));
  }
  return info;
}

DeviceMemory Client::device_memory(int index) const {
  TPU_CHECK(index >= 0 && index < device_count(), ErrorKind::Runtime, "invalid device index ",
            index, ": ", device_count(), " device(s) available");
  const Api* api = plugin_->api();
  DeviceMemory m;
  if (api->struct_size <= offsetof(PJRT_Api, PJRT_Device_MemoryStats) ||
      api->PJRT_Device_MemoryStats == nullptr)
    return m;
  PJRT_Device_MemoryStats_Args args{};
  args.struct_size = PJRT_Device_MemoryStats_Args_STRUCT_SIZE;
  args.device = devices_[index];
  PJRT_Error* err = api->PJRT_Device_MemoryStats(&args);
  if (err) {
    // The CPU plugin answers UNIMPLEMENTED: no figures, not a failure.
    try {
      check(api, err, "Device_MemoryStats");
    } catch (const Error&) {
    }
    return m;
  }
  m.known = true;
  m.bytes_in_use = args.bytes_in_use;
  m.bytes_limit = args.bytes_limit_is_set ? args.bytes_limit : 0;
  return m;
}

std::unique_ptr<Executable> Client::compile(const std::string& mlir,
                                            std::vector<hlo::TensorType> output_types,
                                            int device_index) const {
  TPU_CHECK(device_index >= 0 && device_index < device_count(), ErrorKind::Runtime,
            "invalid device index ", device_index);
  return compile_with(mlir, std::move(output_types), {device_index});
}

std::unique_ptr<Executable> Client::compile_replicated(const std::string& mlir,
                                                       std::vector<hlo::TensorType> output_types,
                                                       int num_replicas) const {
  TPU_CHECK(num_replicas >= 1 && num_replicas <= device_count(), ErrorKind::Runtime, "cannot place ",
            num_replicas, " replicas on ", device_count(), " addressable device(s)");
  std::vector<int> devices(num_replicas);
  for (int r = 0; r < num_replicas; ++r) devices[r] = r;
  return compile_with(mlir, std::move(output_types), devices);
}

std::unique_ptr<Executable> Client::compile_with(const std::string& mlir,
                                                 std::vector<hlo::TensorType> output_types,
                                                 const std::vector<int>& replica_devices) const {
  std::vector<int64_t> ids;
  for (int d : replica_devices) ids.push_back(device_info(d).id);
  const std::string options = compile_options(ids);
  static const char kFormat[] = "mlir";
  PJRT_Program program{};
  program.struct_size = PJRT_Program_STRUCT_SIZE;
  program.code = const_cast<char*>(mlir.data());
  program.code_size = mlir.size();
  program.format = kFormat;
  program.format_size = sizeof(kFormat) - 1;

  PJRT_Client_Compile_Args args{};
  args.struct_size = PJRT_Client_Compile_Args_STRUCT_SIZE;
  args.client = client_;
  args.program = &program;
  args.compile_options = options.data();
  args.compile_options_size = options.size();
  check(plugin_->api(), plugin_->api()->PJRT_Client_Compile(&args), "Client_Compile");
  return std::make_unique<Executable>(plugin_->api(), args.executable, std::move(output_types),
                                      devices_, static_cast<int>(replica_devices.size()));
}

std::unique_ptr<Executable> Client::deserialize(const std::string& bytes,
                                                std::vector<hlo::TensorType> output_types) const {
  PJRT_Executable_DeserializeAndLoad_Args args{};
  args.struct_size = PJRT_Executable_DeserializeAndLoad_Args_STRUCT_SIZE;
  args.client = client_;
  args.serialized_executable = bytes.data();
  args.serialized_executable_size = bytes.size();
  check(plugin_->api(), plugin_->api()->PJRT_Executable_DeserializeAndLoad(&args),
        "Executable_DeserializeAndLoad");
  return std::make_unique<Executable>(plugin_->api(), args.loaded_executable,
                                      std::move(output_types), devices_);
}

std::unique_ptr<Buffer> Client::from_host(const void* data, const hlo::TensorType& type,
                                          int device_index, std::unique_ptr<Event>* host_done) const {
  TPU_CHECK(device_index >= 0 && device_index < device_count(), ErrorKind::Runtime,
            "invalid device index ", device_index);
  PJRT_Client_BufferFromHostBuffer_Args args{};
  args.struct_size = PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE;
  args.client = client_;
  args.data = data;
  args.type = to_pjrt(type.dtype);
  args.dims = type.shape.data();
  args.num_dims = type.shape.size();
  args.host_buffer_semantics = host_done ? PJRT_HostBufferSemantics_kImmutableUntilTransferCompletes
                                         : PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
  args.device = devices_[device_index];
  check(plugin_->api(), plugin_->api()->PJRT_Client_BufferFromHostBuffer(&args),
        "Client_BufferFromHostBuffer");
  if (host_done && args.done_with_host_buffer)
    *host_done = std::make_unique<Event>(plugin_->api(), args.done_with_host_buffer);
  else
    destroy_event(plugin_->api(), args.done_with_host_buffer);
  return std::make_unique<Buffer>(plugin_->api(), args.buffer, type);
}

std::unique_ptr<Buffer> Client::copy_to_device(const Buffer& src, int device_index) const {
  TPU_CHECK(device_index >= 0 && device_index < device_count(), ErrorKind::Runtime,
            "invalid device index ", device_index);
  PJRT_Buffer_CopyToDevice_Args args{};
  args.struct_size = PJRT_Buffer_CopyToDevice_Args_STRUCT_SIZE;
  args.buffer = src.raw();
  args.dst_device = devices_[device_index];
  check(plugin_->api(), plugin_->api()->PJRT_Buffer_CopyToDevice(&args), "Buffer_CopyToDevice");
  return std::make_unique<Buffer>(plugin_->api(), args.dst_buffer, src.type());
}

int Client::device_of(const Buffer& b) const {
  PJRT_Buffer_Device_Args args{};
  args.struct_size = PJRT_Buffer_Device_Args_STRUCT_SIZE;
  args.buffer = b.raw();
  check(plugin_->api(), plugin_->api()->PJRT_Buffer_Device(&args), "Buffer_Device");
  auto it = std::find(devices_.begin(), devices_.end(), args.device);
  TPU_CHECK(it != devices_.end(), ErrorKind::Runtime, "buffer on a device this client cannot address");
  return static_cast<int>(it - devices_.begin());
}

}  // namespace torch_tpu::pjrt
