// The persistent executable cache, shared by every eager mode and process.
// An entry is a file named by a 128-bit hash of its key (program text,
// plugin path and version, XLA_FLAGS, device). Entries of another kind (the
// StableHLO text a jax_op traced, python/torch_tpu/kernels/trace_cache.py) share the
// folder, the format, the checks and the size bound; their kind is part of
// the key. Layout:
//   "TPUEXE02" | checksum (u64) | header length (u64) | header |
//   key length (u64) | key | PJRT-serialized executable
// The header names the plugin, its version, the flags and the device in
// text, for people and tools. The checksum (64-bit FNV-1a of everything
// after it) is verified before a byte reaches the plugin, whose deserializer
// trusts its input: a flipped bit or a torn write would otherwise crash the
// process or load a wrong program. FNV-1a's steps are bijective, so a change
// confined to one byte always changes it. A damaged entry is a miss: the
// program is compiled again and the entry replaced, with a one-time warning.
// The key itself is compared too, so a hash collision or another plugin
// never yields a wrong executable. Writes go to a temporary file renamed
// into place (atomic for concurrent processes; a writer killed half way
// leaves only its temporary file, removed by a later eviction); eviction of
// the least recently used entries runs under an flock so two processes never
// race on it. A folder that cannot be created, read or written disables
// what it cannot do, and says so once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace torch_tpu::runtime {

// What a cache entry is for. Its key is all of it.
struct CacheKey {
  std::string kind;  // empty: a PJRT-serialized executable
  std::string plugin, version, xla_flags;
  int device = 0;
  std::string program;
  std::string text() const;
};

class DiskCache {
 public:
  DiskCache(std::string dir, int64_t max_bytes);
  // `damaged`: set when an entry existed but failed its checks.
  std::optional<std::string> load(const CacheKey& key, bool* damaged = nullptr);
  void store(const CacheKey& key, const std::string& executable);
  const std::string& dir() const { return dir_; }

 private:
  std::string path_of(const std::string& key) const;
  void evict();
  std::string dir_;
  int64_t max_bytes_;
  bool readable_ = false, writable_ = false;
};

// The cache under TORCH_TPU_CACHE_DIR.
DiskCache& disk_cache();

}  // namespace torch_tpu::runtime
