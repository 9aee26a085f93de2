#include "runtime/runtime.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>

#include "common/env.h"
#include "common/error.h"
#include "common/fork_guard.h"
#include "common/release_queue.h"
#include "common/thread_priority.h"
#include "common/warning.h"
#include "pjrt/discovery.h"
#include "runtime/counters.h"
#include "runtime/device_buffer.h"
#include "runtime/device_timeline.h"
#include "runtime/disk_cache.h"
#include "runtime/executor.h"
#include "runtime/index_flags.h"
#include "runtime/visible_chips.h"

namespace torch_tpu::runtime {

namespace {
std::vector<std::string>& package_roots() {
  static std::vector<std::string> roots;
  return roots;
}
std::mutex init_mu;
// Never destroyed: the plugin's threads and the buffers held by static
// caches outlive any order of static destruction at exit. Atomic so that
// get(), called several times per op, takes init_mu only until it is set.
std::atomic<Runtime*> instance{nullptr};
}  // namespace

void Runtime::set_package_roots(std::vector<std::string> roots) {
  package_roots() = std::move(roots);
}

bool Runtime::initialized() {
  if (in_bad_fork()) return false;  // the parent's runtime is not usable here
  return instance.load(std::memory_order_acquire) != nullptr;
}

Runtime& Runtime::get() {
  check_not_forked();
  if (Runtime* r = instance.load(std::memory_order_acquire)) return *r;
  std::lock_guard<std::mutex> lock(init_mu);
  if (!instance.load(std::memory_order_relaxed)) {
    const DeviceEnv& devices = device_env();
    TPU_CHECK(devices.cpu_devices_error.empty(), ErrorKind::Runtime, devices.cpu_devices_error);
    TPU_CHECK(devices.visible_chips_error.empty(), ErrorKind::Runtime, devices.visible_chips_error);
    TPU_CHECK(env().device_thread_nice_error.empty(), ErrorKind::Runtime, env().device_thread_nice_error);
    pjrt::PluginChoice choice = pjrt::discover_plugin(env().pjrt_plugin, package_roots());
    auto plugin = pjrt::Plugin::load(choice);
    auto client = pjrt::create_client(std::move(plugin), devices.cpu_devices);
    select_visible_chips(*client);
    auto* made = new Runtime(std::move(client));
    made->set_device_thread_nice(std::nullopt);
    arm_fork_guard();
    instance.store(made, std::memory_order_release);
  }
  return *instance.load(std::memory_order_relaxed);
}

void Runtime::set_device_thread_nice(std::optional<int> fallback) {
  const std::optional<int> nice = env().device_thread_nice ? env().device_thread_nice : fallback;
  if (!nice) return;
  const std::string refused = set_nice(client_->worker_threads(), *nice);
  if (!refused.empty()) warn_once("device_thread_nice", "torch_tpu: " + refused);
}

void Runtime::check_device(int device) const {
  TPU_CHECK(device >= 0 && device < device_count(), ErrorKind::Runtime,
            "Invalid device index tpu:", device, ": ", device_count(),
            " tpu device(s) available (PJRT plugin '", plugin_choice().path, "')");
}

std::shared_ptr<CompiledProgram> Runtime::lookup(const std::string& key, bool count_miss) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_.find(key);
  if (it == cache_.end()) {
    static const Counter misses("misses");
    if (count_miss) misses.add();
    return nullptr;
  }
  static const Counter hits("hits");
  hits.add();
  lru_.splice(lru_.begin(), lru_, it->second.age);
  return it->second.program;
}

void Runtime::insert(const std::string& key, std::shared_ptr<CompiledProgram> program) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_.find(key);
  if (it != cache_.end()) {
    it->second.program = std::move(program);
    lru_.splice(lru_.begin(), lru_, it->second.age);
    return;
  }
  lru_.push_front(key);
  cache_.emplace(key, Entry{std::move(program), lru_.begin()});
  while (cache_.size() > kMaxPrograms) {
    cache_.erase(lru_.back());
    lru_.pop_back();
    count("evicted");
  }
}

void Runtime::forget(const std::string& key, const CompiledProgram* program) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cache_.find(key);
  if (it == cache_.end() || it->second.program.get() != program) return;
  lru_.erase(it->second.age);
  cache_.erase(it);
}

namespace {

// Compiles run side by side on the compile workers, so "compile_us" is the
// wall time during which at least one ran (their sum could exceed the run
// that waited for them): counted when the last running compile ends.
class CompileClock {
 public:
  void begin() {
    std::lock_guard<std::mutex> lock(mu_);
    if (active_++ == 0) since_ = std::chrono::steady_clock::now();
  }
  void end() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--active_ == 0)
      count("compile_us", std::chrono::duration_cast<std::chrono::microseconds>(
                              std::chrono::steady_clock::now() - since_).count());
  }

 private:
  std::mutex mu_;
  int active_ = 0;
  std::chrono::steady_clock::time_point since_;
};

struct Compiling {
  static CompileClock& clock() {
    static CompileClock* c = new CompileClock();  // workers may compile during exit
    return *c;
  }
  Compiling() { clock().begin(); }
  ~Compiling() { clock().end(); }
};

}  // namespace

std::unique_ptr<pjrt::Executable> Runtime::compile(const std::string& mlir,
                                                   std::vector<hlo::TensorType> outputs,
                                                   int device, const ProgramLabel& label,
                                                   CompileNote* later) {
  if (env().dump_hlo) std::cerr << mlir << std::endl;
  Compiling compiling;
  int64_t start_ns = now_ns();
  const char* tier = "disk";
  CacheKey disk_key{"", client_->plugin().identity(), client_->platform_version(), env().xla_flags,
                    client_->device_info(device).id, mlir};
  std::unique_ptr<pjrt::Executable> exe;
  bool damaged = false;
  auto bytes = disk_cache().load(disk_key, &damaged);
  if (damaged) count("disk_damaged");
  if (bytes) {
    try {
      exe = client_->deserialize(*bytes, outputs);
      count("disk_hits");
    } catch (const Error&) {
      exe.reset();  // a stale or damaged entry: compile afresh
    }
  }
  if (!exe) {
    tier = "compiled";
    exe = client_->compile(mlir, outputs, device);
    count("compiled");
    try {
      disk_cache().store(disk_key, exe->serialize());
      count("disk_writes");
    } catch (const Error&) {
      // A plugin that cannot serialize still runs; it only loses the cache.
    }
  }
  if (later) *later = {tier, start_ns, now_ns()};
  else note_compile(label, tier, device, start_ns, now_ns());
  return exe;
}

void Runtime::note_launch(std::unique_ptr<pjrt::Event> done) {
  if (!done) return;
  std::lock_guard<std::mutex> lock(mu_);
  while (!launches_.empty() && launches_.front()->ready()) launches_.pop_front();
  launches_.push_back(std::move(done));
}

void Runtime::synchronize(int device) {
  check_device(device);
  flush_all("synchronize");
  std::deque<std::unique_ptr<pjrt::Event>> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending.swap(launches_);
  }
  // Errors belong to the op's outputs and are raised where they are used,
  // not by an unrelated synchronize.
  for (size_t i = 0; i < pending.size(); ++i) {
    try {
      pending[i]->await();
    } catch (const Error&) {
    } catch (...) {
      // Interrupted: the launches not waited for yet stay known.
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t j = pending.size(); j-- > i;) launches_.push_front(std::move(pending[j]));
      throw;
    }
  }
  drain_releases();
  check_index_flags();  // like a CUDA device-side assert, it surfaces at synchronize
}


int64_t Runtime::launches_in_progress() const {
  std::lock_guard<std::mutex> lock(mu_);
  return std::count_if(launches_.begin(), launches_.end(), [](const auto& e) { return !e->ready(); });
}

void Runtime::clear_programs_for_test() {
  std::lock_guard<std::mutex> lock(mu_);
  cache_.clear();
  lru_.clear();
}

void Runtime::fail_next_launch(std::string message) {
  std::lock_guard<std::mutex> lock(mu_);
  injected_failure_ = std::move(message);
}

bool Runtime::take_injected_failure(std::string* message) {
  std::lock_guard<std::mutex> lock(mu_);
  if (injected_failure_.empty()) return false;
  *message = std::move(injected_failure_);
  injected_failure_.clear();
  return true;
}

}  // namespace torch_tpu::runtime
