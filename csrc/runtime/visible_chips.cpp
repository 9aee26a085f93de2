#include "runtime/visible_chips.h"

#include "common/env.h"
#include "common/error.h"

namespace torch_tpu::runtime {

void select_visible_chips(pjrt::Client& client) {
  const auto& chips = device_env().visible_chips;
  if (!chips || client.platform_name() == "tpu") return;
  const bool cpu = client.platform_name() == "cpu";
  std::vector<int> indices;
  for (int64_t chip : *chips) {
    TPU_CHECK(chip < client.device_count(), ErrorKind::Runtime, "TPU_VISIBLE_CHIPS lists chip ", chip,
              " but the ", client.platform_name(), " plugin has ", client.device_count(), " device(s), 0 to ",
              client.device_count() - 1,
              cpu ? " (TORCH_TPU_CPU_DEVICES=N asks XLA's CPU plugin for N)" : "");
    indices.push_back(static_cast<int>(chip));
  }
  client.keep_devices(indices);
}

}  // namespace torch_tpu::runtime
