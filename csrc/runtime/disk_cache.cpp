#include "runtime/disk_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

#include "common/env.h"

namespace torch_tpu::runtime {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'T', 'P', 'U', 'E', 'X', 'E', '0', '1'};

uint64_t fnv1a(const std::string& s, uint64_t h) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

std::string hex128(const std::string& key) {
  char buf[33];
  snprintf(buf, sizeof buf, "%016llx%016llx",
           static_cast<unsigned long long>(fnv1a(key, 1469598103934665603ULL)),
           static_cast<unsigned long long>(fnv1a(key, 0x9e3779b97f4a7c15ULL)));
  return buf;
}

}  // namespace

DiskCache::DiskCache(std::string dir, int64_t max_bytes)
    : dir_(std::move(dir)), max_bytes_(max_bytes) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  usable_ = !ec && fs::is_directory(dir_, ec) && access(dir_.c_str(), W_OK) == 0;
}

std::string DiskCache::path_of(const std::string& key) const {
  return (fs::path(dir_) / (hex128(key) + ".exe")).string();
}

std::optional<std::string> DiskCache::load(const std::string& key) {
  if (!usable_) return std::nullopt;
  std::string path = path_of(key);
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  std::string data = ss.str();
  if (data.size() < sizeof(kMagic) + 8 || data.compare(0, 8, kMagic, 8) != 0) return std::nullopt;
  uint64_t key_size = 0;
  std::memcpy(&key_size, data.data() + 8, 8);
  if (data.size() < 16 + key_size || data.compare(16, key_size, key) != 0) return std::nullopt;
  std::error_code ec;
  fs::last_write_time(path, fs::file_time_type::clock::now(), ec);  // recently used
  return data.substr(16 + key_size);
}

void DiskCache::store(const std::string& key, const std::string& executable) {
  if (!usable_ || executable.empty()) return;
  std::string path = path_of(key);
  std::mt19937_64 rng(std::random_device{}());
  std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(rng());
  {
    std::ofstream out(tmp, std::ios::binary);
    uint64_t key_size = key.size();
    out.write(kMagic, 8);
    out.write(reinterpret_cast<const char*>(&key_size), 8);
    out.write(key.data(), static_cast<std::streamsize>(key.size()));
    out.write(executable.data(), static_cast<std::streamsize>(executable.size()));
    if (!out) {
      out.close();
      std::remove(tmp.c_str());
      return;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) std::remove(tmp.c_str());
  evict();
}

void DiskCache::evict() {
  std::string lock_path = (fs::path(dir_) / ".lock").string();
  int fd = open(lock_path.c_str(), O_CREAT | O_RDWR, 0644);
  if (fd < 0) return;
  if (flock(fd, LOCK_EX) == 0) {
    struct Entry {
      fs::path path;
      fs::file_time_type time;
      int64_t size;
    };
    std::vector<Entry> entries;
    int64_t total = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_, ec)) {
      if (e.path().extension() != ".exe") continue;
      int64_t size = static_cast<int64_t>(e.file_size(ec));
      entries.push_back({e.path(), e.last_write_time(ec), size});
      total += size;
    }
    std::sort(entries.begin(), entries.end(),
              [](const Entry& a, const Entry& b) { return a.time < b.time; });
    for (const auto& e : entries) {
      if (total <= max_bytes_) break;
      fs::remove(e.path, ec);
      total -= e.size;
    }
    flock(fd, LOCK_UN);
  }
  close(fd);
}

DiskCache& disk_cache() {
  static DiskCache cache(env().cache_dir, env().cache_max_bytes);
  return cache;
}

}  // namespace torch_tpu::runtime
