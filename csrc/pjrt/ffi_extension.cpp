// Handlers reach the plugin through trampolines. XLA asks a handler for its
// metadata when it is registered, and refuses one built against newer FFI
// headers than its own runtime (jaxlib 0.10.2's headers say API 0.3, the CPU
// plugin's XLA speaks 0.2) -- silently: the PJRT call succeeds and the first
// compile finds no handler. Within a major version the ABI of what a handler
// reads (call frame, buffers, attributes) does not change, so each handler is
// registered behind a trampoline of its own that forwards every call and, in
// the metadata reply, claims no newer minor version than the runtime's. A
// handler that calls FFI functions the runtime lacks stays unsupported.
#include "pjrt/ffi_extension.h"

#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <utility>

#include "common/error.h"

#ifdef TORCH_TPU_XLA_FFI
#include "xla/ffi/api/c_api.h"
#endif

namespace torch_tpu::pjrt {

namespace {

// The plugin's declarations (see the header), under names of our own.
struct FfiRegisterHandlerArgs {
  size_t struct_size;
  const char* target_name;
  size_t target_name_size;
  void* handler;
  const char* platform_name;
  size_t platform_name_size;
  uint32_t traits;  // PJRT_FFI_Handler_TraitsBits; none asked for
};
constexpr size_t kRegisterHandlerArgsSize = offsetof(FfiRegisterHandlerArgs, traits) + sizeof(uint32_t);

using FfiRegisterHandler = PJRT_Error* (*)(FfiRegisterHandlerArgs*);

struct FfiExtension {
  PJRT_Extension_Base base;
  void* type_register;
  void* user_data_add;
  FfiRegisterHandler register_handler;
};
constexpr size_t kFfiExtensionSize = offsetof(FfiExtension, register_handler) + sizeof(FfiRegisterHandler);

// The extension, when the plugin's chain holds one recent enough to register handlers.
const FfiExtension* find(const Plugin& plugin) {
  const Api* api = plugin.api();
  if (api->struct_size < offsetof(PJRT_Api, extension_start) + sizeof(api->extension_start)) return nullptr;
  for (const PJRT_Extension_Base* e = api->extension_start; e != nullptr; e = e->next) {
    if (e->type == PJRT_Extension_Type_FFI)
      return e->struct_size >= kFfiExtensionSize ? reinterpret_cast<const FfiExtension*>(e) : nullptr;
  }
  return nullptr;
}

#ifdef TORCH_TPU_XLA_FFI
constexpr int kSlots = 128;
std::array<std::atomic<XLA_FFI_Handler*>, kSlots> slots;

template <int I>
XLA_FFI_Error* trampoline(XLA_FFI_CallFrame* frame) {
  XLA_FFI_Error* error = slots[I].load(std::memory_order_acquire)(frame);
  const XLA_FFI_Extension_Base* ext = frame->extension_start;
  if (error == nullptr && ext != nullptr && ext->type == XLA_FFI_Extension_Metadata) {
    XLA_FFI_Metadata* meta = reinterpret_cast<const XLA_FFI_Metadata_Extension*>(ext)->metadata;
    const XLA_FFI_Api_Version& runtime = frame->api->api_version;
    if (meta->api_version.major_version == runtime.major_version &&
        meta->api_version.minor_version > runtime.minor_version)
      meta->api_version.minor_version = runtime.minor_version;
  }
  return error;
}

template <int... I>
constexpr std::array<XLA_FFI_Handler*, sizeof...(I)> trampolines(std::integer_sequence<int, I...>) {
  return {&trampoline<I>...};
}
constexpr auto kTrampolines = trampolines(std::make_integer_sequence<int, kSlots>{});
#endif

struct Registered {
  void* handler;
  int slot;
};

}  // namespace

std::string ffi_platform(const Plugin& plugin, const std::string& client_platform) {
#ifdef TORCH_TPU_XLA_FFI
  if (find(plugin) == nullptr) return "";
  if (client_platform == "cpu") return "Host";
  if (client_platform == "cuda" || client_platform == "gpu") return "CUDA";
#endif
  return "";
}

void register_ffi_handler(const Plugin& plugin, const std::string& target, void* handler,
                          const std::string& platform) {
  const FfiExtension* ffi = find(plugin);
  TPU_CHECK(ffi != nullptr, ErrorKind::NotImplemented, "the PJRT plugin ", plugin.choice().path,
            " offers no FFI extension: custom-call handlers cannot be registered with it");
  TPU_CHECK(handler != nullptr, ErrorKind::Value, "the FFI handler for '", target, "' is a null pointer");
#ifndef TORCH_TPU_XLA_FFI
  fail(ErrorKind::NotImplemented, "torch_tpu was built without XLA's FFI header (jaxlib's ",
       "xla/ffi/api/c_api.h): reinstall it with jaxlib present to register FFI handlers");
#else
  static std::mutex mu;
  // never destroyed: used during exit
  static auto& registered = *new std::map<std::pair<std::string, std::string>, Registered>;
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_pair(target, platform);
  if (auto it = registered.find(key); it != registered.end()) {
    TPU_CHECK(it->second.handler == handler, ErrorKind::Value, "FFI target '", target, "' on ", platform,
              " is registered already, with another handler (the plugin's registry is for the process)");
    return;
  }
  int slot = static_cast<int>(registered.size());
  TPU_CHECK(slot < kSlots, ErrorKind::Runtime, "at most ", kSlots, " FFI handlers can be registered in a process");
  slots[slot].store(reinterpret_cast<XLA_FFI_Handler*>(handler), std::memory_order_release);
  FfiRegisterHandlerArgs args{};
  args.struct_size = kRegisterHandlerArgsSize;
  args.target_name = target.data();
  args.target_name_size = target.size();
  args.handler = reinterpret_cast<void*>(kTrampolines[slot]);
  args.platform_name = platform.data();
  args.platform_name_size = platform.size();
  check(plugin.api(), ffi->register_handler(&args), "PJRT_FFI_Register_Handler");
  registered.emplace(key, Registered{handler, slot});
#endif
}

}  // namespace torch_tpu::pjrt
