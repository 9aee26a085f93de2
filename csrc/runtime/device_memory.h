// How much memory a device has, and the guard that refuses an allocation
// beyond it. The plugin's own figures (PJRT_Device_MemoryStats) are used
// where it reports them; the CPU plugin reports none, and its "device memory"
// is host memory, so there the host's MemTotal / MemAvailable stand in.
//
// The guard runs before a program is launched, with the bytes its new
// outputs need: asking for more than the limit (the total times the
// per-process fraction, minus what live buffers hold) raises OutOfMemory at
// once instead of letting the plugin abort or swap the machine to death.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace torch_tpu::runtime {

struct DeviceMemoryInfo {
  int64_t free = 0;
  int64_t total = 0;
  std::string source;  // "plugin" (PJRT memory stats) or "host" (/proc/meminfo)
};

DeviceMemoryInfo device_memory_info(int device);

// torch.tpu.set_per_process_memory_fraction: fraction in [0, 1].
void set_memory_fraction(int device, double fraction);
double memory_fraction(int device);
// The bytes this process may hold on the device.
int64_t memory_limit(int device);

// Throws Error(OutOfMemory) naming `what()` when `bytes` more would exceed
// the limit; counts the OOM in the device's statistics. `what` is only
// called to raise: every launch passes through here.
void check_allocation(int device, int64_t bytes, const std::function<std::string()>& what);

// "1.50 GiB"
std::string format_bytes(int64_t bytes);

}  // namespace torch_tpu::runtime
