// TPU_VISIBLE_CHIPS: which of the plugin's devices this process sees, as
// CUDA_VISIBLE_DEVICES does for CUDA: the listed ones, in the listed order,
// numbered tpu:0, tpu:1... Ray gives each worker its chips this way.
//
// libtpu reads the variable itself (with TPU_CHIPS_PER_HOST_BOUNDS and
// TPU_HOST_BOUNDS, which Ray sets beside it) and its client shows only those
// chips, so on a TPU there is nothing left to select (and a v2/v3 chip is two
// devices, so chips are not device indices there). On every other plugin the
// runtime keeps the listed devices itself: on XLA's CPU plugin the chips
// index its TORCH_TPU_CPU_DEVICES devices.
#pragma once

#include "pjrt/client.h"

namespace torch_tpu::runtime {

// Keeps the devices TPU_VISIBLE_CHIPS lists (nothing to do when it is unset;
// a value it refuses was refused before the plugin was loaded); an index the
// plugin does not have is an error naming the variable.
void select_visible_chips(pjrt::Client& client);

}  // namespace torch_tpu::runtime
