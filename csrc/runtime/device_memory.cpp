#include "runtime/device_memory.h"

#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "common/error.h"
#include "runtime/memory_stats.h"
#include "runtime/runtime.h"

namespace torch_tpu::runtime {

namespace {

std::mutex mu;
std::map<int, double>& fractions = *new std::map<int, double>;  // never destroyed: used during exit

// /proc/meminfo's "MemTotal" / "MemAvailable", in bytes (0 if absent).
int64_t meminfo(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) != 0) continue;
    std::istringstream fields(line.substr(key.size() + 1));
    int64_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return 0;
}

}  // namespace

DeviceMemoryInfo device_memory_info(int device) {
  Runtime& rt = Runtime::get();
  rt.check_device(device);
  pjrt::DeviceMemory m = rt.client().device_memory(device);
  DeviceMemoryInfo info;
  if (m.known && m.bytes_limit > 0) {
    info.total = m.bytes_limit;
    info.free = std::max<int64_t>(0, m.bytes_limit - m.bytes_in_use);
    info.source = "plugin";
  } else {
    info.total = meminfo("MemTotal");
    info.free = meminfo("MemAvailable");
    info.source = "host";
  }
  return info;
}

void set_memory_fraction(int device, double fraction) {
  Runtime::get().check_device(device);
  TPU_CHECK(fraction >= 0.0 && fraction <= 1.0, ErrorKind::Value, "Invalid fraction value: ",
            fraction, ". Allowed range: 0~1");
  std::lock_guard<std::mutex> lock(mu);
  fractions[device] = fraction;
}

double memory_fraction(int device) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = fractions.find(device);
  return it == fractions.end() ? 1.0 : it->second;
}

int64_t memory_limit(int device) {
  return static_cast<int64_t>(memory_fraction(device) *
                              static_cast<double>(device_memory_info(device).total));
}

void check_allocation(int device, int64_t bytes, const std::function<std::string()>& what) {
  if (bytes <= 0) return;
  int64_t in_use = memory_stats(device).bytes.current;
  // Cheap test first: the limit reads /proc/meminfo on the CPU plugin.
  static thread_local int64_t known_total = 0;
  if (known_total > 0 && in_use + bytes < known_total / 2 && memory_fraction(device) >= 0.5) return;
  DeviceMemoryInfo info = device_memory_info(device);
  known_total = info.total;
  int64_t limit = static_cast<int64_t>(memory_fraction(device) * static_cast<double>(info.total));
  if (in_use + bytes <= limit) return;
  record_oom(device);
  char fraction[32];
  snprintf(fraction, sizeof fraction, "%.2f", memory_fraction(device));
  fail(ErrorKind::OutOfMemory, "tpu out of memory: ", what(), " tried to allocate ",
       format_bytes(bytes), "; tpu:", device, " has ", format_bytes(info.total), " in total (",
       info.source == "plugin" ? "reported by the PJRT plugin" : "host memory: the plugin reports none",
       "), ", format_bytes(in_use), " in use by tensors, process limit ", format_bytes(limit),
       " (memory fraction ", fraction, ")");
}

std::string format_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while ((v >= 1024.0 || v <= -1024.0) && u < 5) {
    v /= 1024.0;
    ++u;
  }
  char buf[48];
  if (u == 0) snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  else snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  return buf;
}

}  // namespace torch_tpu::runtime
