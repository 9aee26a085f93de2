// The persistent executable cache, shared by every eager mode and process.
// An entry is a file named by a 128-bit hash of its key (program text,
// plugin path and version, device), holding the key itself (checked on load,
// so a hash collision or another plugin never yields a wrong executable) and
// the PJRT-serialized executable. Writes go to a temporary file renamed into
// place (atomic for concurrent processes); eviction of the least recently
// used entries runs under an flock so two processes never race on it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace torch_tpu::runtime {

class DiskCache {
 public:
  DiskCache(std::string dir, int64_t max_bytes);
  std::optional<std::string> load(const std::string& key);
  void store(const std::string& key, const std::string& executable);
  const std::string& dir() const { return dir_; }

 private:
  std::string path_of(const std::string& key) const;
  void evict();
  std::string dir_;
  int64_t max_bytes_;
  bool usable_ = false;
};

// The cache under TORCH_TPU_CACHE_DIR.
DiskCache& disk_cache();

}  // namespace torch_tpu::runtime
