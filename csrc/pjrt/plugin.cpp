#include "pjrt/plugin.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "common/error.h"

namespace torch_tpu::pjrt {

namespace {

std::string error_message(const Api* api, PJRT_Error* error) {
  PJRT_Error_Message_Args args{};
  args.struct_size = PJRT_Error_Message_Args_STRUCT_SIZE;
  args.error = error;
  api->PJRT_Error_Message(&args);
  return std::string(args.message, args.message_size);
}

bool is_cpu_plugin_file(const std::string& path) {
  static const std::string name = "/xla_cpu_pjrt.so";
  return path.size() >= name.size() && path.compare(path.size() - name.size(), name.size(), name) == 0;
}

// dlopen()s `path` with its logging at WARNING unless the user set a level.
// XLA's CPU plugin writes an INFO line to stderr for the cpu_device_count
// option that the runtime always passes it (create_client), and absl a line
// about it; its logging reads TF_CPP_MIN_LOG_LEVEL once, while it is loaded,
// so the variable is set for the dlopen only (jaxlib's own XLA, loaded later,
// still sees the user's environment).
void* open_quietly(const std::string& path) {
  bool quiet = is_cpu_plugin_file(path) && std::getenv("TF_CPP_MIN_LOG_LEVEL") == nullptr;
  if (quiet) setenv("TF_CPP_MIN_LOG_LEVEL", "1", 0);
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (quiet) unsetenv("TF_CPP_MIN_LOG_LEVEL");
  return handle;
}

}  // namespace

void check(const Api* api, PJRT_Error* error, const char* what) {
  if (error == nullptr) return;
  std::string message = error_message(api, error);
  PJRT_Error_GetCode_Args code{};
  code.struct_size = PJRT_Error_GetCode_Args_STRUCT_SIZE;
  code.error = error;
  // The CPU plugin reports a failed allocation as INTERNAL "Out of memory
  // allocating N bytes", so the message counts as well as the code.
  bool exhausted = (api->PJRT_Error_GetCode(&code) == nullptr &&
                    code.code == PJRT_Error_Code_RESOURCE_EXHAUSTED) ||
                   message.find("Out of memory") != std::string::npos;
  PJRT_Error_Destroy_Args destroy{};
  destroy.struct_size = PJRT_Error_Destroy_Args_STRUCT_SIZE;
  destroy.error = error;
  api->PJRT_Error_Destroy(&destroy);
  fail(exhausted ? ErrorKind::OutOfMemory : ErrorKind::Runtime, "PJRT ", what, " failed: ", message);
}

std::shared_ptr<Plugin> Plugin::load(const PluginChoice& choice) {
  std::shared_ptr<Plugin> plugin(new Plugin());
  plugin->choice_ = choice;
  // RTLD_LOCAL keeps the plugin's own copies of LLVM/protobuf away from torch's.
  plugin->handle_ = open_quietly(choice.path);
  TPU_CHECK(plugin->handle_ != nullptr, ErrorKind::Runtime, "cannot load PJRT plugin '",
            choice.path, "' (", choice.reason, "): ", dlerror());
  using GetApi = const PJRT_Api* (*)();
  auto get_api = reinterpret_cast<GetApi>(dlsym(plugin->handle_, "GetPjrtApi"));
  TPU_CHECK(get_api != nullptr, ErrorKind::Runtime, "'", choice.path,
            "' is not a PJRT plugin: it does not export GetPjrtApi");
  plugin->api_ = get_api();
  TPU_CHECK(plugin->api_ != nullptr, ErrorKind::Runtime, "'", choice.path,
            "': GetPjrtApi returned null");
  const PJRT_Api* api = plugin->api_;
  TPU_CHECK(api->pjrt_api_version.major_version == PJRT_API_MAJOR, ErrorKind::Runtime,
            "PJRT plugin '", choice.path, "' speaks PJRT C API ",
            api->pjrt_api_version.major_version, ".", api->pjrt_api_version.minor_version,
            " but torch_tpu was built against ", PJRT_API_MAJOR, ".", PJRT_API_MINOR,
            " (major versions must match)");
  // Every function we call lies inside the plugin's table; a table shorter
  // than the last one we use means a plugin too old for us.
  constexpr size_t needed = offsetof(PJRT_Api, PJRT_Executable_DeserializeAndLoad) + sizeof(void*);
  TPU_CHECK(api->struct_size >= needed, ErrorKind::Runtime, "PJRT plugin '", choice.path,
            "' has a function table of ", api->struct_size, " bytes; torch_tpu needs at least ",
            needed, " (plugin too old)");
  if (api->PJRT_Plugin_Initialize != nullptr) {
    PJRT_Plugin_Initialize_Args args{};
    args.struct_size = PJRT_Plugin_Initialize_Args_STRUCT_SIZE;
    check(api, api->PJRT_Plugin_Initialize(&args), "Plugin_Initialize");
  }
  if (api->struct_size > offsetof(PJRT_Api, PJRT_Plugin_Attributes) &&
      api->PJRT_Plugin_Attributes != nullptr) {
    PJRT_Plugin_Attributes_Args args{};
    args.struct_size = PJRT_Plugin_Attributes_Args_STRUCT_SIZE;
    // Attributes are informational: a plugin that fails to give them still
    // runs, and users of a missing attribute have a fallback.
    try {
      check(api, api->PJRT_Plugin_Attributes(&args), "Plugin_Attributes");
    } catch (const Error&) {
      args.num_attributes = 0;
    }
    for (size_t i = 0; i < args.num_attributes; ++i) {
      const PJRT_NamedValue& v = args.attributes[i];
      std::string name(v.name, v.name_size);
      bool version = name.find("version") != std::string::npos;
      plugin->attributes_.emplace_back(std::move(name), named_value_text(v, version));
    }
  }
  return plugin;
}

Plugin::~Plugin() {
  // Plugins keep threads alive after their clients are gone; unloading them
  // under those threads crashes at exit, so the library stays mapped.
}

int Plugin::api_major() const { return api_->pjrt_api_version.major_version; }
int Plugin::api_minor() const { return api_->pjrt_api_version.minor_version; }

std::optional<StablehloWindow> Plugin::stablehlo_window() const {
  StablehloWindow w;
  for (const auto& [name, value] : attributes_) {
    if (name == "stablehlo_minimum_version") w.minimum = value;
    if (name == "stablehlo_current_version") w.current = value;
  }
  if (w.minimum.empty() && w.current.empty()) return std::nullopt;
  return w;
}

std::string named_value_text(const PJRT_NamedValue& v, bool dotted) {
  switch (v.type) {
    case PJRT_NamedValue_kString: return std::string(v.string_value, v.value_size);
    case PJRT_NamedValue_kInt64: return std::to_string(v.int64_value);
    case PJRT_NamedValue_kInt64List: {
      std::string text;
      for (size_t k = 0; k < v.value_size; ++k)
        text += (k ? (dotted ? "." : ",") : "") + std::to_string(v.int64_array_value[k]);
      return text;
    }
    case PJRT_NamedValue_kFloat: return std::to_string(v.float_value);
    case PJRT_NamedValue_kBool: return v.bool_value ? "1" : "0";
  }
  return "";
}

std::string Plugin::identity() const {
  return choice_.path + "#" + std::to_string(api_major()) + "." + std::to_string(api_minor());
}

}  // namespace torch_tpu::pjrt
