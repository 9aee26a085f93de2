#include "runtime/index_flags.h"

#include <mutex>

#include "common/error.h"

namespace torch_tpu::runtime {

namespace {

struct Watched {
  std::shared_ptr<DeviceBuffer> flag;
  std::string message;
  std::vector<std::weak_ptr<DeviceBuffer>> results;
};

std::mutex mu;
std::vector<Watched> watched;
// A loop of checked ops that never reads anything back still reads its
// flags every so often, so they do not pile up.
constexpr size_t kMaxWatched = 1024;
thread_local bool checking = false;  // reading a flag is a to_host too

}  // namespace

void watch_index_flag(std::shared_ptr<DeviceBuffer> flag, std::string message,
                      std::vector<std::weak_ptr<DeviceBuffer>> results) {
  size_t n;
  {
    std::lock_guard<std::mutex> lock(mu);
    watched.push_back({std::move(flag), std::move(message), std::move(results)});
    n = watched.size();
  }
  if (n > kMaxWatched) check_index_flags();
}

void check_index_flags() {
  if (checking) return;
  std::vector<Watched> ran;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (watched.empty()) return;
    std::vector<Watched> pending;
    for (auto& w : watched) (w.flag->graph() ? pending : ran).push_back(std::move(w));
    watched = std::move(pending);
  }
  checking = true;
  struct Reset {
    ~Reset() { checking = false; }
  } reset;
  std::string first;
  for (const Watched& w : ran) {
    if (w.flag->state() == DeviceBuffer::State::Error) continue;  // the op failed anyway
    uint8_t set = 0;
    try {
      w.flag->to_host(&set);
    } catch (const Error&) {
      continue;
    }
    if (!set) continue;
    for (const auto& r : w.results)
      if (auto b = r.lock()) b->set_error(w.message);
    if (first.empty()) first = w.message;
  }
  if (!first.empty()) fail(ErrorKind::Index, first);
}

}  // namespace torch_tpu::runtime
