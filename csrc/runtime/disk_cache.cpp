#include "runtime/disk_cache.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

#include "common/env.h"
#include "common/warning.h"

namespace torch_tpu::runtime {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'T', 'P', 'U', 'E', 'X', 'E', '0', '2'};
constexpr char kPreviousMagic[8] = {'T', 'P', 'U', 'E', 'X', 'E', '0', '1'};  // without checksum
constexpr size_t kChecksumAt = 8, kSummedFrom = 16;
// A temporary file this old whose writer is gone is a torn write.
constexpr auto kStaleTemporary = std::chrono::minutes(10);

uint64_t fnv1a(const char* p, size_t n, uint64_t h) {
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<unsigned char>(p[i])) * 1099511628211ULL;
  return h;
}
uint64_t fnv1a(const std::string& s, uint64_t h) { return fnv1a(s.data(), s.size(), h); }
constexpr uint64_t kFnvBasis = 1469598103934665603ULL;

std::string hex128(const std::string& key) {
  char buf[33];
  snprintf(buf, sizeof buf, "%016llx%016llx",
           static_cast<unsigned long long>(fnv1a(key, kFnvBasis)),
           static_cast<unsigned long long>(fnv1a(key, 0x9e3779b97f4a7c15ULL)));
  return buf;
}

void put_u64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }

bool get_u64(const std::string& in, size_t& at, uint64_t& v) {
  if (in.size() < at + 8) return false;
  std::memcpy(&v, in.data() + at, 8);
  at += 8;
  return true;
}

void warn_unwritable(const std::string& dir, const std::string& why) {
  warn_once("disk_cache.write:" + dir, "the persistent tpu compile cache in '" + dir +
                                           "' cannot be written (" + why +
                                           "): compiled programs are not saved for other processes");
}

// The temporary file of a writer that is gone (killed half way through).
bool stale_temporary(const fs::directory_entry& e) {
  std::string name = e.path().filename().string();
  size_t at = name.find(".exe.tmp.");
  if (at == std::string::npos) return false;
  std::error_code ec;
  auto age = fs::file_time_type::clock::now() - e.last_write_time(ec);
  if (ec || age < kStaleTemporary) return false;
  long pid = std::strtol(name.c_str() + at + 9, nullptr, 10);
  return pid <= 0 || (kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH);
}

}  // namespace

std::string CacheKey::text() const {
  // XLA_FLAGS change what the plugin's compiler emits (fast math, ISA), so
  // an executable compiled under other flags is another entry.
  return (kind.empty() ? "" : "kind " + kind + "|") + plugin + "|" + version + "|XLA_FLAGS " +
         xla_flags + "|device " + std::to_string(device) + "|" + program;
}

DiskCache::DiskCache(std::string dir, int64_t max_bytes)
    : dir_(std::move(dir)), max_bytes_(max_bytes) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  bool is_dir = fs::is_directory(dir_, ec);
  readable_ = is_dir && access(dir_.c_str(), R_OK | X_OK) == 0;
  writable_ = is_dir && access(dir_.c_str(), W_OK | X_OK) == 0;
  if (!readable_)
    warn_once("disk_cache.read:" + dir_, "the persistent tpu compile cache '" + dir_ +
                                             "' is not a readable folder: every program is compiled afresh");
  else if (!writable_)
    warn_unwritable(dir_, "the folder is read-only");
}

std::string DiskCache::path_of(const std::string& key) const {
  return (fs::path(dir_) / (hex128(key) + ".exe")).string();
}

std::optional<std::string> DiskCache::load(const CacheKey& k, bool* damaged) {
  if (damaged) *damaged = false;
  if (!readable_) return std::nullopt;
  std::string key = k.text();
  std::string path = path_of(key);
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  std::string data = ss.str();
  auto bad = [&](const char* what) -> std::optional<std::string> {
    if (damaged) *damaged = true;
    warn_once("disk_cache.damaged",
              std::string("a persistent tpu compile cache entry is damaged (") + what + ": " + path +
                  "); it is compiled again and replaced. Further damaged entries are replaced "
                  "without a warning");
    return std::nullopt;
  };
  if (data.compare(0, 8, kPreviousMagic, 8) == 0) return std::nullopt;  // replaced by this format
  size_t at = kChecksumAt;
  uint64_t sum = 0, header_size = 0, key_size = 0;
  if (data.size() < kSummedFrom || data.compare(0, 8, kMagic, 8) != 0 || !get_u64(data, at, sum))
    return bad("not an entry");
  if (fnv1a(data.data() + kSummedFrom, data.size() - kSummedFrom, kFnvBasis) != sum)
    return bad("checksum mismatch");
  if (!get_u64(data, at, header_size) || data.size() - at < header_size) return bad("truncated");
  at += header_size;
  if (!get_u64(data, at, key_size) || data.size() - at < key_size) return bad("truncated");
  if (data.compare(at, key_size, key) != 0) return std::nullopt;  // another key, same name
  at += key_size;
  std::error_code ec;
  fs::last_write_time(path, fs::file_time_type::clock::now(), ec);  // recently used
  return data.substr(at);
}

void DiskCache::store(const CacheKey& k, const std::string& executable) {
  if (!writable_ || executable.empty()) return;
  std::string key = k.text();
  std::string path = path_of(key);
  std::string header = (k.kind.empty() ? "" : "kind " + k.kind + "\n") + "plugin " + k.plugin +
                       "\nversion " + k.version + "\nxla_flags " + k.xla_flags + "\ndevice " +
                       std::to_string(k.device) + "\n";
  std::string entry(kMagic, 8);
  entry.reserve(kSummedFrom + 16 + header.size() + key.size() + executable.size());
  put_u64(entry, 0);  // the checksum, filled in below
  put_u64(entry, header.size());
  entry += header;
  put_u64(entry, key.size());
  entry += key;
  entry += executable;
  uint64_t sum = fnv1a(entry.data() + kSummedFrom, entry.size() - kSummedFrom, kFnvBasis);
  std::memcpy(&entry[kChecksumAt], &sum, 8);

  std::mt19937_64 rng(std::random_device{}());
  std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(rng());
  int fd = open(tmp.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return warn_unwritable(dir_, std::strerror(errno));
  size_t done = 0;
  int err = 0;
  while (done < entry.size()) {
    ssize_t w = write(fd, entry.data() + done, entry.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      err = w < 0 ? errno : ENOSPC;
      break;
    }
    done += static_cast<size_t>(w);
  }
  if (close(fd) != 0 && !err) err = errno;
  if (err) {
    std::remove(tmp.c_str());
    return warn_unwritable(dir_, std::strerror(err));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    std::remove(tmp.c_str());
    return warn_unwritable(dir_, std::strerror(err));
  }
  evict();
}

void DiskCache::evict() {
  std::string lock_path = (fs::path(dir_) / ".lock").string();
  int fd = open(lock_path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
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
      if (stale_temporary(e)) {
        fs::remove(e.path(), ec);
        continue;
      }
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
  // never destroyed: used during exit
  static auto& cache = *new DiskCache(env().cache_dir, env().cache_max_bytes);
  return cache;
}

}  // namespace torch_tpu::runtime
