#pragma once

#include <memory>
#include <string>
#include <vector>

namespace torch_tpu::aten {

// "file.py:42" of the innermost Python frame outside torch and torch_tpu
// (null when no Python code is running on this thread, e.g. in backward).
std::shared_ptr<const std::string> python_origin();
// "file.py:42" of the innermost Python frame when it is outside torch and
// torch_tpu (null otherwise): where user code, not a library, copied a tensor.
std::shared_ptr<const std::string> python_caller();
// Folders whose frames are skipped (torch's and torch_tpu's own code).
void set_internal_dirs(std::vector<std::string> dirs);

}  // namespace torch_tpu::aten
