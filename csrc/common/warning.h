// Warnings from the layers below aten/, which cannot reach Python's
// warnings themselves: aten/ installs a sink that raises them as PyTorch
// warnings (TORCH_WARN); until then they go to stderr. warn_once says a
// thing once per process and key (a broken cache entry, an unwritable cache
// folder), however often it happens.
#pragma once

#include <string>

namespace torch_tpu {

using WarningSink = void (*)(const std::string& message);
void set_warning_sink(WarningSink sink);
void warn_once(const std::string& key, const std::string& message);

}  // namespace torch_tpu
